#!/usr/bin/env bash
# stress-resume.sh N [RANKS [OVERRIDES...]] — kill a training job N times at random instants and
# resume it each time, as a requeued Slurm job after node failures does; then check that the
# result is the uninterrupted run's, bitwise.
#
# Each round starts `trident train ... --checkpoint.resume=auto` in a session of its own (setsid)
# and sends SIGKILL to every process of that session (mpirun and every rank, as a dead node or
# `scancel --signal=KILL` would) after a random delay. A round fails if the job died by itself
# before the kill (a restart that did not start). After the N kills the job runs to its end; its
# model.bin must equal the uninterrupted run's byte for byte, and its metrics.h5 must hold
# exactly one row per step (1..steps) whose loss, lr and gradient norm, and validation rows,
# equal the uninterrupted run's bitwise.
#
# Prints "PASS name" / "FAIL name: why" lines (tests/run.sh counts them) and a summary line:
#   stress-resume: N kills (K inside the run, R resumed from a checkpoint), final model bitwise ...
# Environment: BUILD (build directory, default build), SEED (random seed, default from the
# clock; printed), LABEL (the test names' prefix), STEPS (default 1000 + 100 N), MAX_DELAY_MS (default: 1/N of the uninterrupted run, at
# least 1.5 s),
# KEEP=1 keeps the work directory, SIGNALS=TERM,KILL sends SIGTERM first and SIGKILL 0-1 s later
# (a preemption whose grace time runs out; the stop checkpoint may or may not be complete).
set -u
N=${1:?usage: stress-resume.sh N [RANKS [OVERRIDES...]]}
RANKS=${2:-1}
shift $(($# >= 2 ? 2 : $#))
OVERRIDES=("$@")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRIDENT="$ROOT/${BUILD:-build}/bin/trident"
. "$ROOT/scripts/mpi-env.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
SEED=${SEED:-$(($(date +%s%N) % 100000))}
RANDOM=$SEED
STEPS=${STEPS:-$((1000 + 100 * N))}
WORK=$(mktemp -d /tmp/trident-stress.XXXXXX)
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
label=${LABEL:-"stress_${RANKS}rank$( ((${#OVERRIDES[@]})) && printf '_%s' "${OVERRIDES[@]}" | tr -c 'a-zA-Z0-9_\n' '_' | tr -s _)"}

"$TRIDENT" prepare data /usr/share/common-licenses/GPL-3 > /dev/null || { echo "FAIL $label: prepare"; exit 1; }
cat > s.deck <<DECK
[model]
layers = 2
heads = 2
hidden = 32
vocab = 256
seq_len = 32
[train]
steps = $STEPS
global_batch = 8
eval_interval = 50
eval_tokens = 1024
[checkpoint]
full_interval = 3steps
keep_full = 2
[metrics]
log_interval = 1
[data]
train = data/train.bin
val = data/val.bin
DECK

train() {  # train RUN_DIR EXTRA...: the job, in a session of its own; its pid in $job
  local dir=$1
  shift
  setsid mpirun -q -np "$RANKS" "$TRIDENT" train s.deck --train.run_dir="$dir" "${OVERRIDES[@]}" "$@" \
    >> "$dir.out" 2>&1 &
  job=$!
}

start=$(date +%s%N)
train straight
wait "$job" || { echo "FAIL $label: the uninterrupted run failed: $(tail -3 straight.out)"; exit 1; }
straight_ms=$((($(date +%s%N) - start) / 1000000))
MAX_DELAY_MS=${MAX_DELAY_MS:-$((straight_ms / N > 1500 ? straight_ms / N : 1500))}
echo "seed $SEED; uninterrupted run ${straight_ms} ms; kills after 50..${MAX_DELAY_MS} ms"

kills=0 inside=0 resumed=0 problems=0
for round in $(seq "$N"); do
  lines=$(cat killed.out 2> /dev/null | wc -l)
  delay=$((50 + (RANDOM * 32768 + RANDOM) % MAX_DELAY_MS))
  train killed --checkpoint.resume=auto
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  if kill -0 "$job" 2> /dev/null; then
    # The whole session: mpirun puts each rank in a process group of its own, and a rank that
    # outlived its launcher would still be writing when the next job starts (not a dead node).
    if [[ ${SIGNALS:-KILL} == TERM,KILL ]]; then  # a preemption: TERM, then KILL after a grace time
      pkill -TERM -s "$job"
      sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
    fi
    pkill -KILL -s "$job"
    wait "$job" 2> /dev/null
    while pgrep -s "$job" > /dev/null; do sleep 0.05; done
    kills=$((kills + 1))
    tail -n +$((lines + 1)) killed.out > round.out
    grep -q '^model: ' round.out && inside=$((inside + 1))
    echo "round $round: killed after $delay ms ($(grep -o '^step *[0-9]*' round.out | tail -1 | tr -s ' '))"
  else
    wait "$job"
    status=$?
    tail -n +$((lines + 1)) killed.out > round.out
    if [[ $status != 0 ]]; then
      problems=$((problems + 1))
      echo "FAIL ${label}_restart_$round: the restart died by itself (status $status): $(tail -3 round.out)"
    else
      echo "round $round: the run finished before its kill ($delay ms)"
    fi
  fi
  grep -q '^resumed from' round.out && resumed=$((resumed + 1))
done

train killed --checkpoint.resume=auto
wait "$job" || { echo "FAIL $label: the last restart failed: $(tail -3 killed.out)"; exit 1; }
((problems == 0)) && echo "PASS ${label}_every_restart_started ($kills kills, $resumed resumed from a checkpoint)"

if cmp -s straight/model.bin killed/model.bin; then
  echo "PASS ${label}_model_bitwise"
else
  echo "FAIL ${label}_model_bitwise: model.bin differs from the uninterrupted run's"
fi

if /usr/bin/python3 - straight/metrics.h5 killed/metrics.h5 "$STEPS" <<'PY'; then
import sys, h5py, numpy as np
a, b = (h5py.File(path, "r") for path in sys.argv[1:3])
steps = int(sys.argv[3])
problems = []
if not np.array_equal(b["step"][:], np.arange(1, steps + 1)):
    problems.append(f"step rows are not 1..{steps}: {len(b['step'])} rows")
for name in ("loss", "lr", "grad_norm", "val_step", "val_loss", "skipped"):
    if not np.array_equal(a[name][:], b[name][:]):
        problems.append(f"{name} differs ({len(a[name])} vs {len(b[name])} rows)")
for name in b:  # every per-step series has one row per step
    if isinstance(b[name], h5py.Dataset) and not name.startswith(("val_", "checkpoint")) and len(b[name]) != steps:
        problems.append(f"{name} has {len(b[name])} rows")
ck = b["checkpoint/step"][:]
if np.any(np.diff(ck) <= 0):
    problems.append(f"checkpoint/step not increasing: {ck.tolist()}")
print("; ".join(problems) or "metrics identical")
sys.exit(1 if problems else 0)
PY
  echo "PASS ${label}_metrics_history_complete"
else
  echo "FAIL ${label}_metrics_history_complete"
fi
echo "stress-resume: $kills kills ($inside inside the run), $resumed resumed from a checkpoint, $problems restarts that died; seed $SEED"
