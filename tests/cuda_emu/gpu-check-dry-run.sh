#!/usr/bin/env bash
# gpu-check-dry-run.sh — scripts/gpu-check.sh run whole here, before a GPU's few minutes are
# spent on it: that a part which passes is reported PASS with its figures, and a part which fails
# says why (make test-gpu-check-emu; by hand, not in CI: 5 minutes once the emulator is built).
# What stands in for the GPU node:
#   - a bundle made from the emulator's build (scripts/bundle.sh: the same archive and env.sh,
#     which finds the emulator's cuBLASLt and NCCL first on LD_LIBRARY_PATH),
#   - nvidia-smi answered for two emulated GPUs (tests/cuda_emu/bin/nvidia-smi),
#   - the CPU runs of every training pair prepared here (gpu-check.sh prepare, 6 steps).
# Two passes of the check, every part they select passing:
#   cuda   the kernel checks at small sizes, commbench's NCCL rows, NCCL on two GPUs — on the
#          emulator (DEVICE=cuda);
#   guard  the GPT-2 runs (GPT2_OVERRIDES: 12 layers of 64, 128 tokens, a vocabulary of 1024),
#          the training pairs, the restart, generate+eval, bench --ops and plan --calibrate — on
#          the guard backend (the CPU's kernels behind the device interface: the emulator takes
#          minutes a pair at the default deck's size), so each comparison and each figure runs as
#          on the node, on real metrics files, against the prepared CPU runs.
# Then one part made to fail: the default_fp32 pair against the CPU run of llama_fp32 (another
# model on the same data); its verdict must be a FAIL that names the loss difference.
# Last, a part the deadline cuts off must be a SKIP (not reached) that says so.
# Left out (they need a GPU's speed): the GEMM rate, the kernel checks at GPT-2 124M's sizes,
# compute-sanitizer.
#   BUILD=build-cuda-emu   a CUDA_EMU=1 build with tests/gpu_gemm_rate (make test-gpu-check-emu)
# The two passes' summaries are kept in /tmp/trident-gpu-check-emu/ (cuda.txt, guard.txt).
. tests/e2e/lib.sh
BIN="$ROOT/${BUILD:-build-cuda-emu}"
if [[ ! -x $BIN/tests/cuda_emu_selftest || ! -x $BIN/tests/gpu_gemm_rate ]]; then
  fail gpu_check_dry_run "$BIN is not a CUDA_EMU=1 build with gpu_gemm_rate (make test-gpu-check-emu makes one)"
  exit 0
fi
if ! scripts/bundle.sh "$BIN" "$WORK/bundle" > "$WORK/bundle.log" 2>&1; then
  fail gpu_check_bundle "scripts/bundle.sh failed: $(tail -2 "$WORK/bundle.log" | tr '\n' ' ')"
  exit 0
fi
export PATH="$ROOT/tests/cuda_emu/bin:$PATH" LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export BUNDLE=$WORK/bundle REF=$WORK/gpu-ref STEPS=6 THREADS=1 PY=${PY:-/usr/bin/python3} DEADLINE_S=1200
export TRIDENT_UNPACK_DIR=$WORK/unpacked TRIDENT_CUDA_EMU_GPUS=2 TRIDENT_GPU_PEAK_SIZE=64
if scripts/gpu-check.sh prepare > "$WORK/prepare.log" 2>&1; then
  pass "gpu_check_prepare ($(grep -c '^prepared ' "$WORK/prepare.log") CPU runs; $(grep '^carried' "$WORK/prepare.log"))"
else
  fail gpu_check_prepare "$(tail -2 "$WORK/prepare.log" | tr '\n' ' ')"
  exit 0
fi

# dry_run NAME DEVICE ONLY WANT: one pass of the check; PASS when it exits 0 (every selected part
# passed) having reported WANT parts or more. Its summary (every verdict with its figures) is kept
# as KEPT/NAME.txt.
KEPT=/tmp/trident-gpu-check-emu
dry_run() {
  local name=$1 want=$4
  OUT=$WORK/$name DEVICE=$2 ONLY=$3 scripts/gpu-check.sh > "$WORK/$name.log" 2>&1
  local status=$? reported
  reported=$(grep -cE '^(PASS|FAIL|SKIP) ' "$WORK/$name/summary.txt" 2> /dev/null)
  mkdir -p "$KEPT" && cp "$WORK/$name/summary.txt" "$KEPT/$name.txt" 2> /dev/null
  if ((status == 0 && reported >= want)); then
    pass "gpu_check_$name ($reported parts passed, the preflight's included)"
  else
    fail "gpu_check_$name" "exit status $status, $reported of $want parts reported: $(grep -vE '^PASS ' "$WORK/$name/summary.txt" 2> /dev/null |
      head -3 | tr '\n' ' ')$(tail -1 "$WORK/$name.log")"
  fi
}
kernels=$("$BIN/tests/gpu_tests" --list | grep -v _cudnn_ | paste -sd'|')
dry_run cuda cuda "^(kernel ($kernels)|commbench nccl|nccl)\$" $(($(echo "$kernels" | tr '|' '\n' | wc -l) + 3))
GPT2_OVERRIDES='--model.heads=2 --model.hidden=64 --model.seq_len=128 --model.vocab=1024' \
  dry_run guard guard '^(gpt2_124m.*|pair .*|resume .*|generate\+eval .*|bench --ops .*|plan --calibrate)$' 26

# A pair whose two runs differ: the CPU run of llama_fp32 in default_fp32's place.
mkdir -p "$WORK/wrong" && cp -r "$REF/data" "$WORK/wrong/" && mkdir -p "$WORK/wrong/default_fp32" &&
  cp "$REF/llama_fp32/metrics.h5" "$WORK/wrong/default_fp32/"
REF=$WORK/wrong OUT=$WORK/wrong_out DEVICE=guard ONLY='^pair default_fp32$' scripts/gpu-check.sh > "$WORK/wrong.log" 2>&1
status=$?
line=$(grep -m1 'pair default_fp32' "$WORK/wrong_out/summary.txt" 2> /dev/null)
if ((status != 0)) && [[ $line =~ ^FAIL.*largest\ relative\ loss\ difference ]]; then
  pass "gpu_check_pair_differs (${line:0:140})"
else
  fail gpu_check_pair_differs "exit status $status, the pair's verdict: ${line:-none}"
fi

# A part the deadline cuts off: the default_fp32 pair on the emulator (minutes) under a deadline of
# 30 s. Its verdict: a SKIP, not reached — no verdict on the code — that says it ran past its time.
DEADLINE_S=30 OUT=$WORK/cut_out DEVICE=cuda ONLY='^pair default_fp32$' scripts/gpu-check.sh > "$WORK/cut.log" 2>&1
status=$?
line=$(grep -m1 'pair default_fp32' "$WORK/cut_out/summary.txt" 2> /dev/null)
if ((status != 0)) && [[ $line =~ ^SKIP.*not\ finished.*ran\ past\ its\ time\ limit ]] &&
    grep -q '1 not reached' "$WORK/cut.log"; then
  pass "gpu_check_deadline_cut (${line:0:140})"
else
  fail gpu_check_deadline_cut "exit status $status, the pair's verdict: ${line:-none}"
fi
