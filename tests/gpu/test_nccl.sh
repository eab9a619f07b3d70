#!/usr/bin/env bash
# The NCCL communicator on this host's GPUs: tests/gpu/test_nccl under mpirun with one rank per
# GPU (at most 8), then the watchdog case (2 GPUs: rank 1 never joins an all-reduce; the job
# must end within the 3 s timeout + 30 s with the MPI communicator's message naming the
# operation, the group and the peer). Without NCCL or a GPU every case prints a SKIP line.
set -u
BUILD=${BUILD:-build}
. scripts/mpi-env.sh
BIN=$BUILD/tests/gpu/test_nccl
if [[ ! -x $BIN ]]; then echo "FAIL nccl_build ($BIN is missing: run make)"; exit 1; fi
# The CUDA emulator's build (tests/cuda_emu) has as many GPUs as TRIDENT_CUDA_EMU_GPUS gives each rank.
gpus=${TRIDENT_CUDA_EMU_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
ranks=$(( gpus < 1 ? 2 : gpus > 8 ? 8 : gpus ))  # no GPU: two ranks print the SKIP lines
# Every case reports a line: where the run ends before (a crash, a watchdog), the missing ones fail.
err=$(mktemp)
trap 'rm -f "$err"' EXIT
out=$(timeout -k 10 300 mpirun -np "$ranks" "$BIN" 2> "$err")
status=$?
cat "$err" >&2
[[ -n $out ]] && echo "$out"
reported=$(grep -cE '^(PASS|FAIL|SKIP) nccl_' <<<"$out")
if (( reported < 11 )); then
  echo "FAIL nccl_run (status $status; $reported of 11 cases reported: $(tail -c 400 "$err" | tr '\n' ' '))"
fi

if (( gpus < 2 )); then
  echo "SKIP nccl_watchdog (needs 2 GPUs; this host has $gpus)"
  exit 0
fi
start=$SECONDS
out=$(timeout -k 10 120 mpirun -np 2 "$BIN" --hang 2>&1)
status=$?
elapsed=$((SECONDS - start))
wanted="watchdog: all-reduce (NCCL) on the world group (2 ranks) has waited 3 s (comm.timeout_s) for rank(s) 1 (world rank 1) of the group"
if [[ $status != 0 && $out == *"$wanted"* && $elapsed -le 33 ]]; then
  echo "PASS nccl_watchdog (ended in ${elapsed} s)"
else
  echo "FAIL nccl_watchdog (status $status after ${elapsed} s: $(tail -c 600 <<<"$out"))"
fi
