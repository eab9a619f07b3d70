#!/usr/bin/env bash
# The CUDA switch of the build: with nvcc present the default build compiles kernels/cuda and
# links CUDA, cuBLASLt and NCCL; `make CUDA=0` builds a CPU-only binary (here unoptimised,
# OPT=-O0: the check is what it compiles and links; half the time of -O3 on 2 cores).
. tests/e2e/lib.sh
nvcc_path=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
if [[ -n $nvcc_path ]]; then
  if "$TRIDENT" version | grep -q '^CUDA: runtime' && ldd "$TRIDENT" | grep -q libnccl; then
    pass default_build_has_cuda_where_nvcc_exists
  else
    fail default_build_has_cuda_where_nvcc_exists "$("$TRIDENT" version | grep CUDA)"
  fi
fi
cpu_build="$ROOT/${BUILD:-build}/cpu-only"
if make -C "$ROOT" --no-print-directory -j2 CUDA=0 OPT=-O0 BUILD="$cpu_build" "$cpu_build/bin/trident" > "$WORK/make.log" 2>&1 &&
   "$cpu_build/bin/trident" version | grep -q '^CUDA: not compiled in' &&
   ! ldd "$cpu_build/bin/trident" | grep -qE 'libnccl|libcublas'; then
  pass cuda_0_builds_cpu_only
else
  fail cuda_0_builds_cpu_only "$(tail -5 "$WORK/make.log")"
fi
