#!/usr/bin/env bash
# Checkpoints and restart: bit-exact resume after a SIGKILL (1 rank and tensor 2 x pipeline 2 x
# data 2 with ZeRO-1), resharding onto other layouts, stop signals, fast checkpoints, corrupt
# and truncated newest checkpoints, `trident inspect`, a file system that fills up, NaN steps,
# asynchronous writes, keep-N and time intervals.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
write_resume_deck c.deck

# run NAME RANKS OVERRIDES...: a training run into directory NAME (output in NAME.out).
run() {
  local name=$1 ranks=$2
  shift 2
  timeout 120 mpirun -q -np "$ranks" "$TRIDENT" train c.deck --train.run_dir="$name" "$@" > "$name.out" 2>&1
}

L222="--parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=1"
run straight 1 || fail straight_run "$(tail -3 straight.out)"
run straight222 8 $L222 || fail straight222_run "$(tail -3 straight222.out)"
run straight212 4 --parallel.tensor=2 --parallel.data=2 --optim.zero=1 || fail straight212_run "$(tail -3 straight212.out)"

# kill -9 of one rank mid-run: the job ends (well within 60 s) and resume = auto continues from
# the last full checkpoint; the per-step losses and the final model are those of the
# uninterrupted run, bitwise.
killed_then_resumed() {  # NAME RANKS RANK_TO_KILL REFERENCE_RUN OVERRIDES...
  local name=$1 ranks=$2 rank=$3 reference=$4
  shift 4
  local start=$SECONDS
  run "$name" "$ranks" "$@" --debug.fail_rank="$rank" --debug.fail_step=7 --debug.fail_mode=sigkill
  local status=$? took=$((SECONDS - start))
  if [[ $status == 0 || $took -gt 60 ]]; then fail "${name}_job_ends" "status $status after $took s"; return; fi
  pass "${name}_job_ends (status $status in $took s)"
  if ! ls "$name/checkpoints/step-00000004.full.h5" > /dev/null 2>&1; then fail "$name" "no checkpoint of step 4"; return; fi
  run "$name" "$ranks" "$@" --checkpoint.resume=auto || { fail "$name" "resume failed: $(tail -3 "$name.out")"; return; }
  grep -q "resumed from $name/checkpoints/step-00000004.full.h5" "$name.out" || { fail "$name" "did not resume from step 4"; return; }
  same_losses "${name}_bitwise" "$reference" "$name"
}
killed_then_resumed kill9_serial 1 0 straight
killed_then_resumed kill9_t2p2d2_zero 8 5 straight222 $L222
# The tied embedding over 2 stages of 4 replicas: its two copies are summed after each stage's
# data group has reduced its own, so they stay one parameter bit for bit, and the resumed run
# (both copies read from the checkpoint's one) is the uninterrupted one. (Summed before, the
# two stages' reductions added the 4 replicas in other orders: the copies drifted apart by
# roundings, and this run's final model differed.)
L124="--parallel.pipeline=2 --parallel.data=4 --optim.zero=1"
run straight124 8 $L124 || fail straight124_run "$(tail -3 straight124.out)"
killed_then_resumed kill9_p2d4_zero_tied 8 6 straight124 $L124

# Resharding: a checkpoint of one layout resumes on another; the steps after it match the
# uninterrupted serial run within 1e-5.
reshard() {
  local name=$1 source=$2 ranks=$3
  shift 3
  mkdir -p "$name"
  cp "$source/checkpoints/step-00000004.full.h5" "$name/from.h5"
  run "$name" "$ranks" "$@" --checkpoint.resume="$name/from.h5" || { fail "$name" "$(tail -3 "$name.out")"; return; }
  grep -q "resharded onto" "$name.out" || { fail "$name" "no resharding reported"; return; }
  same_losses "$name" straight "$name" 1e-5 5
}
reshard reshard_t2p2d2z_to_t1p2d4 straight222 8 --parallel.pipeline=2 --parallel.data=4
reshard reshard_t1p1d1_to_t2p2d1 straight 4 --parallel.tensor=2 --parallel.pipeline=2
reshard reshard_t2p1d2z_to_t1p1d4 straight212 4 --parallel.data=4

