#!/usr/bin/env bash
# `trident doctor`: each rule of the seed's troubleshooting table on a run made to trigger it
# and on one that must not trigger it.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
write_deck d.deck '[checkpoint]
at_end = false'

train() {  # train NAME RANKS OVERRIDES...
  local name=$1 ranks=$2
  shift 2
  timeout 120 mpirun -q -np "$ranks" "$TRIDENT" train d.deck --train.run_dir="$name" --train.steps=8 "$@" \
    > "$name.out" 2>&1 || fail "$name" "run failed: $(tail -2 "$name.out")"
}
# rule NAME 'finding text' yes|no TOPIC DOCTOR_ARGS...: the finding is (not) reported; the PASS
# line quotes its evidence, or the figures the rule checked (the "checked TOPIC" line).
rule() {
  local name=$1 finding=$2 expected=$3 topic=$4
  shift 4
  "$TRIDENT" doctor "$@" > "$name.doctor" 2>&1 || { fail "$name" "doctor failed: $(cat "$name.doctor")"; return; }
  local found=no
  grep -q "^finding: $finding" "$name.doctor" && found=yes
  local figures
  figures=$(grep -m1 -A1 "^finding: $finding" "$name.doctor" | sed -n 's/^  evidence: //p')
  [[ -z $figures ]] && figures=$(grep -m1 "checked.*$topic" "$name.doctor" | sed 's/^ *checked //')
  if [[ $found == "$expected" ]]; then pass "$name (${figures:0:160})"
  else fail "$name" "finding '$finding' expected $expected: $(cat "$name.doctor")"; fi
}

train serial 1
# Communication blocking: no overlap and an emulated slow link between two "nodes".
train blocking 2 --parallel.data=2 --comm.overlap=false --topology.ranks_per_node=1 --topology.link.rack=200,0.05
rule doctor_blocking_found "communication blocking" yes "communication" blocking
rule doctor_blocking_not_on_one_rank "communication blocking" no "communication" serial

# Memory close to the budget: the same run against a budget just above and far above its peak.
rule doctor_memory_found "memory close to the budget" yes memory serial --budget_gb=0.004
rule doctor_memory_not_with_room "memory close to the budget" no memory serial --budget_gb=1

# NaN steps.
train nan 1 --debug.nan_steps=3,4
rule doctor_nan_found "NaN or Inf" yes NaN nan
rule doctor_nan_not_when_clean "NaN or Inf" no NaN serial

# Pipeline bubble: 2 micro-batches on 2 stages (1/3 idle by the schedule) against 16 larger ones.
train bubble 2 --parallel.pipeline=2 --train.global_batch=2
train no_bubble 2 --parallel.pipeline=2 --model.hidden=128 --train.micro_batch=8 --train.global_batch=128
rule doctor_bubble_found "pipeline bubble" yes bubble bubble
rule doctor_bubble_not_with_16_micro_batches "pipeline" no bubble no_bubble

# Scaling: 4 ranks reducing flat over an emulated slow link are slower than 1 rank; 2 ranks on
# this host's 2 cores without emulation are faster.
train flat4 4 --parallel.data=4 --comm.algo=flat --topology.ranks_per_node=1 --topology.link.rack=500,0.02
train dp2 2 --parallel.data=2
rule doctor_scaling_found "throughput falls as ranks are added" yes scaling serial flat4
rule doctor_scaling_not_when_faster "throughput falls as ranks are added" no scaling serial dp2

expect_user_error doctor_missing_run "no metrics.h5" "$TRIDENT" doctor "$WORK/nothere"

# Checkpoints: a synchronous full checkpoint every step blocks training for longer than the
# steps themselves; none during training blocks nothing. Writes refused for lack of space
# (a 4 MB tmpfs holds one checkpoint of this model) are reported.
train ckpt_every_step 1 --checkpoint.full_interval=1steps
rule doctor_checkpoint_blocking_found "checkpoints blocking training" yes checkpoints ckpt_every_step
rule doctor_checkpoint_blocking_not_without "checkpoints blocking training" no checkpoints serial
mkdir -p small
if mount -t tmpfs -o size=4m tmpfs small 2> mount.err; then
  train ckpt_full_disk 1 --checkpoint.dir="$WORK/small" --checkpoint.full_interval=3steps --model.hidden=64
  umount small
  rule doctor_checkpoint_failed_found "checkpoint writes failed" yes checkpoints ckpt_full_disk
else
  fail doctor_checkpoint_failed_found "cannot mount a tmpfs (needs root): $(cat mount.err)"
fi
rule doctor_checkpoint_failed_not_when_written "checkpoint writes failed" no checkpoints ckpt_every_step
