#!/usr/bin/env bash
# Trident on a real Slurm: a single-node cluster started here (tests/slurm/slurm-local.sh: munge,
# slurmctld, slurmd advertising 8 CPUs), then the three scenarios of issue 8:
#   (a) sbatch slurm/train.sbatch with a tiny deck: 4 ranks through srun, metrics.h5, a checkpoint;
#   (b) a 4-point sweep (scripts/sweep --submit) as a job array: the summary has 4 rows;
#   (c) a job signalled with USR1 checkpoints, requeues itself, resumes and ends with the same
#       final loss as an uninterrupted run;
#   (d) TERM to the batch shell: the ranks checkpoint, the job ends with status 3.
# Prints "PASS name" / "FAIL name: why" like tests/e2e/*.sh. Stops the cluster at the end when it
# started it (only the daemons it started). Run from the repository root, as root; about a minute.
# Environment: BUILD (build directory, default build), SLURM_LOCAL_* (see slurm-local.sh).
. tests/e2e/lib.sh
HARNESS="$ROOT/tests/slurm/slurm-local.sh"
PY=/usr/bin/python3
export OMP_NUM_THREADS=1
# Every sbatch: the local node has no GPUs and 8 CPUs; one CPU per rank; no job runs long.
SB=(--gpus-per-node=0 --cpus-per-task=1 --time=5 --chdir="$WORK")

SCENARIOS=(slurm_train_sbatch_4_ranks_through_srun slurm_train_sbatch_writes_metrics
  slurm_train_sbatch_writes_checkpoint slurm_sweep_job_array_summary_4_rows
  slurm_usr1_requeue_resume_same_final_loss slurm_kill9_rank_job_ends
  slurm_term_to_batch_shell_checkpoint_exit_3)

