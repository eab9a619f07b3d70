#!/usr/bin/env bash
# run-asan.sh — the tests that exercise memory and signals, on the AddressSanitizer +
# UndefinedBehaviorSanitizer build (make test-asan builds it in build-asan/ and runs this). A
# sanitizer report anywhere fails the run: ASan aborts the process, UBSan's first report halts
# it, and the logs are searched for reports that a test's own exit status would hide.
# Ends with "N passed, N failed" like tests/run.sh.
set -u
export BUILD=${BUILD:-build-asan}
# Leak checking off: MPI and oneDNN keep process-lifetime allocations by design.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
. scripts/mpi-env.sh
passed=0 failed=0
LOG=$(mktemp -d /tmp/trident-asan.XXXXXX)

sanitizer_reports() { grep -lE 'ERROR: AddressSanitizer|runtime error:|UndefinedBehaviorSanitizer' "$@" 2> /dev/null; }

count() {  # count LABEL LOGFILE PASSED FAILED
  local reports
  reports=$(sanitizer_reports "$2")
  if [[ -n $reports ]]; then
    echo "$1: sanitizer report in $2:"
    grep -m5 -E 'ERROR: AddressSanitizer|runtime error:|SUMMARY' "$2"
    (($4 == 0)) && set -- "$1" "$2" "$3" 1
  fi
  passed=$((passed + $3)) failed=$((failed + $4))
  printf '%-28s %3d passed, %d failed\n' "$1" "$3" "$4"
}

run_boost() {  # run_boost LABEL COMMAND...
  local label=$1 out="$LOG/$1.log" p f status
  shift
  timeout 1200 "$@" --report_level=short --color_output=no > "$out" 2>&1
  status=$?
  p=$(grep -oE '[0-9]+ test cases? out of [0-9]+ passed' "$out" | head -1 | grep -oE '^[0-9]+')
  f=$(grep -oE '[0-9]+ test cases? out of [0-9]+ failed' "$out" | head -1 | grep -oE '^[0-9]+')
  p=${p:-0} f=${f:-0}
  [[ $status != 0 && $f == 0 ]] && f=1
  count "$label" "$out" "$p" "$f"
}

run_script() {  # run_script LABEL COMMAND...: PASS/FAIL lines
  local label=$1 out="$LOG/$1.log" p f
  shift
  timeout 1800 "$@" > "$out" 2>&1
  p=$(grep -c '^PASS ' "$out") f=$(grep -c '^FAIL ' "$out")
  [[ $p == 0 && $f == 0 ]] && f=1
  count "$label" "$out" "$p" "$f"
  grep '^FAIL ' "$out"
}

run_boost unit "$BUILD/tests/unit_tests"
for np in 2 4; do run_boost "mpi -np $np" mpirun -np "$np" "$BUILD/tests/mpi_tests"; done
# device_guard and graphs: the guard's mappings, its fault handler and the recorded graphs' stored
# arguments (19 and 14 cases, about 80 s together here under the sanitizers).
for script in training checkpoint faults cli deck_errors precision device_guard graphs hostile_files; do
  run_script "e2e $script" bash "tests/e2e/$script.sh"
done
# Preemptions at random instants, startup included: SIGTERM, then SIGKILL 0-1 s later.
run_script "stress TERM,KILL serial" env SIGNALS=TERM,KILL LABEL=asan_term_kill bash scripts/stress-resume.sh 15 1
run_script "stress TERM,KILL zero async" env SIGNALS=TERM,KILL LABEL=asan_term_kill_d2 \
  bash scripts/stress-resume.sh 8 2 --parallel.data=2 --optim.zero=1 --checkpoint.async=true
echo "logs: $LOG"
echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
