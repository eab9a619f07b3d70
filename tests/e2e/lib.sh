# lib.sh — helpers of the end-to-end tests: each case prints "PASS name", "FAIL name: why" or
# "SKIP name: why" (a CPU feature this machine lacks);
# tests/run.sh counts those lines. Sourced with the repository root as the working directory.
ROOT=$(pwd)
TRIDENT="$ROOT/${BUILD:-build}/bin/trident"
. "$ROOT/scripts/mpi-env.sh"
WORK=$(mktemp -d /tmp/trident-e2e.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

# check NAME COMMAND...: PASS when the command succeeds (with the last line it printed), else
# FAIL with its last three lines; what it prints goes to NAME.check in the working directory.
check() {
  local name=$1; shift
  if "$@" > "$name.check" 2>&1; then pass "$name ($(tail -1 "$name.check"))"; else fail "$name" "$(tail -3 "$name.check")"; fi
}

# same_loss NAME OURS.out THEIRS.out WHO: the losses on the last lines of the two outputs
# ("val_loss X", as trident eval, hf_check.py and torch_llama.py print them) within 1e-5
# relative: ours is printed with 6 digits.
same_loss() {
  check "$1" /usr/bin/python3 - "$(tail -1 "$2")" "$(tail -1 "$3")" "$4" <<'PY'
import sys
ours, theirs = float(sys.argv[1].split()[1]), float(sys.argv[2].split()[1])
print(f"trident {ours} {sys.argv[3]} {theirs}")
sys.exit(0 if abs(ours - theirs) <= 1e-5 * abs(theirs) else 1)
PY
}

# skip NAME WHY: a case this machine cannot run (a CPU feature it lacks); never a failure.
skip() { echo "SKIP $1: $2"; }

# bind_to RANKS: mpirun's binding for a timed run — a core per rank where the host has as many
# (scripts/mpi-env.sh binds nothing, for runs that oversubscribe). Unbound, two ranks on two
# cores were measured here to run 1.5x apart for seconds at a time (the scheduler put both on one
# core), which is noise to the tests that compare times (balance, plan).
bind_to() {
  if (( $1 <= $(getconf _NPROCESSORS_ONLN) )); then echo "--bind-to core"; else echo "--bind-to none"; fi
}

# A small byte-level corpus for the decks below, made once per test script.
"$TRIDENT" prepare "$WORK/data" /usr/share/common-licenses/GPL-3 > /dev/null

# A minimal valid deck (2 steps of a tiny model on that corpus); extra lines go in before the
# [data] section, so the line numbers of what they add are fixed (line 11 on).
write_deck() {  # write_deck FILE [extra INI text]
  cat > "$1" <<DECK
[model]
layers = 4
heads = 4
hidden = 64
vocab = 256
seq_len = 32
[train]
run_dir = run
steps = 2
eval_tokens = 1024
${2:-}
[data]
train = $WORK/data/train.bin
val = $WORK/data/val.bin
DECK
}

# The deck of the restart tests: 12 steps of a tiny model, a full checkpoint every 4 steps, all
# kept; run directories are given on the command line.
write_resume_deck() {  # write_resume_deck FILE
  cat > "$1" <<DECK
[model]
layers = 4
heads = 4
hidden = 32
vocab = 256
seq_len = 32
[train]
steps = 12
global_batch = 8
eval_interval = 6
eval_tokens = 1024
run_dir = straight
[checkpoint]
full_interval = 4steps
keep_full = 10
[data]
train = $WORK/data/train.bin
val = $WORK/data/val.bin
[comm]
bucket_mb = 0.01
DECK
}

# expect_user_error NAME 'substring1|substring2' COMMAND...: exit status 2, exactly one line on
# stderr, it starts with "error:" and contains every substring, and no run directory appeared.
# mpirun's own notice that a rank exited non-zero (a block between dashed lines; `mpirun -q`
# drops it) is not ours and is left out of the count.
expect_user_error() {
  local name=$1 wanted=$2
  shift 2
  local dir="$WORK/$name"
  mkdir -p "$dir"
  ( cd "$dir" && timeout -k 10 60 "$@" >stdout 2>stderr; echo $? >status )  # -k: a hung rank may ignore SIGTERM
  local status lines
  status=$(cat "$dir/status")
  sed -i '/^-\{20,\}$/,/^-\{20,\}$/d' "$dir/stderr"
  lines=$(wc -l < "$dir/stderr")
  if [[ $status != 2 ]]; then fail "$name" "exit status $status, expected 2 ($(head -c 300 "$dir/stderr"))"; return; fi
  if [[ $lines != 1 ]]; then fail "$name" "$lines lines on stderr, expected 1: $(head -c 400 "$dir/stderr")"; return; fi
  if ! grep -q '^error: ' "$dir/stderr"; then fail "$name" "no 'error:' line: $(cat "$dir/stderr")"; return; fi
  local part
  IFS='|' read -ra parts <<< "$wanted"
  for part in "${parts[@]}"; do
    if ! grep -qF -- "$part" "$dir/stderr"; then fail "$name" "message lacks '$part': $(cat "$dir/stderr")"; return; fi
  done
  if [[ -e "$dir/run" ]]; then fail "$name" "the run directory was created"; return; fi
  pass "$name"
}

# same_losses NAME A B [TOLERANCE] [FIRST_STEP]: the loss of every step of B (from FIRST_STEP
# on) equals A's — bitwise when TOLERANCE is 0, else within it relative — and, bitwise only,
# B's steps are 1..N without gap or repeat and the final models are identical.
same_losses() {
  local name=$1 a=$2 b=$3 tolerance=${4:-0} first=${5:-1}
  if /usr/bin/python3 - "$a" "$b" "$tolerance" "$first" > "$name.cmp" 2>&1 <<'PY'
import sys, h5py, numpy as np
a, b, tol, first = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
fa, fb = h5py.File(a + "/metrics.h5", "r"), h5py.File(b + "/metrics.h5", "r")
sa, sb = fa["step"][:], fb["step"][:]
la = dict(zip(sa, fa["loss"][:]))
rows = [(s, l) for s, l in zip(sb, fb["loss"][:]) if s >= first]
if not rows: sys.exit(print("no steps to compare") or 1)
err = max(abs(la[s] - l) / abs(la[s]) for s, l in rows)
print(f"{len(rows)} steps from {rows[0][0]}, max relative difference {err:.1e}")
if tol == 0:
    if list(sb) != list(range(1, len(sb) + 1)) or len(sb) != len(sa):
        sys.exit(print(f"steps of {b}: {list(sb)}") or 1)
    if open(a + "/model.bin", "rb").read() != open(b + "/model.bin", "rb").read():
        sys.exit(print("final models differ") or 1)
sys.exit(0 if err <= tol else 1)
PY
  then pass "$name ($(cat "$name.cmp"))"; else fail "$name" "$(cat "$name.cmp")"; fi
}

# train_run NAME RANKS OVERRIDES...: `trident train a.deck` on RANKS ranks into the run directory
# NAME (its output in NAME.out); a failed run is reported, and what compares its metrics fails.
train_run() {
  local name=$1 ranks=$2
  shift 2
  timeout 300 mpirun -q -np "$ranks" "$TRIDENT" train a.deck --train.run_dir="$name" "$@" > "$name.out" 2>&1 ||
    echo "run $name failed: $(tail -2 "$name.out")" >&2
}

# The small model of the device tests (device_guard.sh, graphs.sh): 2 blocks, 8 steps of 8
# sequences in micro-batches of 1, evaluated at steps 4 and 8, small gradient buckets.
write_device_deck() {  # write_device_deck FILE
  cat > "$1" <<DECK
[model]
layers = 2
heads = 4
hidden = 32
vocab = 256
seq_len = 32
[train]
steps = 8
global_batch = 8
micro_batch = 1
eval_interval = 4
eval_tokens = 1024
[data]
train = $WORK/data/train.bin
val = $WORK/data/val.bin
[comm]
bucket_mb = 0.01
DECK
}

# same_bits A B: the runs in A and B have the same per-step losses, validation losses, gradient
# norms and final parameters, bit for bit (exit status 0).
same_bits() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys, h5py
a, b = (h5py.File(d + "/metrics.h5", "r") for d in sys.argv[1:])
same = all(a[k][:].tobytes() == b[k][:].tobytes() for k in ("loss", "val_loss", "grad_norm"))
same = same and open(sys.argv[1] + "/model.bin", "rb").read() == open(sys.argv[2] + "/model.bin", "rb").read()
sys.exit(0 if same else 1)
PY
}
