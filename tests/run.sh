#!/usr/bin/env bash
# run.sh — the whole test suite: unit tests, multi-rank tests under mpirun -np 1, 2, 4, 8, and
# end-to-end tests of the binary, the Slurm scenarios on a local Slurm. Ends with one line "N passed, N failed". Run from the repo root.
set -u
BUILD=${BUILD:-build}
export BUILD
. scripts/mpi-env.sh
passed=0 failed=0
LOG=$(mktemp -d /tmp/trident-tests.XXXXXX)

# Boost.Test: count test cases from the short report; a crash without a report counts as a failure.
run_boost() {  # run_boost LABEL COMMAND...
  local label=$1 out="$LOG/$1.log" status p f
  shift
  timeout 600 "$@" --report_level=short --color_output=no >"$out" 2>&1
  status=$?
  p=$(grep -oE '[0-9]+ test cases? out of [0-9]+ passed' "$out" | head -1 | grep -oE '^[0-9]+')
  f=$(grep -oE '[0-9]+ test cases? out of [0-9]+ failed' "$out" | head -1 | grep -oE '^[0-9]+')
  p=${p:-0} f=${f:-0}
  if [[ $status != 0 && $f == 0 ]]; then f=1; fi
  passed=$((passed + p)) failed=$((failed + f))
  printf '%-22s %3d passed, %d failed\n' "$label" "$p" "$f"
  if [[ $f != 0 ]]; then grep -E 'error|fatal|Test module' "$out" | head -30; fi
}

run_boost unit "$BUILD/tests/unit_tests"
for np in 1 2 4 8; do
  run_boost "mpi -np $np" mpirun -np "$np" "$BUILD/tests/mpi_tests"
done

# A script that prints PASS/FAIL lines: counted; no line at all counts as a failure.
run_script() {  # run_script LABEL SCRIPT
  local label=$1 script=$2 out="$LOG/$(basename "$2" .sh)-$(basename "$(dirname "$2")").log"
  timeout 900 bash "$script" >"$out" 2>&1
  local p f
  p=$(grep -c '^PASS ' "$out")
  f=$(grep -c '^FAIL ' "$out")
  if [[ $p == 0 && $f == 0 ]]; then f=1; echo "$label: no result (see $out)"; tail -5 "$out"; fi
  passed=$((passed + p)) failed=$((failed + f))
  printf '%-22s %3d passed, %d failed\n' "$label" "$p" "$f"
  grep '^FAIL ' "$out"
}

for script in tests/e2e/*.sh; do
  [[ $script == */lib.sh ]] && continue
  run_script "e2e $(basename "$script" .sh)" "$script"
done
# A real single-node Slurm (installed and started by the harness, stopped afterwards).
run_script slurm tests/slurm/run.sh

echo "logs: $LOG"
echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
