#!/usr/bin/env bash
# tier: long
# Load balance (issue 18): debug.slowdown makes a rank slow; the balance measurement finds the
# slow stage or replica (metrics.h5 balance/*, a console line) and stays quiet on a balanced
# run; balance.pipeline moves blocks off a slow stage without changing the losses, survives a
# kill and resume, and never moves on a balanced run; the deck's keys are checked. Tiny runs: the whole script is meant
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
steps = 30
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
  # shellcheck disable=SC2046
  mpirun $(bind_to "$ranks") -np "$ranks" "$TRIDENT" train b.deck --train.run_dir="$name" "$@" > "$name.out" 2>&1 ||
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
sys.exit(0 if low <= ratio <= high and index == max(range(n), key=lambda i: ms[i]) else 1)
PY
  then pass "$name ($(cat "$name.cmp"))"; else fail "$name" "$(cat "$name.cmp")"; fi
}

# A slowed stage: rank 1 is stage 1 of p = 2 (8 blocks, 4 each). Its time doubles (the last
# stage also holds the head, so the ratio is above 2); the console says so.
run measure_slow_stage_p2 2 --parallel.pipeline=2 --debug.slowdown=1:2 &&
  measured measure_slow_stage_p2 stage 1 1.5 100 &&
  { grep -q "^balance: after step 30: .*above balance.threshold 1.15" measure_slow_stage_p2.out &&
      pass measure_console_line || fail measure_console_line "no balance line in measure_slow_stage_p2.out"; }
# A slowed replica: d = 2, rank 1 (replica 1) at 2x. (The bench's case is 1.5x; here 2x keeps
# the measured ratio clear of the 1.15 threshold when something else takes a core for a while.)
# Clean-clone runs measured 1.50 (2.16 and 3.24 ms per micro-batch) and 3.14 (1.35 and 4.25), not
# 2: the bounds ask for the slow replica found, well above the 1.15 threshold, not for the
# factor itself (the host's cores drift by 1.5x; the sleep wakes late).
run measure_slow_replica_d2 2 --parallel.data=2 --debug.slowdown=1:2 &&
  measured measure_slow_replica_d2 replica 1 1.3 5

# rebalanced NAME REFERENCE RANKS KEY MARK OVERRIDES...: a run with KEY = true whose console
# has a line starting "balance: MARK" (the move was made), and whose per-step losses equal
# REFERENCE's within 1e-5 relative.
rebalanced() {
  local name=$1 reference=$2 ranks=$3 key=$4 mark=$5
  shift 5
  run "$name" "$ranks" --"$key"=true "$@" || return 1
  local made
  made=$(grep -m1 "^balance: $mark" "$name.out") || { fail "$name" "no move: $(grep -m2 '^balance:' "$name.out")"; return 1; }
  same_losses "$name (${made#balance: })" "$reference" "$name" 1e-5
}

# Pipeline re-split (balance.pipeline): a slowed stage gives blocks to the other at a step
# boundary, and the losses stay those of the static run (the same model, other stage borders).
moved() { rebalanced "$1" "$2" "$3" balance.pipeline "moved blocks" "${@:4}"; }
moved moved_p2_1f1b measure_slow_stage_p2 2 --parallel.pipeline=2 --debug.slowdown=1:2
moved moved_p2_gpipe measure_slow_stage_p2 2 --parallel.pipeline=2 --parallel.schedule=gpipe --debug.slowdown=1:2
moved moved_p2_zb_h1 measure_slow_stage_p2 2 --parallel.pipeline=2 --parallel.schedule=zb-h1 --debug.slowdown=1:2
moved moved_p4 measure_slow_stage_p2 4 --parallel.pipeline=4 --debug.slowdown=1:2
moved moved_p2d2_zero1 measure_slow_stage_p2 4 --parallel.pipeline=2 --parallel.data=2 --optim.zero=1 --debug.slowdown=2:2
# ZeRO-2 couples the replicas every micro-batch (each block's reduce-scatter): a rank slowed alone
# slows its data partner too, so both of stage 1's ranks are slowed here; the rebuilt model takes
# new gradient slots and the reducer's wait for them.
moved moved_p2d2_zero2 measure_slow_stage_p2 4 --parallel.pipeline=2 --parallel.data=2 --optim.zero=2 --debug.slowdown=2:3,3:3
# ZeRO-3: the rebuilt model's parameter slots and shards, the shards read back from the move's state.
moved moved_p2d2_zero3 measure_slow_stage_p2 4 --parallel.pipeline=2 --parallel.data=2 --optim.zero=3 --debug.slowdown=2:3,3:3
run static_bf16 2 --parallel.pipeline=2 --optim.precision=bf16 &&
  moved moved_p2_bf16 static_bf16 2 --parallel.pipeline=2 --optim.precision=bf16 --debug.slowdown=1:2

