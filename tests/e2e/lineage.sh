#!/usr/bin/env bash
# Lineage and ownership (docs/CHECKPOINTS.md, "Lineage", "Ownership", "Metadata"): a second run
# in the same checkpoint directory keeps its own checkpoints and its resume continues its own
# state; a roll-back keeps the abandoned branch and resume = auto follows the new one; two runs
# started into one run directory (one exits 2 touching nothing); stale locks taken over, live
# ones waited for or refused; flipped bits in the step and optimizer_updates attributes and a
# file name that disagrees with its step detected by inspect and skipped by resume = auto.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
write_resume_deck c.deck

# run LOG DIR RANKS OVERRIDES...: a training run into DIR, output in LOG.out.
run() {
  local log=$1 dir=$2 ranks=$3
  shift 3
  timeout 120 mpirun -q -np "$ranks" "$TRIDENT" train c.deck --train.run_dir="$dir" "$@" > "$log.out" 2>&1
}
run_id_of() { sed -n 's/^run id: //p' "$1.out" | head -1; }
lineage_of() { "$TRIDENT" inspect "$1" 2> /dev/null | sed -n 's/^lineage: //p'; }

# 1. A second, different run in a directory another run filled: its step-4 file is not pruned
# because the first run's step-8 and step-12 sort newer, and its resume after a kill continues
# its own state (bitwise the uninterrupted run with its settings), not the first run's.
run first shared 1 --checkpoint.keep_full=2 || fail second_run "first run: $(tail -2 first.out)"
run ref_b ref_b 1 --checkpoint.keep_full=2 --train.seed=7 || fail second_run "reference: $(tail -2 ref_b.out)"
run second shared 1 --checkpoint.keep_full=2 --train.seed=7 --debug.fail_rank=0 --debug.fail_step=7 --debug.fail_mode=sigkill
first_id=$(run_id_of first) second_id=$(run_id_of second)
if [[ -f shared/checkpoints/step-00000004.full.h5 && $(lineage_of shared/checkpoints/step-00000004.full.h5) == "run $second_id"* ]] &&
  "$TRIDENT" inspect "shared/checkpoints/branches/$first_id/step-00000012.full.h5" > /dev/null; then
  pass "second_run_keeps_own_checkpoints ($(ls shared/checkpoints | tr '\n' ' '); first run's in branches/$first_id)"
else
  fail second_run_keeps_own_checkpoints "$(find shared/checkpoints -name '*.h5' | sort | tr '\n' ' '): $(grep -E 'lineage|error' second.out)"
fi
run second_resumed shared 1 --checkpoint.keep_full=2 --train.seed=7 --checkpoint.resume=auto
grep -q "resumed from shared/checkpoints/step-00000004.full.h5" second_resumed.out &&
  same_losses second_run_resumes_own_state ref_b shared ||
  fail second_run_resumes_own_state "$(grep -E 'resumed|warning|error' second_resumed.out)"
resumed_id=$(run_id_of second_resumed)
$PY -c "import h5py, sys; sys.exit(h5py.File('shared/metrics.h5', 'r').attrs['run_id'] != '$resumed_id')" &&
  [[ $(lineage_of shared/checkpoints/step-00000012.full.h5) == "run $resumed_id, branch $second_id, parent $resumed_id/step-00000008.full" ]] &&
  pass "run_id_recorded ($resumed_id continues branch $second_id)" ||
  fail run_id_recorded "metrics run_id or $(lineage_of shared/checkpoints/step-00000012.full.h5)"

# 2. A roll-back to step 4 with another learning rate starts a new branch: the abandoned
# branch's 4, 8, 12 are kept (moved aside, bit for bit), the new step 8 does not replace the old
# one, and after a kill resume = auto continues the new branch, not the abandoned step 12.
run roll roll 1 || fail rollback "first run: $(tail -2 roll.out)"
roll_id=$(run_id_of roll)
old12=$(md5sum < roll/checkpoints/step-00000012.full.h5)
mkdir -p ref_roll && cp roll/checkpoints/step-00000004.full.h5 ref_roll/from.h5
run ref_roll ref_roll 1 --optim.lr=3e-4 --checkpoint.resume=ref_roll/from.h5 || fail rollback "reference: $(tail -2 ref_roll.out)"
run rolled roll 1 --optim.lr=3e-4 --checkpoint.resume=roll/checkpoints/step-00000004.full.h5 \
  --debug.fail_rank=0 --debug.fail_step=10 --debug.fail_mode=sigkill