# Another pipeline schedule on resume (issue 36): the 1F1B run's step-4 checkpoint resumed under
# ZB-H1 ends as the uninterrupted 1F1B run, bit for bit (the schedules accumulate the gradients
# in the same order): every later loss, and the final model.
mkdir -p rescheduled && cp straight222/checkpoints/step-00000004.full.h5 rescheduled/from.h5
if run rescheduled 8 $L222 --parallel.schedule=zb-h1 --checkpoint.resume=rescheduled/from.h5; then
  if cmp -s straight222/model.bin rescheduled/model.bin
  then same_losses resume_onto_another_schedule_bitwise straight222 rescheduled 1e-300 5
  else fail resume_onto_another_schedule_bitwise "the final models differ"; fi
else fail resume_onto_another_schedule_bitwise "$(tail -3 rescheduled.out)"; fi

# And onto interleaved 1F1B (v = 2), the same: chunks are a split of the same blocks.
mkdir -p interleaved && cp straight222/checkpoints/step-00000004.full.h5 interleaved/from.h5
if run interleaved 8 $L222 --parallel.virtual_stages=2 --checkpoint.resume=interleaved/from.h5; then
  if cmp -s straight222/model.bin interleaved/model.bin
  then same_losses resume_onto_interleaved_bitwise straight222 interleaved 1e-300 5
  else fail resume_onto_interleaved_bitwise "the final models differ"; fi
else fail resume_onto_interleaved_bitwise "$(tail -3 interleaved.out)"; fi

# Onto sequence parallelism (issue 34): the parameters are the same tensors, so the step-4
# checkpoint of the t2 x p2 x d2 run resumes with the rows split; the LayerNorms' weight gradients
# are then summed in another order, so the resumed losses match to fp32 rounding, not bitwise.
mkdir -p onto_sp && cp straight222/checkpoints/step-00000004.full.h5 onto_sp/from.h5
if run onto_sp 8 $L222 --parallel.sequence_parallel=true --checkpoint.resume=onto_sp/from.h5; then
  same_losses resume_onto_sequence_parallel straight222 onto_sp 1e-6 5
else fail resume_onto_sequence_parallel "$(tail -3 onto_sp.out)"; fi

# Across context degrees (issue 34): checkpoints hold whole tensors, so the step-4 checkpoint of
# a run on 2 context ranks resumes on 4 (and on 1); the attention folds its blocks in another
# order there, so the resumed losses match to fp32 rounding.
if run ctx2 2 --parallel.context=2; then
  for c in 4 1; do
    mkdir -p "ctx_to_$c" && cp ctx2/checkpoints/step-00000004.full.h5 "ctx_to_$c/from.h5"
    if run "ctx_to_$c" "$c" --parallel.context="$c" --checkpoint.resume="ctx_to_$c/from.h5"
    then same_losses "resume_from_context_2_onto_context_$c" ctx2 "ctx_to_$c" 1e-6 5
    else fail "resume_from_context_2_onto_context_$c" "$(tail -3 "ctx_to_$c.out")"; fi
  done
else fail resume_across_context_degrees "$(tail -3 ctx2.out)"; fi