# Interleaved (v = 2 chunks a stage, 2,2,2,2 blocks per virtual stage): the slowed stage 1 gives
# blocks from its own chunks to stage 0's; the chunk structure stays, and the losses stay those of
# the static 1F1B run (interleaving orders the same sums).
moved moved_p2_v2 measure_slow_stage_p2 2 --parallel.pipeline=2 --parallel.virtual_stages=2 --debug.slowdown=1:2 &&
  { grep -qE "^balance: moved blocks after step [0-9]+: chunks 2,2,2,2 -> [0-9],[12],[0-9],1 \(stages 4,4 -> [56],[32]\)" \
      moved_p2_v2.out && pass "moved_p2_v2_within_chunks ($(grep -m1 -o 'chunks [^(]*([^)]*)' moved_p2_v2.out))" ||
      fail moved_p2_v2_within_chunks "$(grep -m2 '^balance: moved\|^balance: after' moved_p2_v2.out)"; }

# A move that would not fit is not made: with memory.budget_gb between the deck's split (4,4:
# 1.7 MB on the busiest rank by the memory model) and any move off the slowed stage (5,3: 2.1 MB,
# 6,2: 2.4 MB), the decision says why and nothing moves.
run move_refused 2 --parallel.pipeline=2 --debug.slowdown=1:2 --balance.pipeline=true --memory.budget_gb=0.0019 && {
  if grep -q "^balance: moved" move_refused.out; then fail move_refused_by_memory "$(grep -m1 '^balance: moved' move_refused.out)"
  elif grep -q "but it does not fit: the busiest rank needs" move_refused.out; then
    pass "move_refused_by_memory ($(grep -m1 -o 'but it does not fit: [^;]*' move_refused.out | cut -c1-110))"
  else fail move_refused_by_memory "no refusal: $(grep -m3 '^balance:' move_refused.out)"; fi
}

# Replica shares (balance.replicas): the slowed replica gets fewer micro-batches of the global
# batch, the faster one more; the same sequences, normalised by tokens: the static run's losses.
shared() { rebalanced "$1" "$2" "$3" balance.replicas "replica shares now" "${@:4}"; }
shared shares_d2 measure_slow_replica_d2 2 --parallel.data=2 --debug.slowdown=1:2
shared shares_p2d2_gpipe_zero1 measure_slow_replica_d2 4 --parallel.pipeline=2 --parallel.data=2 --parallel.schedule=gpipe \
  --optim.zero=1 --debug.slowdown=1:2,3:2
# Interleaved over 2 stages, shares move two micro-batches at a time: 4,4 -> 6,2.
shared shares_p2d2_v2 measure_slow_replica_d2 4 --parallel.pipeline=2 --parallel.data=2 --parallel.virtual_stages=2 \
  --debug.slowdown=1:2,3:2 &&
  { grep -q "^balance: replica shares now 6,2 " shares_p2d2_v2.out && pass shares_p2d2_v2_in_groups ||
      fail shares_p2d2_v2_in_groups "$(grep -m2 '^balance: replica\|^balance: after' shares_p2d2_v2.out)"; }
run static_d2_bf16 2 --parallel.data=2 --optim.precision=bf16 &&
  shared shares_d2_bf16 static_d2_bf16 2 --parallel.data=2 --optim.precision=bf16 --debug.slowdown=1:2

# The micro-batch count (balance.micro_batches): the seed's rule as written sets N =
# ceil(max/median) of the stage times when they are imbalanced — 2 for a pipeline of 2 with a
# slow stage, from 8; the model's rule probes a second micro-batch size, fits the time per
# micro-batch, t(b) = a + b·s, and takes the count of least (m + p − 1)·t. The same sequences
# per step whatever the count: the static run's losses (summed in another order: within 1e-5).
# counted NAME REFERENCE RANKS RULE OVERRIDES...
counted() {
  local name=$1 reference=$2 ranks=$3 rule=$4 made
  shift 4
  run "$name" "$ranks" --balance.micro_batches="$rule" "$@" || return 1
  made=$(grep -m1 "^balance: micro-batches now" "$name.out") ||
    { fail "$name" "no change of the count: $(grep -m2 '^balance:' "$name.out")"; return 1; }
  same_losses "$name (${made#balance: })" "$reference" "$name" 1e-5
}
counted count_seed_p2 measure_slow_stage_p2 2 seed --parallel.pipeline=2 --debug.slowdown=1:2 &&
  { grep -q "^balance: after step [0-9]*: micro-batches (seed 4.1): max/median [0-9.]* -> N = 2; 8 -> 2" count_seed_p2.out &&
      pass "count_seed_logged ($(grep -m1 'micro-batches (seed' count_seed_p2.out | cut -d: -f3- | cut -c1-60))" ||
      fail count_seed_logged "$(grep -m3 '^balance:' count_seed_p2.out)"; }