aside=roll/checkpoints/branches/$roll_id
if [[ $(ls "$aside" 2> /dev/null | tr '\n' ' ') == "step-00000004.full.h5 step-00000008.full.h5 step-00000012.full.h5 " &&
  $(md5sum < "$aside/step-00000012.full.h5") == "$old12" &&
  $(lineage_of roll/checkpoints/step-00000008.full.h5) == "run $(run_id_of rolled), branch $(run_id_of rolled), parent $roll_id/step-00000004.full" &&
  ! -e roll/checkpoints/step-00000012.full.h5 ]]; then
  pass "rollback_keeps_abandoned_branch ($aside: $(ls "$aside" | tr '\n' ' '))"
else
  fail rollback_keeps_abandoned_branch "$(find roll/checkpoints -name '*.h5' | sort | tr '\n' ' ')"
fi
run rolled_resumed roll 1 --optim.lr=3e-4 --checkpoint.resume=auto
grep -q "resumed from roll/checkpoints/step-00000008.full.h5" rolled_resumed.out &&
  cmp -s roll/model.bin ref_roll/model.bin && same_losses rollback_resume_follows_new_branch ref_roll roll 1e-30 5 ||
  fail rollback_resume_follows_new_branch "$(grep -E 'resumed|warning' rolled_resumed.out); models $(cmp roll/model.bin ref_roll/model.bin 2>&1)"

# 3. Two runs started into one run directory a second apart: the second exits 2 with one error
# line naming the directory and the holder and touches nothing; the first completes intact.
timeout 120 mpirun -q -np 1 "$TRIDENT" train c.deck --train.run_dir=busy --train.steps=400 --checkpoint.keep_full=2 \
  > busy1.out 2>&1 &
first_job=$!
for _ in $(seq 300); do [[ -f busy/trident.lock ]] && break; sleep 0.1; done
sleep 1
holder=$(sed -n 's/^pid = //p' busy/trident.lock)
timeout 60 mpirun -q -np 1 "$TRIDENT" train c.deck --train.run_dir=busy --train.steps=20 --train.lock_wait_s=1 \
  > busy2.out 2> busy2.err
status2=$?
sed -i '/^-\{20,\}$/,/^-\{20,\}$/d' busy2.err
wait "$first_job"
status1=$?
if [[ $status2 == 2 && $(wc -l < busy2.err) == 1 ]] && grep -q "^error: run directory 'busy' is in use by run .*(pid $holder on host" busy2.err &&
  ! grep -q "^step" busy2.out; then
  pass "second_run_refused ($(cut -c1-150 busy2.err)...)"
else
  fail second_run_refused "status $status2: $(cat busy2.err)"
fi
if [[ $status1 == 0 && ! -e busy/trident.lock ]] && grep -q "^steps = 400" busy/deck.resolved.ini &&
  $PY -c "import h5py, sys; sys.exit(list(h5py.File('busy/metrics.h5', 'r')['step'][:]) != list(range(1, 401)))" &&
  "$TRIDENT" inspect busy/checkpoints/step-00000400.full.h5 > /dev/null &&
  [[ $(ls busy/checkpoints | tr '\n' ' ') == "current_branch.ini step-00000396.full.h5 step-00000400.full.h5 " ]]; then
  pass "first_run_intact (exit 0, 400 rows, its deck, its checkpoints, lock released)"
else
  fail first_run_intact "status $status1, $(ls -A busy busy/checkpoints | tr '\n' ' ')"
fi

# 4. Locks left behind: a dead pid of this host, and another host's lock without a heartbeat,
# are taken over with a warning; another host's fresh lock is refused; a live holder of this
# host (a rank a killed mpirun left running for a moment) is waited for.
write_lock() {  # write_lock DIR HOST PID
  mkdir -p "$1"
  printf 'host = %s\npid = %s\nrun_id = ghost\nstarted_at = 2026-01-01T00:00:00Z\n' "$2" "$3" > "$1/trident.lock"
}
sh -c 'exit 0' &
dead=$!
wait "$dead"
write_lock stale_dead "$(hostname)" "$dead"
run stale_dead stale_dead 1 --train.steps=2 && grep -q "was locked by run ghost (pid $dead on host $(hostname).*is no longer running: taking it over" stale_dead.out &&
  [[ ! -e stale_dead/trident.lock ]] && pass "stale_lock_dead_pid_taken_over" || fail stale_lock_dead_pid_taken_over "$(grep -E 'warning|error' stale_dead.out)"