# Uneven chunks (6 blocks as 2,1,1,2 over p = 2, v = 2: stage 0 holds blocks 0-1 and 3, stage 1
# block 2 and 4-5): a 1F1B checkpoint resumed interleaved, and an interleaved one resumed under
# 1F1B, each ending as the uninterrupted 1F1B run, bit for bit (the chunks' slabs in the file).
UNEVEN=(--parallel.pipeline=2 --model.layers=6)
CHUNKS=(--parallel.virtual_stages=2 --parallel.stage_layers=2,1,1,2)
if run uneven_1f1b 2 "${UNEVEN[@]}" && run uneven_interleaved 2 "${UNEVEN[@]}" "${CHUNKS[@]}"; then
  for pair in "uneven_1f1b:to_interleaved:${CHUNKS[*]}" "uneven_interleaved:to_1f1b:"; do
    IFS=: read -r source name extra <<< "$pair"
    mkdir -p "$name" && cp "$source/checkpoints/step-00000004.full.h5" "$name/from.h5"
    # shellcheck disable=SC2086
    if run "$name" 2 "${UNEVEN[@]}" $extra --checkpoint.resume="$name/from.h5" && cmp -s uneven_1f1b/model.bin "$name/model.bin"
    then same_losses "resume_uneven_chunks_$name" uneven_1f1b "$name" 1e-300 5
    else fail "resume_uneven_chunks_$name" "$(tail -2 "$name.out") or the final models differ"; fi
  done
else fail resume_uneven_chunks "$(tail -3 uneven_*.out)"; fi

# A stop signal: SIGUSR1 to mpirun (which forwards it) or SIGTERM to the ranks themselves
# stops every rank at the same step boundary, after a full checkpoint, with exit status 3; the
# resumed run ends exactly as an uninterrupted one.
stopped_by() {
  local name=$1 signal=$2 target=$3
  timeout 120 mpirun -q -np 4 "$TRIDENT" train c.deck --train.run_dir="$name" --parallel.data=2 --parallel.tensor=2 \
    --train.steps=400 --checkpoint.full_interval=off --metrics.log_interval=1 > "$name.out" 2>&1 &
  local launcher=$!
  for _ in $(seq 600); do grep -q "^step *5/" "$name.out" 2> /dev/null && break; sleep 0.1; done
  if [[ $target == mpirun ]]; then pkill -"$signal" -f "^mpirun .*run_dir=$name "
  else pkill -"$signal" -f "^$TRIDENT train .*run_dir=$name "; fi
  wait "$launcher"
  local status=$?
  if [[ $status != 3 ]]; then fail "${name}_exit_3" "status $status: $(tail -3 "$name.out")"; return; fi
  grep -q "stopped by SIG$signal after step" "$name.out" || { fail "${name}_exit_3" "no stop message"; return; }
  pass "${name}_exit_3 ($(grep -o 'after step [0-9]*' "$name.out"))"
  timeout 120 mpirun -q -np 4 "$TRIDENT" train c.deck --train.run_dir="$name" --parallel.data=2 --parallel.tensor=2 \
    --train.steps=400 --checkpoint.full_interval=off --checkpoint.resume=auto >> "$name.out" 2>&1 ||
    { fail "$name" "resume failed: $(tail -3 "$name.out")"; return; }
  same_losses "${name}_resumed_bitwise" uninterrupted400 "$name"
}
timeout 120 mpirun -q -np 4 "$TRIDENT" train c.deck --train.run_dir=uninterrupted400 --parallel.data=2 \
  --parallel.tensor=2 --train.steps=400 --checkpoint.full_interval=off > uninterrupted400.out 2>&1 ||
  fail uninterrupted400 "$(tail -3 uninterrupted400.out)"
stopped_by usr1 USR1 mpirun
stopped_by term TERM ranks
stopped_by int INT ranks