counted count_model_p2 measure_slow_stage_p2 2 model --parallel.pipeline=2 &&
  { grep -q "^balance: after step [0-9]*: micro-batches (model): t(b) = " count_model_p2.out &&
      pass "count_model_fitted ($(grep -m1 'micro-batches (model): t(b)' count_model_p2.out | cut -d: -f3- | cut -c1-110))" ||
      fail count_model_fitted "no fitted decision: $(grep -m3 '^balance:' count_model_p2.out)"; }
counted count_seed_gpipe_zero1 measure_slow_stage_p2 4 seed --parallel.pipeline=2 --parallel.data=2 \
  --parallel.schedule=gpipe --optim.zero=1 --debug.slowdown=2:2
counted count_model_bf16 static_bf16 2 model --parallel.pipeline=2 --optim.precision=bf16
# Interleaved, the counts are multiples of the stages: the seed's N = 2 is one.
counted count_seed_p2_v2 measure_slow_stage_p2 2 seed --parallel.pipeline=2 --parallel.virtual_stages=2 \
  --debug.slowdown=1:2

# No false positives: a run of equal stages makes no move over 200 steps (10 measurements, each
# of which could). Equal: 4 blocks a stage at hidden 128, where the last stage's head and loss
# cost about a sixth of a block (at hidden 32 they cost one to one and a half blocks, by CPU and
# moment, and moving a block off the last stage was then right). Unless the host's cores differ:
# on a 2-core VM a rank bound to core 0 was measured here 1.2-1.5x slower than the same work on
# core 1 for whole runs (interrupts, the launcher, the hypervisor), and moving blocks off it is
# then right too. So a run that moves is repeated with the ranks on swapped cores: a move that
# follows the core (off stage 0, then off stage 1, or none) is the host's; one that follows the
# stage both times is ours — a measurement that charges a stage for what is not its work.
# first_move_off NAME: the stage the first move of NAME took blocks from ("" when none).
first_move_off() {
  sed -n 's/^balance: moved blocks after step [0-9]*: stages \([0-9]*\),\([0-9]*\) -> \([0-9]*\),.*/\1 \3/p' "$1.out" |
    head -1 | awk '{print ($2 < $1) ? 0 : 1}'
}
# move_of NAME: "4,4 -> 3,5 after step 40", NAME's first move.
move_of() {
  sed -n 's/^balance: moved blocks after step \([0-9]*\): stages \([0-9,]* -> [0-9,]*\).*/\2 after step \1/p' "$1.out" | head -1
}
above() { grep -c '^balance: after step .*slowest' "$1.out"; }
balanced_run() {  # balanced_run NAME CORES
  mpirun --bind-to core --cpu-list "$2" -np 2 "$TRIDENT" train b.deck --train.run_dir="$1" --parallel.pipeline=2 \
    --model.hidden=128 --balance.pipeline=true --train.steps=200 --balance.interval=20 > "$1.out" 2>&1 ||
    { fail balanced_no_move "run failed: $(grep -m1 -E 'error|rank' "$1.out")"; return 1; }
}
if (( $(getconf _NPROCESSORS_ONLN) < 2 )); then skip balanced_no_move "one core: the two stages cannot each have one"
elif balanced_run balanced_200 0,1; then
  off=$(first_move_off balanced_200)
  if [[ -z $off ]]; then
    pass "balanced_no_move (10 measurements, $(above balanced_200) above the threshold, no move)"
  elif balanced_run balanced_swapped 1,0; then
    off_swapped=$(first_move_off balanced_swapped)
    moves="ranks on cores 0,1: $(move_of balanced_200); on cores 1,0: $(move_of balanced_swapped)"
    if [[ $off_swapped == "$off" ]]; then fail balanced_no_move "blocks moved off stage $off on either core: $moves"
    elif [[ -z $off_swapped ]]; then pass "balanced_no_move (a host's slow moment: $moves, none)"
    else pass "balanced_no_move (the moves followed the core, not the stage: $moves)"; fi
  fi
