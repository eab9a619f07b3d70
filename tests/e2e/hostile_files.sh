#!/usr/bin/env bash
# Files that lie, locks that dangle, threads x ranks > cores (issue 31). The files are made as a
# hostile user would make them (tests/e2e/craft.py): checkpoint attributes edited with the
# metadata checksum recomputed, datasets of the lying shapes that hold nothing, an HDF5 external
# link to a FIFO, sparse llm.c model files whose header claims 2^31 positions. Each ends with one
# clear error, never an allocation failure, a hang or a run that trains on nonsense; resume =
# auto takes such a file for corrupt and falls back to the one before.
. tests/e2e/lib.sh
PY=/usr/bin/python3
CRAFT="$ROOT/tests/e2e/craft.py"
cd "$WORK"
write_resume_deck r.deck
write_deck ok.deck
timeout 120 "$TRIDENT" train r.deck --train.run_dir=straight > straight.out 2>&1 || fail straight "$(tail -3 straight.out)"
SOUND=straight/checkpoints/step-00000012.full.h5

# lie NAME KEY=VALUE... [-- reshape LAYOUT]: a copy of the sound step-12 checkpoint as NAME.h5 with
# the attributes set (checksum recomputed); with reshape, its datasets re-made in the lying shapes.
lie() {
  local name=$1; shift
  local attrs=() layout=""
  while (($#)); do
    if [[ $1 == -- ]]; then layout=$3; break; fi
    attrs+=("$1"); shift
  done
  cp "$SOUND" "$name.h5"
  $PY "$CRAFT" attrs "$name.h5" "${attrs[@]}"
  if [[ -n $layout ]]; then $PY "$CRAFT" reshape "$name.h5" "$layout"; fi
}

# inspect_says NAME FILE PATTERN: `trident inspect` exits 1, reports CORRUPT matching PATTERN,
# and nothing ran out of memory or crashed.
inspect_says() {
  local name=$1 file=$2 pattern=$3
  timeout -k 5 30 "$TRIDENT" inspect "$file" > "$name.out" 2>&1
  local status=$?
  if [[ $status == 1 ]] && grep -q "^CORRUPT: .*$pattern" "$name.out" && ! grep -qE 'bad_alloc|out of memory|MPI_ABORT' "$name.out"; then
    pass "$name"
  else
    fail "$name" "status $status: $(grep -vE '^  ' "$name.out" | tail -3)"
  fi
}

# ---- 1. Shapes that lie: checked against the file before anything is sized from them -------
lie hidden model.hidden=1048576 -- reshape chunked
inspect_says lying_hidden_chunked_inspect hidden.h5 "dataset 'params/wte' is not stored contiguously"
lie hidden_c model.hidden=1048576 -- reshape contiguous
inspect_says lying_hidden_contiguous_inspect hidden_c.h5 "dataset 'params/wte' holds 0 bytes, not the"
lie seq model.seq_len=2147483647 -- reshape contiguous
inspect_says lying_seq_len_inspect seq.h5 "dataset 'params/wte' holds 0 bytes"
expect_user_error lying_seq_len_resume "checkpoint.resume = $WORK/seq.h5: the checkpoint is corrupt|holds 0 bytes" \
  "$TRIDENT" train "$WORK/r.deck" --checkpoint.resume="$WORK/seq.h5" --train.run_dir=run
expect_user_error lying_hidden_generate "is not a sound trident checkpoint|not stored contiguously|give a checkpoint written by trident train" \
  "$TRIDENT" generate "$WORK/r.deck" --checkpoint="$WORK/hidden.h5" --prompt=hi
# A sound checkpoint evaluated with a deck whose windows or tokens do not fit its model: a GPT-2's
# position table has 32 rows, and its wte 256 (read past either, the loss would be of other
# parameters' values).
expect_user_error eval_longer_than_the_checkpoint "has a context of 32 positions, fewer than model.seq_len = 64 (command line)|model.seq_len = 32 or less" \
  "$TRIDENT" eval "$WORK/r.deck" --checkpoint="$WORK/$SOUND" --model.seq_len=64
expect_user_error eval_vocab_past_the_checkpoint "has a vocabulary of 256 tokens, fewer than model.vocab = 512 (command line)" \
  "$TRIDENT" eval "$WORK/r.deck" --checkpoint="$WORK/$SOUND" --model.vocab=512
# A shape whose parameter count overflows int64 (12·L·C² with C = 2·10^9): refused before it is counted.
lie huge_hidden model.hidden=2000000000
inspect_says lying_hidden_overflow huge_hidden.h5 "more than the 281474976710656 any run can hold"

# The newest checkpoint of a run lies: resume = auto skips it once and resumes from the one before.
auto_falls_back() {  # auto_falls_back NAME KEY=VALUE... [-- reshape LAYOUT]
  local name=$1; shift
  rm -rf "$name" && mkdir -p "$name" && cp -r straight/checkpoints "$name/"
  lie "$name.lie" "$@"
  mv "$name.lie.h5" "$name/checkpoints/step-00000012.full.h5"
  timeout -k 5 120 "$TRIDENT" train r.deck --train.run_dir="$name" --checkpoint.resume=auto --train.steps=14 > "$name.out" 2>&1
  local status=$? skipped
  skipped=$(grep -c "skipping checkpoint $name/checkpoints/step-00000012.full.h5" "$name.out")
  if [[ $status == 0 && $skipped == 1 ]] && grep -q "resumed from $name/checkpoints/step-00000008.full.h5" "$name.out"; then
    pass "$name"
  else
    fail "$name" "status $status, skipped $skipped times: $(grep -m3 -E 'skipping|resumed|error' "$name.out")"
  fi
}
auto_falls_back auto_skips_lying_shape model.hidden=1048576 -- reshape chunked
auto_falls_back auto_skips_negative_updates optimizer_updates=-1

# ---- 2. Every metadata value checked for sense (a checksum is no signature) --------------------
range_case() {  # range_case NAME KEY=VALUE PATTERN
  lie "$1" "$2"
  mv "$1.h5" "$1.renamed.h5"  # another name: the step-in-the-name check must not be what catches it
  inspect_says "$1" "$1.renamed.h5" "$3"
}
range_case negative_updates optimizer_updates=-1 "attribute 'optimizer_updates' = -1 is impossible: from 0 to the step, 12"
range_case negative_step step=-1000 "attribute 'step' = -1000 is impossible: 0 or more"
range_case zero_tensor layout.tensor=0 "attribute 'layout.tensor' = 0 is impossible"
range_case negative_data layout.data=-3 "attribute 'layout.data' = -3 is impossible"
range_case garbage_stage_layers layout.stage_layers=abc "attribute 'layout.stage_layers' = 'abc' is impossible"
range_case stage_layers_wrong_sum layout.stage_layers=3 "attribute 'layout.stage_layers' = '3' is impossible"
range_case virtual_layers_not_its_stages layout.virtual_layers=1,1 "attribute 'layout.virtual_layers' = '1,1' is impossible"
range_case skipped_beyond_step skipped_steps=99 "attribute 'skipped_steps' = 99 is impossible"
range_case infinite_loss_scale loss_scale=inf "attribute 'loss_scale' is not a finite number"
range_case unknown_precision precision=fp8 "attribute 'precision' = 'fp8' is impossible"
lie updates optimizer_updates=-1
expect_user_error negative_updates_resume "the checkpoint is corrupt|attribute 'optimizer_updates' = -1 is impossible" \
  "$TRIDENT" train "$WORK/r.deck" --checkpoint.resume="$WORK/updates.h5" --train.run_dir=run

# ---- 3. Opens that could block: an external link to a FIFO, a lock that is no lock ----------
mkfifo "$WORK/link.fifo"
cp "$SOUND" extlink.h5
$PY "$CRAFT" extlink extlink.h5 params/wte "$WORK/link.fifo"
inspect_says external_link_inspect extlink.h5 "'params/wte' is a link to another file"
expect_user_error external_link_to_fifo_resume "the checkpoint is corrupt|'params/wte' is a link to another file" \
  "$TRIDENT" train "$WORK/r.deck" --checkpoint.resume="$WORK/extlink.h5" --train.run_dir=run
expect_user_error external_link_to_fifo_generate "'params/wte' is a link to another file" \
  "$TRIDENT" generate "$WORK/r.deck" --checkpoint="$WORK/extlink.h5" --prompt=hi

mkfifo "$WORK/model.fifo"
expect_user_error model_init_fifo "llm.c model file '$WORK/model.fifo': is a FIFO (named pipe), not a regular file" \
  "$TRIDENT" train "$WORK/ok.deck" --model.init="$WORK/model.fifo"
mkdir -p "$WORK/journal_fifo" && mkfifo "$WORK/journal_fifo/metrics.h5.journal"
expect_user_error metrics_journal_fifo "'$WORK/journal_fifo/metrics.h5.journal' is a FIFO (named pipe)" \
  "$TRIDENT" train "$WORK/ok.deck" --train.run_dir="$WORK/journal_fifo"

# lock_case NAME MAKE PATTERN: RUN_DIR/trident.lock made by MAKE (a command run in RUN_DIR) is
# refused at once (lock_wait_s = 30 would otherwise be waited) with what it is and how to clear it.
lock_case() {
  local name=$1 make=$2 pattern=$3 started=$SECONDS
  mkdir -p "$WORK/$name.dir" && (cd "$WORK/$name.dir" && eval "$make")
  expect_user_error "$name" "$pattern|no run of trident holds it|remove it (rm " \
    "$TRIDENT" train "$WORK/ok.deck" --train.run_dir="$WORK/$name.dir" --train.lock_wait_s=30
  if ((SECONDS - started > 20)); then fail "${name}_at_once" "took $((SECONDS - started)) s"; fi
}
lock_case lock_dangling_symlink "ln -s /nonexistent/lock trident.lock" "is a symbolic link to '/nonexistent/lock' (dangling)"
lock_case lock_empty "touch trident.lock" "trident.lock' is empty, not a lock trident wrote"
lock_case lock_garbage "head -c 100 /dev/urandom > trident.lock" "bytes that are not a lock trident wrote"
lock_case lock_directory "mkdir trident.lock" "trident.lock' is a directory|rm -r '"
lock_case lock_fifo "mkfifo trident.lock" "trident.lock' is a FIFO (named pipe)"

# A live holder is waited for; SIGTERM ends the wait at once (exit 3), and nothing is left behind.
mkdir -p held
sleep 300 & holder=$!  # the holder itself (a `cmd && sleep &` subshell would leave its sleep behind)
printf 'host = %s\nboot_id = %s\npid = %s\nrun_id = other\n' "$(hostname)" "$(cat /proc/sys/kernel/random/boot_id)" \
  "$holder" > held/trident.lock
( exec timeout -k 5 60 "$TRIDENT" train ok.deck --train.run_dir=held --train.lock_wait_s=60 > held.out 2> held.err ) &
waiter=$!
for _ in $(seq 100); do grep -q "waiting up to 60 s" held.out 2> /dev/null && break; sleep 0.1; done
started=$SECONDS
pkill -TERM -f "trident train ok.deck --train.run_dir=held"
wait $waiter; status=$?
kill $holder 2> /dev/null
if [[ $status == 3 && $((SECONDS - started)) -lt 5 ]] &&
   grep -q "^error: stopped by SIGTERM before training started, while waiting for run directory 'held'" held.err &&
   [[ $(cat held/trident.lock | grep -c "run_id = other") == 1 ]]; then
  pass stop_signal_ends_the_lock_wait
else
  fail stop_signal_ends_the_lock_wait "status $status after $((SECONDS - started)) s: $(cat held.err)"
fi

# ---- 4. Model files whose header claims more than memory holds: checked before allocating ----
$PY "$CRAFT" llmc long.bin maxT=2147483647 V=256 Vp=256 L=1 NH=1 C=8
$PY "$CRAFT" llmc wide.bin maxT=32 V=256 Vp=2147483520 L=1 NH=1 C=8
tiny="--model.layers=1 --model.heads=1 --model.hidden=8"
expect_user_error generate_long_model_file "trident generate's decoder does not fit in memory" \
  "$TRIDENT" generate "$WORK/ok.deck" --prompt=hi --model.init="$WORK/long.bin" $tiny
expect_user_error generate_wide_model_file "trident generate's decoder does not fit in memory" \
  "$TRIDENT" generate "$WORK/ok.deck" --prompt=hi --model.init="$WORK/wide.bin" $tiny
expect_user_error eval_long_model_file "trident eval builds the whole model on each rank and it does not fit in memory" \
  "$TRIDENT" eval "$WORK/ok.deck" --model.init="$WORK/long.bin" $tiny
$PY "$CRAFT" llmc overflow.bin maxT=32 V=256 Vp=256 L=2000000000 NH=1 C=2000000000 size=4096
expect_user_error generate_overflowing_header "overflow.bin|header: model shape|more than the 281474976710656 any run can hold" \
  "$TRIDENT" generate "$WORK/ok.deck" --prompt=hi --model.init="$WORK/overflow.bin"

# ---- 5. Threads x ranks > cores ----------------------------------------------------------------
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc itself obeys OMP_NUM_THREADS
( unset OMP_NUM_THREADS; timeout 120 mpirun -np 2 "$TRIDENT" train ok.deck --parallel.tensor=2 --train.run_dir=t_chosen \
    --train.steps=3 > t_chosen.out 2>&1 )
want=$(( cores / 2 > 0 ? cores / 2 : 1 ))
if grep -qE "^threads: $want OpenMP threads? per rank \(chosen: OMP_NUM_THREADS unset; 2 ranks with $cores cores? on the busiest host" t_chosen.out &&
   ! grep -q '^warning: OMP_NUM_THREADS' t_chosen.out; then
  pass threads_chosen_from_cores_and_ranks
else
  fail threads_chosen_from_cores_and_ranks "expected $want per rank on $cores cores: $(grep -E '^threads|^warning|error' t_chosen.out)"
fi
OMP_NUM_THREADS=$cores timeout 120 mpirun -np 2 "$TRIDENT" train ok.deck --parallel.tensor=2 --train.run_dir=t_over \
  --train.steps=3 > t_over.out 2>&1
if grep -q "^threads: $cores OpenMP threads per rank (OMP_NUM_THREADS; .*oversubscribed; OpenMP waits passive)" t_over.out &&
   grep -q "^warning: OMP_NUM_THREADS = $cores with 2 ranks on a host of $cores cores.*oversubscribed" t_over.out; then
  pass threads_oversubscribed_warned_and_passive
else
  fail threads_oversubscribed_warned_and_passive "$(grep -E '^threads|^warning|error' t_over.out)"
fi
"$TRIDENT" doctor t_over > t_over.doctor 2>&1
"$TRIDENT" doctor t_chosen > t_chosen.doctor 2>&1
if grep -q "^finding: threads oversubscribe the cores: the cause of slow steps" t_over.doctor &&
   ! grep -q "^finding: threads" t_chosen.doctor && grep -q "checked threads: $want OpenMP" t_chosen.doctor; then
  pass doctor_names_oversubscribed_threads
else
  fail doctor_names_oversubscribed_threads "$(grep -E 'threads' t_over.doctor t_chosen.doctor)"
fi

# ---- 6. Small ones ---------------------------------------------------------------------------
expect_user_error generate_tokens_out_of_range "--tokens=1000000000000 is out of range: from -2147483648 to 2147483647" \
  "$TRIDENT" generate "$WORK/ok.deck" --prompt=hi --tokens=1000000000000
expect_user_error generate_temperature_infinite "--temperature=inf is not a finite number" \
  "$TRIDENT" generate "$WORK/ok.deck" --prompt=hi --temperature=inf
expect_user_error generate_negative_seed "--seed=-1 is out of range: from 0 to 18446744073709551615" \
  "$TRIDENT" generate "$WORK/ok.deck" --prompt=hi --seed=-1
# A 64-bit seed keeps every bit: two seeds 1 apart above 2^53 give different text.
a=$("$TRIDENT" generate ok.deck --prompt=hi --tokens=24 --seed=18446744073709551614 2> /dev/null)
b=$("$TRIDENT" generate ok.deck --prompt=hi --tokens=24 --seed=18446744073709551615 2> /dev/null)
[[ -n $a && $a != "$b" ]] && pass generate_seed_keeps_64_bits || fail generate_seed_keeps_64_bits "the same text for both seeds"

# ---- 7. A run directory that fills, or cannot be written ---------------------------------------
disk="$WORK/disk"
mkdir -p "$disk"
if mount -t tmpfs -o size=6500k tmpfs "$disk" 2> /dev/null; then
  # Room for two 2.6 MB checkpoints and the metrics, not a third: the later ones are refused with a
  # warning, the run ends with status 1 and one line (model.bin), and nothing earlier is lost.
  timeout -k 5 120 "$TRIDENT" train ok.deck --train.run_dir="$disk/run" --train.steps=8 --checkpoint.full_interval=2steps \
    --checkpoint.keep_full=10 > fills.out 2> fills.err
  status=$?
  ok=1
  [[ $status == 1 && $(grep -c . fills.err) == 1 ]] && grep -q "No space left on device; the checkpoints written are intact" fills.err || ok=0
  [[ $(grep -c "^warning: checkpoint of step [68] not written: not enough space" fills.out) == 2 ]] || ok=0
  for step in 2 4; do "$TRIDENT" inspect "$disk/run/checkpoints/step-0000000$step.full.h5" > /dev/null || ok=0; done
  $PY -c "import h5py, sys; sys.exit(list(h5py.File('$disk/run/metrics.h5', 'r')['step'][:]) != list(range(1, 9)))" || ok=0
  ((ok)) && pass disk_fills_during_checkpoints || fail disk_fills_during_checkpoints "status $status: $(cat fills.err) $(grep warning fills.out)"
  # The same disk read-only: refused before anything, naming the directory.
  mount -o remount,ro "$disk"
  expect_user_error read_only_run_dir "run directory '$disk/run' cannot be created: cannot write in '$disk/run': Read-only file system" \
    "$TRIDENT" train "$WORK/ok.deck" --train.run_dir="$disk/run" --checkpoint.resume=auto
  umount "$disk"
else
  echo "SKIP disk_fills_during_checkpoints, read_only_run_dir: cannot mount a tmpfs here"
fi