# The same through scripts/trident-mpirun, the launcher that keeps the contract: TERM or INT
# (Ctrl-C) to it reaches the ranks as USR1, and it exits with status 3 — where mpirun alone
# exits 1. Job control on (set -m), so that the background launcher does not ignore SIGINT; no
# `timeout` around it, which would pass the signal on to its process group a second time (and a
# second Ctrl-C within 2 s means "abort now").
stopped_via_launcher() {
  local name=$1 signal=$2
  set -m
  "$ROOT/scripts/trident-mpirun" -q -np 4 "$TRIDENT" train c.deck --train.run_dir="$name" \
    --parallel.data=2 --parallel.tensor=2 --train.steps=400 --checkpoint.full_interval=off \
    --metrics.log_interval=1 > "$name.out" 2>&1 &
  local launcher=$!
  set +m
  for _ in $(seq 600); do grep -q "^step *5/" "$name.out" 2> /dev/null && break; sleep 0.1; done
  kill -"$signal" "$launcher"
  wait "$launcher"
  local status=$?
  if [[ $status != 3 ]] || ! grep -q "stopped by SIGUSR1 after step" "$name.out"; then
    fail "${name}_exit_3" "status $status: $(tail -3 "$name.out")"
    return
  fi
  pass "${name}_exit_3 ($(grep -o 'after step [0-9]*' "$name.out"))"
  timeout 120 "$ROOT/scripts/trident-mpirun" -q -np 4 "$TRIDENT" train c.deck --train.run_dir="$name" \
    --parallel.data=2 --parallel.tensor=2 --train.steps=400 --checkpoint.full_interval=off \
    --checkpoint.resume=auto >> "$name.out" 2>&1 || { fail "$name" "resume failed: $(tail -3 "$name.out")"; return; }
  same_losses "${name}_resumed_bitwise" uninterrupted400 "$name"
}
stopped_via_launcher launcher_term TERM
stopped_via_launcher launcher_int INT

# kill -9 from outside, on one of the ranks of a running job (not at a chosen step): the job
# ends, and the resumed run matches the uninterrupted one bitwise.
timeout 120 mpirun -q -np 4 "$TRIDENT" train c.deck --train.run_dir=external --parallel.data=2 --parallel.tensor=2 \
  --train.steps=400 --checkpoint.full_interval=40steps > external.out 2>&1 &
launcher=$!
for _ in $(seq 600); do [[ -f external/checkpoints/step-00000040.full.h5 ]] && break; sleep 0.1; done
victim=$(pgrep -f "^$TRIDENT train .*run_dir=external " | tail -1)
start=$SECONDS
kill -9 "$victim"
wait "$launcher"
status=$? took=$((SECONDS - start))
if [[ -n $victim && $status != 0 && $took -lt 60 ]]; then
  pass "kill9_external_job_ends (rank pid $victim, status $status in $took s, $(ls external/checkpoints | tail -1))"
  timeout 120 mpirun -q -np 4 "$TRIDENT" train c.deck --train.run_dir=external --parallel.data=2 --parallel.tensor=2 \
    --train.steps=400 --checkpoint.full_interval=40steps --checkpoint.resume=auto >> external.out 2>&1 &&
    same_losses kill9_external_resumed_bitwise uninterrupted400 external || fail kill9_external_resumed_bitwise "$(tail -3 external.out)"
else
  fail kill9_external_job_ends "victim '$victim', status $status after $took s: $(tail -3 external.out)"
fi

# The newest checkpoint corrupt (one bit flipped in a tensor) or truncated: resume = auto says
# so and falls back to the one before; `trident inspect` reports it with exit status 1.
flip_bit() {  # flip_bit FILE: one bit in the middle of the largest dataset's data
  $PY - "$1" <<'PY'
import sys, h5py
path = sys.argv[1]
with h5py.File(path, "r") as f:
    d = max((f[k] for k in ["adamw_v/blocks.fcw", "params/blocks.fcw"]), key=lambda d: d.size)
    offset = d.id.get_offset() + d.size * 2
with open(path, "r+b") as f:
    f.seek(offset); b = f.read(1); f.seek(offset); f.write(bytes([b[0] ^ 0x04]))
PY
}
corrupt_newest() {
  local name=$1 how=$2
  rm -rf "$name" && mkdir -p "$name" && cp -r straight/checkpoints "$name/"
  local newest="$name/checkpoints/step-00000012.full.h5"
  if [[ $how == flip ]]; then flip_bit "$newest"; else truncate -s 60000 "$newest"; fi
  cp "$newest" "$name.bad.h5"  # the resumed run writes a sound step 12 in its place
  "$TRIDENT" inspect "$newest" > "$name.inspect" 2>&1
  local status=$?
  if [[ $status != 1 ]] || ! grep -q CORRUPT "$name.inspect"; then fail "${name}_inspect" "status $status: $(cat "$name.inspect")"
  else pass "${name}_inspect ($(grep CORRUPT "$name.inspect"))"; fi
  run "$name" 1 --checkpoint.resume=auto --train.steps=12 || { fail "$name" "$(tail -3 "$name.out")"; return; }
  if grep -q "skipping checkpoint $newest" "$name.out" && grep -q "resumed from $name/checkpoints/step-00000008.full.h5" "$name.out"
  then pass "${name}_falls_back"; else fail "${name}_falls_back" "$(grep -E 'skipping|resumed' "$name.out")"; fi
}
corrupt_newest bitflip flip
corrupt_newest truncated truncate
"$TRIDENT" inspect straight/checkpoints/step-00000012.full.h5 > inspect.out 2>&1 &&
  grep -q "checksums: all verified" inspect.out && grep -q "params/blocks.qkvw *(4, 96, 32)" inspect.out &&
  grep -q "layout tensor 1 x pipeline 1 x data 1" inspect.out && pass inspect_sound || fail inspect_sound "$(cat inspect.out)"
