#!/usr/bin/env bash
# Load balance (issue 18): debug.slowdown makes a rank slow; the balance measurement finds the
# slow stage or replica (metrics.h5 balance/*, a console line) and stays quiet on a balanced
# run; the deck's balance and slowdown keys are checked. Tiny runs: the whole script is meant
# to take about two minutes on 2 cores with up to 8 ranks.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
cat > b.deck <<DECK
[model]
layers = 8
heads = 4
hidden = 32
vocab = 256
seq_len = 32
[train]
steps = 20
global_batch = 8
micro_batch = 1
eval_interval = 0
eval_tokens = 1024
run_dir = static
[data]
train = $WORK/data/train.bin
val = $WORK/data/val.bin
[comm]
bucket_mb = 0.01
[balance]
interval = 5
DECK

# run NAME RANKS OVERRIDES...: a training run into directory NAME (its console in NAME.out).
run() {
  local name=$1 ranks=$2
  shift 2
  mpirun -np "$ranks" "$TRIDENT" train b.deck --train.run_dir="$name" "$@" > "$name.out" 2>&1 ||
    { fail "$name" "run failed: $(grep -m1 -E 'error|rank' "$name.out")"; return 1; }
}

# measured NAME KIND INDEX LOW HIGH: the last measurement's KIND (stage|replica) ratio is in
# [LOW, HIGH], and the slowest of them is INDEX.
measured() {
  local name=$1
  if $PY - "$@" > "$name.cmp" 2>&1 <<'PY'
import sys, h5py
name, kind, index, low, high = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
f = h5py.File(name + "/metrics.h5", "r")
n = sum(1 for k in f["balance"].keys() if k.startswith(kind) and k[len(kind):].isdigit())
ms = [f[f"balance/{kind}{i}/forward_ms"][-1] + f[f"balance/{kind}{i}/backward_ms"][-1] for i in range(n)]
ratio = f[f"balance/{kind}_ratio"][-1]
print(f"{kind} ms per micro-batch {', '.join(f'{m:.2f}' for m in ms)}, max/min {ratio:.2f}")
sys.exit(0 if low <= ratio <= high and max(range(n), key=lambda i: ms[i]) == index else 1)
PY
  then pass "$name ($(cat "$name.cmp"))"; else fail "$name" "$(cat "$name.cmp")"; fi
}

# A slowed stage: rank 1 is stage 1 of p = 2 (8 blocks, 4 each). Its time doubles (the last
# stage also holds the head, so the ratio is above 2); the console says so.
run measure_slow_stage_p2 2 --parallel.pipeline=2 --debug.slowdown=1:2 &&
  measured measure_slow_stage_p2 stage 1 1.5 100 &&
  { grep -q "^balance: after step 20: .*above balance.threshold 1.15" measure_slow_stage_p2.out &&
      pass measure_console_line || fail measure_console_line "no balance line in measure_slow_stage_p2.out"; }
# A slowed replica: d = 2, rank 1 (replica 1) at 1.5x.
run measure_slow_replica_d2 2 --parallel.data=2 --debug.slowdown=1:1.5 &&
  measured measure_slow_replica_d2 replica 1 1.2 3
# Balanced replicas: nothing found (the same work on every replica).
run measure_balanced_d2 2 --parallel.data=2 --balance.threshold=1.5 && {
  measured measure_balanced_d2 replica 0 1 1.5 || measured measure_balanced_d2 replica 1 1 1.5
  grep -q "^balance:" measure_balanced_d2.out && fail measure_balanced_quiet "a balance line on a balanced run" ||
    pass measure_balanced_quiet
}

# The keys are checked like every other.
expect_user_error slowdown_rank_beyond_world 'debug.slowdown names rank 2|from 0 to 1' \
  mpirun -np 2 "$TRIDENT" train "$WORK/b.deck" --parallel.data=2 --debug.slowdown=2:2
expect_user_error slowdown_factor_below_one 'debug.slowdown|at least 1' \
  mpirun -np 1 "$TRIDENT" train "$WORK/b.deck" --debug.slowdown=0:0.5
expect_user_error slowdown_malformed "'0-2' is not RANK:FACTOR" \
  mpirun -np 1 "$TRIDENT" train "$WORK/b.deck" --debug.slowdown=0-2
expect_user_error balance_threshold_below_one 'balance.threshold' \
  mpirun -np 1 "$TRIDENT" train "$WORK/b.deck" --balance.threshold=0.9
