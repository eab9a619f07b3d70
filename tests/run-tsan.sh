#!/usr/bin/env bash
# run-tsan.sh — the threads of a rank under ThreadSanitizer (make test-tsan builds build-tsan/ and
# runs this): the unit tests (host streams, the checkpointer, the heartbeat), and training runs
# that use every thread at once — the overlapped gradient reduction, the asynchronous checkpoint
# writer, the heartbeat and the run-directory lock's heartbeat — ending by a SIGTERM stop and a
# resume. Reports are judged by tests/tsan_reports.py (MPI's own progress engine excluded).
# Ends with "N passed, N failed" like tests/run.sh.
set -u
export BUILD=${BUILD:-build-tsan}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRIDENT="$ROOT/$BUILD/bin/trident"
. "$ROOT/scripts/mpi-env.sh"
WORK=$(mktemp -d /tmp/trident-tsan.XXXXXX)
passed=0 failed=0

judge() {  # judge LABEL STATUS_OK(0/1): the reports in $WORK/LABEL.*
  local label=$1 ok=$2
  if ! python3 "$ROOT/tests/tsan_reports.py" "$WORK/$label".tsan.* > "$WORK/$label.verdict" 2>&1 || [[ $ok != 1 ]]; then
    echo "FAIL $label: $(tail -1 "$WORK/$label.verdict")"
    head -60 "$WORK/$label.verdict"
    failed=$((failed + 1))
  else
    echo "PASS $label: $(tail -1 "$WORK/$label.verdict")"
    passed=$((passed + 1))
  fi
}

tsan() {  # tsan LABEL: TSAN_OPTIONS for this label's log files (exit status not forced by reports)
  export TSAN_OPTIONS="log_path=$WORK/$1.tsan exitcode=0 history_size=7"
  touch "$WORK/$1.tsan.none"
}

tsan unit
"$ROOT/$BUILD/tests/unit_tests" > "$WORK/unit.log" 2>&1
judge unit $([[ $? == 0 ]] && echo 1 || echo 0)

cd "$WORK" || exit 1
"$TRIDENT" prepare data /usr/share/common-licenses/GPL-3 > /dev/null
cat > t.deck <<DECK
[model]
layers = 2
heads = 2
hidden = 32
vocab = 256
seq_len = 32
[train]
steps = 120
global_batch = 8
eval_interval = 20
eval_tokens = 512
[checkpoint]
full_interval = 3steps
keep_full = 2
async = true
[metrics]
log_interval = 1
[data]
train = data/train.bin
val = data/val.bin
DECK

tsan data2
mpirun -q -np 2 "$TRIDENT" train t.deck --train.run_dir=d2 --parallel.data=2 --train.steps=60 > data2.log 2>&1
judge data2 $([[ $? == 0 ]] && echo 1 || echo 0)

# 4 ranks, pipeline x data, ZeRO-1, bf16: stopped by SIGTERM once under way, then resumed.
tsan stop_resume
layout=(--parallel.data=2 --parallel.pipeline=2 --optim.zero=1 --optim.precision=bf16)
setsid mpirun -q -np 4 "$TRIDENT" train t.deck --train.run_dir=p2d2 "${layout[@]}" > stop.log 2>&1 &
job=$!
for _ in $(seq 600); do grep -q '^step *30/' stop.log && break; sleep 0.2; done
pkill -TERM -f "^$TRIDENT train t.deck --train.run_dir=p2d2"
wait "$job"
stopped=$?
mpirun -q -np 4 "$TRIDENT" train t.deck --train.run_dir=p2d2 "${layout[@]}" --checkpoint.resume=auto > resume.log 2>&1
resumed=$?
judge stop_resume $([[ $stopped == 3 && $resumed == 0 ]] && grep -q '^resumed from' resume.log && echo 1 || echo 0)
[[ $stopped == 3 && $resumed == 0 ]] || echo "  stop exit $stopped, resume exit $resumed: $(tail -n 2 stop.log resume.log)"

echo "logs: $WORK"
echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
