#!/usr/bin/env bash
# tier: long
# The CUDA switch of the build: with nvcc present the default build compiles kernels/cuda and
# links CUDA, cuBLASLt and NCCL (NCCL only where its communicator is built: NCCL=1); `make
# CUDA=0` builds a CPU-only binary (here unoptimised, OPT=-O0: the check is what it compiles and
# links; half the time of -O3 on 2 cores).
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
# NCCL=0 with CUDA: the link line names no libnccl (it did, so such a binary failed to start
# where NCCL is absent); with NCCL=1 it does. A dry run (make -n) into a scratch build directory.
if [[ -n $nvcc_path ]]; then
  nb="$WORK/nccl-switch"
  links() { make -C "$ROOT" --no-print-directory -n CUDA=1 NCCL="$1" BUILD="$nb" "$nb/bin/trident" 2> /dev/null | grep -c -- '-lnccl'; }
  without=$(links 0) with=$(links 1)
  if [[ $without == 0 && $with == 1 ]]; then pass nccl_0_links_no_nccl
  else fail nccl_0_links_no_nccl "link lines naming -lnccl: $without with NCCL=0, $with with NCCL=1"; fi
fi
# cuDNN's fused attention: where make deps fetched cuDNN's frontend headers, the default CUDA build
# compiles it and links libcudnn (and NVRTC, which the frontend's own engines use); CUDNN=0 names
# neither (a dry run), so that such a binary starts where cuDNN is absent.
if [[ -n $nvcc_path ]]; then
  if [[ ! -f ${CUDNN_FRONTEND:-/var/cache/trident/cudnn-frontend-1.32.0/include}/cudnn_frontend.h ]]; then
    skip default_build_has_cudnn_attention "cuDNN's frontend headers are absent (make deps could not fetch them)"
  elif "$TRIDENT" version | grep -q "^CUDA attention: cuDNN .*'s fused attention" && ldd "$TRIDENT" | grep -q libcudnn; then
    pass default_build_has_cudnn_attention
  else
    fail default_build_has_cudnn_attention "$("$TRIDENT" version | grep 'CUDA attention')"
  fi
  cb="$WORK/cudnn-switch"
  cudnn_links() { make -C "$ROOT" --no-print-directory -n CUDA=1 CUDNN="$1" BUILD="$cb" "$cb/bin/trident" 2> /dev/null | grep -c -- '-lcudnn -lnvrtc'; }
  without=$(cudnn_links 0) with=$(cudnn_links 1)
  if [[ $without == 0 && $with == 1 ]]; then pass cudnn_0_links_no_cudnn
  else fail cudnn_0_links_no_cudnn "link lines naming -lcudnn: $without with CUDNN=0, $with with CUDNN=1"; fi
fi
