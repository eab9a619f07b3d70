#!/usr/bin/env bash
# run.sh — the test suite: unit tests, multi-rank tests under mpirun -np 1, 2, 4, 8, and
# end-to-end tests of the binary, the Slurm scenarios on a local Slurm. Ends with one line
# "N passed, N failed, N skipped" (skipped: a case that needs a CPU feature this machine lacks,
# e.g. oneDNN's bf16 matmul under DNNL_MAX_CPU_ISA=AVX2 — never a failure). Run from the repo root.
# Two tiers, so that `make test` stays within 20 minutes on 2 cores: the e2e scripts marked
# "# tier: long" on their second line (timing measurements, the guard backend, the build switch,
# stress, 200-step curves, the memory model's matrix, the reference fingerprints) and the Slurm
# scenarios form the long tier (`make test-long`); CI runs both.
#   tests/run.sh                        the first tier (make test)
#   tests/run.sh long                   the long tier (make test-long)
#   tests/run.sh all                    both
#   tests/run.sh unit e2e/precision     only these groups (unit, mpi, gpu, e2e/NAME, slurm, cuda-emu), either tier
set -u
BUILD=${BUILD:-build}
export BUILD
. scripts/mpi-env.sh
passed=0 failed=0 skipped=0
GROUPS_WANTED=" $* "
# wanted GROUP [TIER]: named, or of the tier asked for (none named: the first; long; all).
wanted() {
  local tier=${2:-first}
  case $GROUPS_WANTED in
    "  ") [[ $tier == first ]] ;;
    " long ") [[ $tier == long ]] ;;
    " all ") true ;;
    *) [[ $GROUPS_WANTED == *" $1 "* ]] ;;
  esac
}
tier_of() { if sed -n 2p "$1" | grep -q '^# tier: long'; then echo long; else echo first; fi; }  # tier_of SCRIPT
LOG=$(mktemp -d /tmp/trident-tests.XXXXXX)

# Boost.Test: count test cases from the short report (skipped: disabled by a precondition on
# the CPU); a crash without a report counts as a failure.
run_boost() {  # run_boost LABEL COMMAND...
  local label=$1 out="$LOG/$1.log" status p f s started=$SECONDS
  shift
  timeout 600 "$@" --report_level=short --color_output=no >"$out" 2>&1
  status=$?
  p=$(grep -oE '[0-9]+ test cases? out of [0-9]+ passed' "$out" | head -1 | grep -oE '^[0-9]+')
  f=$(grep -oE '[0-9]+ test cases? out of [0-9]+ failed' "$out" | head -1 | grep -oE '^[0-9]+')
  s=$(grep -oE '[0-9]+ test cases? out of [0-9]+ skipped' "$out" | head -1 | grep -oE '^[0-9]+')
  p=${p:-0} f=${f:-0} s=${s:-0}
  if [[ $status != 0 && $f == 0 ]]; then f=1; fi
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  report "$label" "$p" "$f" "$s" $((SECONDS - started))
  if [[ $f != 0 ]]; then grep -E 'error|fatal|Test module' "$out" | head -30; fi
}

# One line per group: "unit   77 passed, 0 failed  (41 s)" (", 1 skipped" when any): the
# seconds show where the suite's time goes.
report() {  # report LABEL PASSED FAILED SKIPPED SECONDS
  printf '%-22s %3d passed, %d failed' "$1" "$2" "$3"
  if [[ $4 != 0 ]]; then printf ', %d skipped' "$4"; fi
  printf '  (%d s)\n' "$5"
}

wanted unit && run_boost unit "$BUILD/tests/unit_tests"
for np in 1 2 4 8; do
  wanted mpi && run_boost "mpi -np $np" mpirun -np "$np" "$BUILD/tests/mpi_tests"
done

# A script that prints PASS/FAIL/SKIP lines: counted; no line at all counts as a failure.
run_script() {  # run_script LABEL SCRIPT
  local label=$1 script=$2 out="$LOG/$(basename "$2" .sh)-$(basename "$(dirname "$2")").log" started=$SECONDS
  timeout 900 bash "$script" >"$out" 2>&1
  local p f s
  p=$(grep -c '^PASS ' "$out")
  f=$(grep -c '^FAIL ' "$out")
  s=$(grep -c '^SKIP ' "$out")
  if [[ $p == 0 && $f == 0 && $s == 0 ]]; then f=1; echo "$label: no result (see $out)"; tail -5 "$out"; fi
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  report "$label" "$p" "$f" "$s" $((SECONDS - started))
  grep -E '^(FAIL|SKIP) ' "$out"
}

for script in tests/e2e/*.sh; do
  [[ $script == */lib.sh ]] && continue
  wanted "e2e/$(basename "$script" .sh)" "$(tier_of "$script")" || continue
  run_script "e2e $(basename "$script" .sh)" "$script"
done
# GPU checks: PASS/FAIL with a GPU, SKIP lines without one (or without NCCL in the build).
wanted gpu && run_script "gpu kernels" tests/gpu/run.sh
wanted gpu && run_script "gpu nccl" tests/gpu/test_nccl.sh
# The CUDA backend on the CUDA emulator (a CUDA_EMU=1 build: make test-cuda-emu), named only.
wanted cuda-emu emulator && run_script "cuda-emu" tests/cuda_emu/run.sh
# A real single-node Slurm (installed and started by the harness, stopped afterwards).
wanted slurm long && run_script slurm tests/slurm/run.sh

echo "logs: $LOG"
echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed == 0 ]]
