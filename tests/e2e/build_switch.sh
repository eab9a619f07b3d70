#!/usr/bin/env bash
# tier: long
# The CUDA switch of the build: with nvcc present the default build compiles kernels/cuda and
# the NCCL communicator (NCCL=1 where nccl.h is), linking CUDA's runtime statically and no other
# CUDA library: cuBLASLt, NCCL, cuDNN and NVRTC are opened on first use
# (src/core/shared_library.hpp); `make CUDA=0` builds a CPU-only binary (here unoptimised,
# OPT=-O0: the check is what it compiles and links; half the time of -O3 on 2 cores).
. tests/e2e/lib.sh
nvcc_path=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
if [[ -n $nvcc_path ]]; then
  if "$TRIDENT" version | grep -qE '^CUDA: runtime .*, NCCL [0-9.]+ \(' &&
     ! ldd "$TRIDENT" | grep -qE 'lib(cublas|nccl|cudnn|nvrtc)'; then
    pass default_build_has_cuda_where_nvcc_exists
  else
    fail default_build_has_cuda_where_nvcc_exists "$("$TRIDENT" version | grep CUDA)"
  fi
fi
# The GPUs the kernels are compiled for: machine code for each of CUDA_ARCHS and the PTX of the
# newest (in whatever order they are given), which newer GPUs than the build's compile at their
# first launch (make -n: the flags); an architecture-specific one (90a: no PTX that newer GPUs
# run) is refused; `trident version` says what this build has, and how each visible GPU runs it.
if [[ -n $nvcc_path ]]; then
  ab="$WORK/arch-switch"
  flags=$(make -C "$ROOT" --no-print-directory -n CUDA=1 CUDA_ARCHS="90 100 80" BUILD="$ab" "$ab/obj/kernels/cuda/backend.o" 2> /dev/null | grep -- '-gencode' | head -1)
  # This build's line, whatever CUDA_ARCHS it had: machine code ascending, and the newest's PTX.
  images=$("$TRIDENT" version | sed -n 's/^CUDA kernels: //p')
  newest=${images% and PTX *}
  newest=${newest##*sm_}
  if [[ $flags == *"code=sm_80"* && $flags == *"code=sm_100"* && $flags == *"arch=compute_100,code=compute_100"* &&
        $flags != *"code=compute_90"* && $flags != *"code=compute_80"* && $flags == *"-DTRIDENT_CUDA_PTX_ARCH=100"* &&
        $(make -C "$ROOT" --no-print-directory -n CUDA=1 CUDA_ARCHS="90a" BUILD="$ab" "$ab/obj/kernels/cuda/backend.o" 2>&1) == *"not '90a'"* &&
        $images =~ ^(sm_[0-9]+, )*sm_[0-9]+\ and\ PTX\ [0-9]+\.[0-9]$ && ${images##* PTX } == "${newest%?}.${newest: -1}" ]]; then
    pass cuda_archs_compile_machine_code_and_the_newest_ptx
  else
    fail cuda_archs_compile_machine_code_and_the_newest_ptx "flags: $flags; version: CUDA kernels: $images"
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
# NCCL=0 with CUDA: no NCCL communicator compiled (no object built with TRIDENT_NCCL), so such a
# binary never opens libnccl; with NCCL=1 there is. And no link line names a CUDA library either
# way. Dry runs (make -n) into a scratch build directory.
if [[ -n $nvcc_path ]]; then
  nb="$WORK/nccl-switch"
  dry() { make -C "$ROOT" --no-print-directory -n CUDA=1 NCCL="$1" BUILD="$nb" "$nb/bin/trident" 2> /dev/null; }
  without=$(dry 0 | grep -c -- '-DTRIDENT_NCCL=1') with=$(dry 1 | grep -c -- '-DTRIDENT_NCCL=1')
  linked=$( (dry 0; dry 1) | grep -- "-o $nb/bin/trident" | grep -cE -- '-l(cublasLt|nccl|cudnn|nvrtc)\b')
  if [[ $without == 0 && $with -ge 3 && $linked == 0 ]]; then pass nccl_0_builds_no_nccl
  else fail nccl_0_builds_no_nccl "objects with TRIDENT_NCCL: $without with NCCL=0, $with with NCCL=1; link lines naming a CUDA library: $linked"; fi
fi
# cuDNN's fused attention: where make deps fetched cuDNN's frontend headers, the default CUDA build
# compiles it (and opens libcudnn, and NVRTC, which the frontend's own engines use, on first use);
# CUDNN=0 compiles none of it (a dry run).
if [[ -n $nvcc_path ]]; then
  if [[ ! -f ${CUDNN_FRONTEND:-/var/cache/trident/cudnn-frontend-1.32.0/include}/cudnn_frontend.h ]]; then
    skip default_build_has_cudnn_attention "cuDNN's frontend headers are absent (make deps could not fetch them)"
  elif "$TRIDENT" version | grep -q "^CUDA attention: cuDNN .*'s fused attention"; then
    pass default_build_has_cudnn_attention
  else
    fail default_build_has_cudnn_attention "$("$TRIDENT" version | grep 'CUDA attention')"
  fi
  cb="$WORK/cudnn-switch"
  cudnn_objects() { make -C "$ROOT" --no-print-directory -n CUDA=1 CUDNN="$1" BUILD="$cb" "$cb/bin/trident" 2> /dev/null | grep -c -- '-DTRIDENT_CUDNN=1'; }
  without=$(cudnn_objects 0) with=$(cudnn_objects 1)
  if [[ $without == 0 && $with == 2 ]]; then pass cudnn_0_builds_no_cudnn
  else fail cudnn_0_builds_no_cudnn "objects with TRIDENT_CUDNN: $without with CUDNN=0, $with with CUDNN=1"; fi
fi
