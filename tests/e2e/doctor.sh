#!/usr/bin/env bash
# `trident doctor` on real runs: the rules whose figures do not depend on timing (memory against
# a budget, NaN steps, failed checkpoint writes) on a run made to trigger them and on one that
# must not; and a smoke test of every rule over real runs (it runs and names its rules). The
# timing rules (communication, scaling, bubble, checkpoint blocking) are tested on synthetic
# metrics.h5 files with known figures: tests/unit/test_doctor.cpp.
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

# Memory close to the budget: the same run against a budget just above and far above its peak.
rule doctor_memory_found "memory close to the budget" yes memory serial --budget_gb=0.004
rule doctor_memory_not_with_room "memory close to the budget" no memory serial --budget_gb=1

# NaN steps.
train nan 1 --debug.nan_steps=3,4
rule doctor_nan_found "NaN or Inf" yes NaN nan
rule doctor_nan_not_when_clean "NaN or Inf" no NaN serial

# Smoke test over real runs: the doctor runs on a serial, a pipeline and a data-parallel run and
# names every rule it checked (whatever the timings say).
train bubble 2 --parallel.pipeline=2 --train.global_batch=2
train dp2 2 --parallel.data=2
if "$TRIDENT" doctor serial bubble dp2 > smoke.doctor 2>&1; then
  missing=""
  for rule in "communication blocking:" "memory:" "NaN:" "pipeline bubble:" "checkpoints:" "scaling: 1 ranks"; do
    grep -q "checked .*$rule" smoke.doctor || missing+=" '$rule'"
  done
  [[ -z $missing ]] && pass "doctor_names_its_rules_on_real_runs" || fail doctor_names_its_rules_on_real_runs "no$missing: $(head -c 600 smoke.doctor)"
else
  fail doctor_names_its_rules_on_real_runs "doctor failed: $(cat smoke.doctor)"
fi

expect_user_error doctor_missing_run "no metrics.h5" "$TRIDENT" doctor "$WORK/nothere"

# Checkpoint writes refused for lack of space (a 4 MB tmpfs holds one checkpoint of this model)
# are reported.
mkdir -p small
if mount -t tmpfs -o size=4m tmpfs small 2> mount.err; then
  train ckpt_full_disk 1 --checkpoint.dir="$WORK/small" --checkpoint.full_interval=3steps --model.hidden=64
  umount small
  rule doctor_checkpoint_failed_found "checkpoint writes failed" yes checkpoints ckpt_full_disk
else
  fail doctor_checkpoint_failed_found "cannot mount a tmpfs (needs root): $(cat mount.err)"
fi
rule doctor_checkpoint_failed_not_when_written "checkpoint writes failed" no checkpoints serial
