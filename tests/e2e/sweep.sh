#!/usr/bin/env bash
# scripts/sweep run locally: the points are checked, run one after another under mpirun, each in
# its own run directory, and summarised one row per point (text and CSV); a bad spec is refused
# before anything runs. (The Slurm submission is tested in tests/slurm/run.sh.)
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1 TRIDENT_BIN="$TRIDENT"
write_deck s.deck
"$ROOT/scripts/sweep" s.deck --set parallel.data=1,2 --set train.micro_batch=1,2 --out "$WORK/sw" --local > sweep.out 2>&1
status=$?
rows=$(($(wc -l < sw/summary.csv 2>/dev/null || echo 1) - 1))
dirs=$(ls -d sw/point-* 2>/dev/null | wc -l)
if [[ $status == 0 && $rows == 4 && $dirs == 4 ]] && grep -q "tokens" sweep.out; then
  pass "sweep_local_4_points ($(head -1 sw/summary.csv))"
else
  fail sweep_local_4_points "status $status, $rows rows, $dirs run directories: $(tail -5 sweep.out)"
fi
"$ROOT/scripts/sweep" s.deck --set parallel.tensor=1,3 --out "$WORK/bad" --local > bad.out 2>&1
status=$?
[[ $status == 2 && ! -e bad/point-000 ]] && pass "sweep_bad_point_refused ($(grep -m1 -i error bad.out | head -c 150))" ||
  fail sweep_bad_point_refused "status $status: $(tail -3 bad.out)"
"$ROOT/scripts/sweep" s.deck --set parallel.tensor --local > spec.out 2>&1
[[ $? == 2 ]] && pass sweep_bad_spec || fail sweep_bad_spec "$(cat spec.out)"
# Submission requests no GPUs unless asked for (a cluster without GPU resources rejects any
# request, even of 0 GPUs); an --sbatch option asking for them is passed on.
"$ROOT/scripts/sweep" s.deck --set train.micro_batch=1,2 --submit --dry-run > dry.out 2>&1
"$ROOT/scripts/sweep" s.deck --set train.micro_batch=1,2 --submit --dry-run --sbatch=--gpus-per-task=1 > dry_gpu.out 2>&1
if grep -q '^\$ sbatch' dry.out && ! grep -qE -- '--(gpus|gres)' dry.out && ! grep -qE '^#SBATCH +--(gpus|gres)' "$ROOT/slurm/sweep.sbatch" &&
  [[ $(grep -c -- '--gpus-per-task=1' dry_gpu.out) == 1 ]]; then
  pass sweep_submit_requests_gpus_only_when_asked
else
  fail sweep_submit_requests_gpus_only_when_asked "$(grep -hE 'sbatch|gpus' dry.out dry_gpu.out "$ROOT/slurm/sweep.sbatch" | head -5)"
fi