fi

# killed_resumed NAME STRAIGHT MARK "OVERRIDES": a run with OVERRIDES killed after its checkpoint
# of step 20 (SIGKILL at step 23) and resumed equals the uninterrupted run STRAIGHT, and the
# resume says "balance: MARK" (it took what the checkpoint recorded).
killed_resumed() {
  local name=$1 straight=$2 mark=$3 overrides=$4
  # shellcheck disable=SC2086
  mpirun -np 2 "$TRIDENT" train b.deck --train.run_dir="${name}_run" $overrides --checkpoint.full_interval=20steps \
    --debug.fail_rank=0 --debug.fail_step=23 --debug.fail_mode=sigkill > "${name}_killed.out" 2>&1
  # shellcheck disable=SC2086
  if [[ -e ${name}_run/checkpoints/step-00000020.full.h5 ]] &&
     mpirun -np 2 "$TRIDENT" train b.deck --train.run_dir="${name}_run" $overrides --checkpoint.full_interval=20steps \
       --checkpoint.resume=auto > "${name}_resumed.out" 2>&1; then
    if grep -q "^balance: $mark" "${name}_resumed.out"; then same_losses "$name" "$straight" "${name}_run" 1e-5
    else fail "$name" "the resume did not take what the checkpoint recorded: $(grep -m3 '^balance\|^resumed' "${name}_resumed.out")"; fi
  else fail "$name" "no checkpoint of step 20 before the kill, or the resume failed"; fi
}
# A run that moved blocks (after step 10 or 15) resumes with the split; one that changed its
# micro-batch count (count_seed_p2: after step 10) with the count; one whose replica shares
# changed (shares_d2) with the shares.
KR="--parallel.pipeline=2 --debug.slowdown=1:2 --balance.pipeline=true"
run moved_straight 2 $KR --checkpoint.full_interval=20steps &&
  killed_resumed moved_kill_resume moved_straight "resuming with the split the checkpoint recorded" "$KR"
KRV="--parallel.pipeline=2 --parallel.virtual_stages=2 --debug.slowdown=1:2 --balance.pipeline=true"
run moved_v2_straight 2 $KRV --checkpoint.full_interval=20steps &&
  killed_resumed moved_v2_kill_resume moved_v2_straight "resuming with the split the checkpoint recorded, chunks" "$KRV"
killed_resumed count_kill_resume count_seed_p2 "resuming with the micro-batches the checkpoint recorded, 2 x 4" \
  "--parallel.pipeline=2 --debug.slowdown=1:2 --balance.micro_batches=seed"
killed_resumed shares_kill_resume shares_d2 "resuming with the replica shares the checkpoint recorded" \
  "--parallel.data=2 --debug.slowdown=1:2 --balance.replicas=true"

# The keys are checked like every other.
expect_user_error slowdown_rank_beyond_world 'debug.slowdown names rank 2|from 0 to 1' \
  mpirun -np 2 "$TRIDENT" train "$WORK/b.deck" --parallel.data=2 --debug.slowdown=2:2
expect_user_error slowdown_factor_below_one 'debug.slowdown|at least 1' \
  mpirun -np 1 "$TRIDENT" train "$WORK/b.deck" --debug.slowdown=0:0.5
expect_user_error slowdown_malformed "'0-2' is not RANK:FACTOR" \
  mpirun -np 1 "$TRIDENT" train "$WORK/b.deck" --debug.slowdown=0-2
# A host sleep cannot slow a GPU's stream, whose clock times the passes there.
expect_user_error slowdown_on_a_gpu 'debug.slowdown with kernels.device = cuda|host sleep|cpu or guard' \
  mpirun -np 1 "$TRIDENT" train "$WORK/b.deck" --debug.slowdown=0:2 --kernels.device=cuda
expect_user_error micro_batches_unknown_rule 'balance.micro_batches|fixed|seed|model' \
  mpirun -np 1 "$TRIDENT" train "$WORK/b.deck" --balance.micro_batches=elastic
expect_user_error micro_batches_without_measurements 'balance.micro_batches = seed acts on the balance measurements' \
  mpirun -np 1 "$TRIDENT" train "$WORK/b.deck" --balance.micro_batches=seed --balance.interval=0
expect_user_error balance_threshold_below_one 'balance.threshold' \
  mpirun -np 1 "$TRIDENT" train "$WORK/b.deck" --balance.threshold=0.9