mkdir -p explicit && cp bitflip.bad.h5 explicit/bad.h5
expect_user_error resume_explicit_corrupt 'checkpoint.resume = |corrupt|checksum mismatch' \
  "$TRIDENT" train "$WORK/c.deck" --checkpoint.resume="$WORK/explicit/bad.h5" --train.run_dir=run
expect_user_error resume_missing_file 'checkpoint.resume = |no such file' \
  "$TRIDENT" train "$WORK/c.deck" --checkpoint.resume="$WORK/nothere.h5" --train.run_dir=run
mkdir -p wrongshape && cp straight/checkpoints/step-00000012.full.h5 wrongshape/s.h5
run wrongshape 1 --model.hidden=64 --checkpoint.resume=wrongshape/s.h5
[[ $? == 2 ]] && grep -q "holds a gpt2 model with layers 4, heads 4 (key/value 4), hidden 32" wrongshape.out &&
  pass resume_model_mismatch || fail resume_model_mismatch "$(tail -2 wrongshape.out)"

# Fast checkpoints: parameters only; resuming from one warns that the moments start again.
run fast 1 --checkpoint.fast_interval=1steps --checkpoint.full_interval=5steps --checkpoint.keep_fast=3 \
  --checkpoint.at_end=false --train.steps=7 || fail fast "$(tail -3 fast.out)"
fast_files=$(cd fast/checkpoints && ls step-* | tr '\n' ' ')
# (no fast checkpoint at step 5, where the full one is due: the newest three fast are 4, 6, 7)
[[ $fast_files == "step-00000004.fast.h5 step-00000005.full.h5 step-00000006.fast.h5 step-00000007.fast.h5 " ]] &&
  pass "keep_n ($fast_files)" || fail keep_n "$fast_files"
run fast 1 --checkpoint.resume=auto --train.steps=9 && grep -q "resumed from fast/checkpoints/step-00000007.fast.h5" fast.out &&
  grep -q "AdamW moments start again from zero" fast.out && pass resume_fast_warns || fail resume_fast_warns "$(grep -E 'resumed|warning' fast.out)"

# Time intervals: a full checkpoint every 0.3 s of a run of a few seconds.
run timed 1 --checkpoint.full_interval=0.3s --checkpoint.at_end=false --checkpoint.keep_full=100 --train.steps=300
n_timed=$(ls timed/checkpoints/step-* | wc -l)
[[ $n_timed -ge 2 ]] && pass "time_interval ($n_timed checkpoints)" || fail time_interval "$n_timed checkpoints"

# Asynchronous writes: every step a checkpoint, the resumed run still bitwise the same.
run async 8 $L222 --checkpoint.async=true --checkpoint.full_interval=1steps \
  --debug.fail_rank=3 --debug.fail_step=8 --debug.fail_mode=sigkill
run async 8 $L222 --checkpoint.async=true --checkpoint.resume=auto ||
  fail async "$(tail -3 async.out)"