started_here=0
cleanup() {
  if ((started_here)); then
    local before
    before=$(cat "$WORK/daemon.pids" 2>/dev/null)
    "$HARNESS" stop >"$WORK/slurm-stop.log" 2>&1
    local alive="" p
    for p in $before; do kill -0 "$p" 2>/dev/null && alive+=" $p"; done
    if [[ -n $before && -z $alive ]]; then pass slurm_harness_stops_its_daemons
    else fail slurm_harness_stops_its_daemons "still alive:${alive:- (no pids recorded)}"; fi
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# ------------------------------------------------------------------------------- the cluster
state_dir=${SLURM_LOCAL_DIR:-/tmp/trident-slurm}
if "$HARNESS" status >/dev/null 2>&1; then
  echo "slurm: a local cluster is already running in $state_dir; using it, leaving it running"
else
  if ! "$HARNESS" start >"$WORK/slurm-start.log" 2>&1; then
    fail slurm_harness_starts "$(tail -5 "$WORK/slurm-start.log" | tr '\n' ' ')"
    for name in "${SCENARIOS[@]}"; do fail "$name" "no local Slurm cluster"; done
    exit 0
  fi
  started_here=1
  cat "$state_dir"/munge/munged.pid "$state_dir"/run/slurmctld.pid "$state_dir"/run/slurmd.pid \
    >"$WORK/daemon.pids" 2>/dev/null
  pass slurm_harness_starts
fi
eval "$("$HARNESS" env)"
export SLURM_CONF TRIDENT_BIN="$TRIDENT" TRIDENT_ROOT="$ROOT"

# wait_job ID SECONDS: until the job has left the queue (a requeued job stays in it, pending).
wait_job() {
  local i
  for ((i = 0; i < $2 * 5; i++)); do
    [[ -z $(squeue -h -j "$1" -o %i 2>/dev/null) ]] && return 0
    sleep 0.2
  done
  return 1
}
job_field() {  # job_field ID NAME: NAME=value from scontrol show job
  scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}
# final_loss RUN_DIR: the training loss of the last step (train.steps), last entry for that step.
final_loss() {
  $PY - "$1/metrics.h5" <<'PY' 2>&1
import sys, h5py, numpy
f = h5py.File(sys.argv[1], "r")
step, loss = f["step"][:], f["loss"][:]
at = numpy.nonzero(step == int(f.attrs["train.steps"]))[0]
print(repr(float(loss[at[-1]])) if len(at) else "no-final-step")
PY
}

# ------------------------------------------------- (a) train.sbatch: 4 ranks, metrics, checkpoint
write_deck "$WORK/a.deck" '[checkpoint]
full_interval = 2steps'
jid=$(sbatch --parsable -N1 --ntasks-per-node=4 "${SB[@]}" -o "$WORK/a.out" \
  "$ROOT/slurm/train.sbatch" "$WORK/a.deck" --parallel.data=4 --train.steps=4 \
  --train.run_dir="$WORK/a-run" 2>"$WORK/a.sbatch.err")
why=
if [[ -z $jid ]]; then
  why="sbatch failed: $(cat "$WORK/a.sbatch.err")"
elif ! wait_job "$jid" 60; then
  why="job $jid still in the queue after 60 s"; scancel "$jid"
fi
if [[ -n $why ]]; then
  for name in "${SCENARIOS[@]:0:3}"; do fail "$name" "$why"; done
else
  state=$(job_field "$jid" JobState) code=$(job_field "$jid" ExitCode)
  if [[ $state == COMPLETED && $code == 0:0 ]] && grep -q '^trident train: 4 ranks = ' "$WORK/a.out"; then
    pass slurm_train_sbatch_4_ranks_through_srun
  else
    fail slurm_train_sbatch_4_ranks_through_srun "job $jid $state exit $code: $(grep -E 'error|train.sbatch' "$WORK/a.out" | tail -3 | tr '\n' ' ')"
  fi
  if [[ -s $WORK/a-run/metrics.h5 ]] && [[ $($PY -c "import h5py; print(len(h5py.File('$WORK/a-run/metrics.h5')['loss']))" 2>&1) == 4 ]]; then
    pass slurm_train_sbatch_writes_metrics
  else
    fail slurm_train_sbatch_writes_metrics "no metrics.h5 with 4 steps in $WORK/a-run"
  fi
  if compgen -G "$WORK/a-run/checkpoints/*.h5" >/dev/null; then
    pass slurm_train_sbatch_writes_checkpoint
  else
    fail slurm_train_sbatch_writes_checkpoint "no $WORK/a-run/checkpoints/*.h5 (ls: $(ls "$WORK/a-run" 2>&1 | tr '\n' ' '))"
  fi
fi

# ------------------------------------------------------------- (b) a 4-point sweep as a job array
write_deck "$WORK/b.deck"
(cd "$WORK" && timeout 180 "$ROOT/scripts/sweep" b.deck --set parallel.tensor=1,2 \
  --set train.micro_batch=1,2 --ranks 2 --out "$WORK/sweep" --submit --wait \
  --sbatch=--cpus-per-task=1 --sbatch=--time=5 >"$WORK/b.out" 2>&1)
status=$?
rows=$(($(wc -l <"$WORK/sweep/summary.csv" 2>/dev/null || echo 1) - 1))
done_rows=$(grep -c ',done,' "$WORK/sweep/summary.csv" 2>/dev/null)
arrays=$(grep -c 'Submitted batch job\|submitted job array' "$WORK/b.out")
tasks=$(grep -l '^sweep.sbatch: array task' "$WORK"/sweep/logs/point-*.out 2>/dev/null | wc -l)
if [[ $status == 0 && $rows == 4 && $done_rows == 4 && $arrays == 1 && $tasks == 4 ]]; then
  pass slurm_sweep_job_array_summary_4_rows
else
  fail slurm_sweep_job_array_summary_4_rows "exit $status, $rows rows ($done_rows done), $arrays array(s), $tasks array task logs: $(tail -8 "$WORK/b.out" | tr '\n' ' ')"
fi

# ------------------------ (d) a rank killed with SIGKILL under srun: the job ends, no hang
# train.sbatch runs srun with --kill-on-bad-exit=0 (so that ranks stopping with status 3 do not
# get the others killed mid-checkpoint); the survivors are then ended by the watchdog
# (comm.timeout_s) in whichever collective they wait.
write_deck "$WORK/d.deck"
jid=$(sbatch --parsable -N1 --ntasks-per-node=4 "${SB[@]}" -o "$WORK/d.out" \
  "$ROOT/slurm/train.sbatch" "$WORK/d.deck" --parallel.data=4 --train.steps=5000 --comm.timeout_s=10 \
  --train.run_dir="$WORK/d-run" --metrics.log_interval=1 2>"$WORK/d.sbatch.err")
victim=
for ((i = 0; i < 600; i++)); do
  if grep -qE '^step +[2-9][0-9]*/5000 ' "$WORK/d.out" 2>/dev/null; then
    victim=$(pgrep -f "trident train $WORK/d.deck" | tail -1)
    break
  fi
  sleep 0.1
done
if [[ -z $jid || -z $victim ]]; then
  fail slurm_kill9_rank_job_ends "no running rank to kill (job '$jid'): $(tail -3 "$WORK/d.out" 2>/dev/null | tr '\n' ' ')"
  [[ -n $jid ]] && scancel "$jid"
else
  start=$SECONDS
  kill -9 "$victim"
  if wait_job "$jid" 60; then
    pass "slurm_kill9_rank_job_ends (ended $((SECONDS - start)) s after the kill: $(job_field "$jid" JobState))"
  else
    fail slurm_kill9_rank_job_ends "job $jid still in the queue 60 s after a rank was killed"; scancel "$jid"
  fi
fi

# --------------------------------- (c) USR1: checkpoint, requeue, resume, same final loss
cat >"$WORK/c.deck" <<DECK
[model]
layers = 2
heads = 2
hidden = 32
vocab = 256
seq_len = 32
[train]
steps = 800
global_batch = 8
micro_batch = 1
eval_tokens = 1024
seed = 7
[checkpoint]
full_interval = 100steps
[metrics]
log_interval = 10
[data]
train = $WORK/data/train.bin
val = $WORK/data/val.bin
DECK
jid=$(sbatch --parsable -N1 --ntasks-per-node=4 "${SB[@]}" -o "$WORK/c.out" \
  "$ROOT/slurm/train.sbatch" "$WORK/c.deck" --parallel.data=4 --train.run_dir="$WORK/c-run" \
  2>"$WORK/c.sbatch.err")
# signal_batch_when_under_way JID OUT SIGNAL: once the job's output OUT logs a step past 20,
# SIGNAL to its batch shell, the way --signal=B:USR1@120 would; signalled=1 if it was sent
# (0 if the job left the queue or never got there within 60 s).
signal_batch_when_under_way() {
  local i
  signalled=0
  [[ -n $1 ]] || return
  for ((i = 0; i < 600; i++)); do
    if grep -qE '^step +([2-9][0-9]|[1-9][0-9]{2,})/800 ' "$2" 2>/dev/null; then
      scancel --signal="$3" --batch "$1" && signalled=1
      break
    fi
    [[ -z $(squeue -h -j "$1" -o %i 2>/dev/null) ]] && break
    sleep 0.1
  done
}
signal_batch_when_under_way "$jid" "$WORK/c.out" USR1
# The uninterrupted reference, same deck and layout, while the requeued job waits to restart.
timeout 120 mpirun -np 4 "$TRIDENT" train "$WORK/c.deck" --parallel.data=4 \
  --train.run_dir="$WORK/c-ref" >"$WORK/c-ref.out" 2>&1
if [[ -z $jid ]]; then
  fail slurm_usr1_requeue_resume_same_final_loss "sbatch failed: $(cat "$WORK/c.sbatch.err")"
elif ((!signalled)); then
  fail slurm_usr1_requeue_resume_same_final_loss "the job ended (or never logged step 20) before the signal: $(tail -3 "$WORK/c.out" | tr '\n' ' ')"
elif ! wait_job "$jid" 120; then
  fail slurm_usr1_requeue_resume_same_final_loss "job $jid still in the queue after the signal + 120 s"; scancel "$jid"
else
  state=$(job_field "$jid" JobState) code=$(job_field "$jid" ExitCode) restarts=$(job_field "$jid" Restarts)
  ours=$(final_loss "$WORK/c-run") ref=$(final_loss "$WORK/c-ref")
  if ! grep -q 'stopped by USR1 after a checkpoint; requeueing' "$WORK/c.out"; then
    fail slurm_usr1_requeue_resume_same_final_loss "no checkpoint-and-requeue after USR1 (job $state, exit $code): $(grep -E 'train.sbatch|error' "$WORK/c.out" | tail -3 | tr '\n' ' ')"
  elif [[ $state != COMPLETED || $code != 0:0 || $restarts != 1 ]]; then
    fail slurm_usr1_requeue_resume_same_final_loss "job $jid: $state, exit $code, $restarts restart(s); expected COMPLETED, 0:0, 1"
  elif [[ $ours != "$ref" || $ours == *[!0-9.e-]* ]]; then
    fail slurm_usr1_requeue_resume_same_final_loss "final loss after the resume '$ours', uninterrupted '$ref'"
  else
    pass slurm_usr1_requeue_resume_same_final_loss
  fi
fi

# --------------------------------- (d) TERM to the batch shell: checkpoint, exit status 3
# srun would kill its step on a TERM of its own; train.sbatch forwards TERM to it as USR1, so the
# ranks checkpoint and the job ends with trident's status 3 (no requeue on TERM).
jid=$(sbatch --parsable -N1 --ntasks-per-node=2 "${SB[@]}" -o "$WORK/d.out" \
  "$ROOT/slurm/train.sbatch" "$WORK/c.deck" --parallel.data=2 --train.run_dir="$WORK/d-run" \
  2>"$WORK/d.sbatch.err")
signal_batch_when_under_way "$jid" "$WORK/d.out" TERM
if [[ -z $jid ]]; then
  fail slurm_term_to_batch_shell_checkpoint_exit_3 "sbatch failed: $(cat "$WORK/d.sbatch.err")"
elif ((!signalled)); then
  fail slurm_term_to_batch_shell_checkpoint_exit_3 "the job ended (or never logged step 20) before the signal"
elif ! wait_job "$jid" 120; then
  fail slurm_term_to_batch_shell_checkpoint_exit_3 "job $jid still in the queue after the signal + 120 s"; scancel "$jid"
else
  code=$(job_field "$jid" ExitCode)
  if [[ $code == 3:0 ]] && grep -q 'stopped by SIGUSR1 after step' "$WORK/d.out" && ls "$WORK/d-run/checkpoints/"*.full.h5 > /dev/null 2>&1; then
    pass "slurm_term_to_batch_shell_checkpoint_exit_3 ($(grep -o 'stopped by SIGUSR1 after step [0-9]*' "$WORK/d.out"))"
  else
    fail slurm_term_to_batch_shell_checkpoint_exit_3 "job $jid exit $code: $(grep -E 'train.sbatch|stopped|error' "$WORK/d.out" | tail -3 | tr '\n' ' ')"
  fi
fi
