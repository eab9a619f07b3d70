#!/usr/bin/env bash
# The gpu group of tests/run.sh: each CUDA kernel against the CPU backend on random inputs
# (tests/gpu/test_cuda_kernels.cpp). Prints a PASS or FAIL line per operation where CUDA sees a
# GPU, a SKIP line per operation where it sees none, and one SKIP line for a build without CUDA.
BUILD=${BUILD:-build}
bin="$BUILD/tests/gpu_tests"
if [[ ! -x $bin ]]; then
  echo "SKIP cuda_kernels (this build has no CUDA: $bin is built only where nvcc exists)"
  exit 0
fi
exec "$bin"