grep -q "resumed from async/checkpoints/step-0000000[67].full.h5" async.out &&
  same_losses async_resume_bitwise straight222 async || fail async_resume_bitwise "$(grep -E 'resumed|warning' async.out)"

# A file system that fills up: a 4 MB tmpfs holds one checkpoint of this model and not two.
# The second is refused before it starts, with a warning, and training goes on — but the run,
# whose final checkpoint is refused too, ends with exit status 1 naming it (issue 20); forced past
# that check, the write fails inside HDF5 and the job ends (checkpoint.timeout_s) instead of
# hanging. Either way the first checkpoint stays sound and nothing half-written is left. (The
# forced run continues the first one's branch, resume = auto: a fresh run would set the first
# run's checkpoint aside into branches/, docs/CHECKPOINTS.md "Lineage".)
mkdir -p small
if mount -t tmpfs -o size=4m tmpfs small 2> mount.err; then
  run full_disk 2 --model.hidden=64 --parallel.data=2 --checkpoint.dir=small --checkpoint.full_interval=3steps --train.steps=9
  status=$?
  [[ $status == 1 ]] && grep -q "not written: not enough space in 'small'" full_disk.out &&
    grep -q "^error: training finished, but its final checkpoint small/step-00000009.full.h5 (step 9) was not written" full_disk.out &&
    [[ -z $(ls -A small | grep -v -e '^step-00000003.full.h5$' -e '^current_branch.ini$') ]] && "$TRIDENT" inspect small/step-00000003.full.h5 > /dev/null &&
    pass full_disk_refused || fail full_disk_refused "status $status, $(ls -A small | tr '\n' ' '): $(grep -m2 -E 'warning|error' full_disk.out)"
  start=$SECONDS
  run full_disk2 2 --model.hidden=64 --parallel.data=2 --checkpoint.dir=small --checkpoint.full_interval=6steps --train.steps=9 \
    --debug.skip_space_check=true --checkpoint.timeout_s=10 --checkpoint.resume=auto
  status=$? took=$((SECONDS - start))
  [[ $status != 0 && $took -lt 60 ]] && "$TRIDENT" inspect small/step-00000003.full.h5 > /dev/null &&
    pass "full_disk_write_fails_job_ends (status $status in $took s)" ||
    fail full_disk_write_fails_job_ends "status $status in $took s: $(grep -m2 -E 'error|not written|finish' full_disk2.out)"
  run full_disk 2 --model.hidden=64 --parallel.data=2 --checkpoint.dir=small --checkpoint.resume=auto --checkpoint.full_interval=off \
    --checkpoint.at_end=false --train.steps=9 &&
    grep -q "resumed from small/step-00000003.full.h5" full_disk.out && pass full_disk_resume ||
    fail full_disk_resume "$(grep -m2 -E 'resumed|error|warning' full_disk.out)"
  umount small
else
  fail full_disk "cannot mount a tmpfs (needs root): $(cat mount.err)"
fi

# NaN/Inf: a step with a NaN gradient is skipped on every rank and counted; more than
# optim.max_bad_steps in a row stop the run with exit status 1, its checkpoints intact.
run nan 4 --parallel.data=2 --parallel.pipeline=2 --debug.nan_steps=3,4 || fail nan_skipped "$(tail -3 nan.out)"
$PY -c "
import h5py, sys; f = h5py.File('nan/metrics.h5', 'r')
sys.exit(0 if list(f['skipped'][:]) == [0,0,1,1] + [0]*8 else 1)" && pass nan_skipped || fail nan_skipped "skipped series wrong"
run nan_stop 4 --parallel.data=2 --parallel.pipeline=2 --debug.nan_steps=5,6,7 --optim.max_bad_steps=2
status=$?
[[ $status == 1 ]] && grep -q "3 steps in a row up to step 7 had NaN or Inf" nan_stop.out &&
  "$TRIDENT" inspect nan_stop/checkpoints/step-00000004.full.h5 > /dev/null && pass "nan_max_bad_steps_stops" ||
  fail nan_max_bad_steps_stops "status $status: $(grep -m1 error nan_stop.out)"