write_lock stale_host other-node-17 4242
touch -d '-10 min' stale_host/trident.lock
run stale_host stale_host 1 --train.steps=2 && grep -q "heartbeat stopped" stale_host.out &&
  pass "stale_lock_other_host_taken_over" || fail stale_lock_other_host_taken_over "$(grep -E 'warning|error' stale_host.out)"
write_lock live_host other-node-17 4242
run live_host live_host 1 --train.steps=2 --train.lock_wait_s=0
[[ $? == 2 ]] && grep -q "error: run directory 'live_host' is in use by run ghost (pid 4242 on host other-node-17" live_host.out &&
  [[ $(ls -A live_host) == trident.lock ]] && pass "live_lock_other_host_refused" || fail live_lock_other_host_refused "$(cat live_host.out)"
sleep 3 &
write_lock orphan "$(hostname)" $!
run orphan orphan 1 --train.steps=2 --train.lock_wait_s=20 && grep -q "waiting up to 20 s" orphan.out &&
  pass "live_lock_same_host_waited_for" || fail live_lock_same_host_waited_for "$(grep -E 'note|error' orphan.out)"

# 5. A flipped bit in the step or optimizer_updates attribute of the newest checkpoint:
# inspect says CORRUPT (exit 1); resume = auto skips it with a warning and takes step 8.
flip_attribute() {  # flip_attribute FILE NAME VALUE: one bit of the int64 attribute NAME
  $PY - "$@" <<'PY'
import sys, struct
path, name, value = sys.argv[1], sys.argv[2].encode() + b"\0", int(sys.argv[3])
data = bytearray(open(path, "rb").read())
at = data.find(struct.pack("<q", value), data.find(name))
assert data.find(name) >= 0 and 0 <= at - data.find(name) < 200, "attribute not found"
data[at] ^= 0x02
open(path, "r+b").write(data)
PY
}
for attribute in step optimizer_updates; do
  name=flip_$attribute
  mkdir -p "$name" && cp -r roll/checkpoints "$name/"
  rm -rf "$name/checkpoints/branches"
  flip_attribute "$name/checkpoints/step-00000012.full.h5" "$attribute" 12 2> "$name.py" || { fail "$name" "$(cat "$name.py")"; continue; }
  "$TRIDENT" inspect "$name/checkpoints/step-00000012.full.h5" > "$name.inspect" 2>&1
  status=$?
  [[ $status == 1 ]] && grep -q "CORRUPT: .*metadata checksum mismatch" "$name.inspect" &&
    pass "${name}_inspect ($(grep -o 'CORRUPT.*mismatch' "$name.inspect"))" || fail "${name}_inspect" "status $status: $(grep -v '^ ' "$name.inspect")"
  run "$name" "$name" 1 --optim.lr=3e-4 --checkpoint.resume=auto
  grep -q "skipping checkpoint $name/checkpoints/step-00000012.full.h5: .*metadata checksum mismatch" "$name.out" &&
    grep -q "resumed from $name/checkpoints/step-00000008.full.h5" "$name.out" && pass "${name}_falls_back" ||
    fail "${name}_falls_back" "$(grep -E 'skipping|resumed|error' "$name.out")"
done

# 6. A file whose name says another step than its attributes (renamed, or an attribute
# altered by hand and the checksum recomputed): inspect exit 1, resume = auto skips it.
mkdir -p renamed && cp -r roll/checkpoints renamed/ && rm -rf renamed/checkpoints/branches
cp renamed/checkpoints/step-00000008.full.h5 renamed/checkpoints/step-00000016.full.h5
"$TRIDENT" inspect renamed/checkpoints/step-00000016.full.h5 > renamed.inspect 2>&1
[[ $? == 1 ]] && grep -q "file name says step 16 (full) but its metadata says step 8" renamed.inspect &&
  pass "name_step_mismatch_inspect" || fail name_step_mismatch_inspect "$(grep -v '^ ' renamed.inspect)"
run renamed renamed 1 --optim.lr=3e-4 --train.steps=16 --checkpoint.resume=auto
grep -q "skipping checkpoint renamed/checkpoints/step-00000016.full.h5: .*file name says step 16" renamed.out &&
  grep -q "resumed from renamed/checkpoints/step-00000012.full.h5" renamed.out && pass name_step_mismatch_falls_back ||
  fail name_step_mismatch_falls_back "$(grep -E 'skipping|resumed|error' renamed.out)"
