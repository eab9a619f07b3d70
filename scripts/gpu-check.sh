#!/usr/bin/env bash
# gpu-check.sh — the one prepared check for a GPU node, made for one short run (issue 30): the
# node has a driver, the CUDA toolkit and python3 with h5py, and nothing of our build; what it
# runs comes prepared from here.
#   scripts/gpu-check.sh prepare   here: make bundle (bundle/) and the CPU side of every training
#                                  pair and the data into gpu-ref/ (both ignored; carry both);
#                                  BUNDLE=DIR: that bundle, as it is (not made again)
#   scripts/gpu-check.sh           on the GPU node, from the repository root
# Parts, in order of value, each under its own timeout and all under one deadline (DEADLINE_S,
# default 480 s: no part can eat the rest): preflight (names everything missing, then stops),
# each CUDA kernel against the CPU backend at small sizes (all in one process, then a process
# each for what did not pass), the cuBLASLt GEMM rate, GPT-2 124M bf16 with cuda.graphs off and
# on (every GPT-2 run's verdict — it trained: finite losses, none skipped, falling — with the
# planner's step time and MFU for it on this GPU's profile), one-rank CPU-vs-CUDA training pairs
# (losses, the first gradient norm, validation), the pairs of several ranks on one GPU over MPI,
# a restart from a checkpoint on the GPU (bit for bit against the uninterrupted run),
# trident generate and eval on the GPU against the CPU backend (the greedy text, the loss),
# the kernels at GPT-2 124M's sizes, GPT-2 124M with the
# materialized attention and whole logits, with the flash attention's products in f32
# (cuda.attention_products) and without the GELU epilogues (cuda.gelu_epilogues), its per-
# operation table (bench --ops), our attention kernels against cuDNN's (cuda.attention_kernel),
# the profile this GPU gives the planner (plan --calibrate), commbench's NCCL rows on one rank,
# the kernel checks again under compute-sanitizer's memcheck (the
# tensor-core attention's also under racecheck and synccheck) where it runs, NCCL last ("not exercised: one GPU" where there is one). After every part its
# verdict and figures are appended to OUT/summary.txt (OUT default ./gpu-out) and printed; the
# same table ends the run even when parts failed; the logs, with nvidia-smi's clocks and power
# every second, are packed into OUT/logs.tar.gz. No PASS without its figure; every training pair
# names its largest loss difference. A part the deadline leaves no time for, or cuts off, is a
# SKIP "not reached" (no verdict on the code), counted apart from the failures in the summary's
# first line. Exit status 0 only when every part passed.
#   ONLY='REGEX' scripts/gpu-check.sh   a rerun of the parts whose names match (e.g. after a fix,
#                                  ONLY='pair|kernel attention'); preflight always runs
#   NO_GPU_OK=1 PY=/usr/bin/python3 scripts/gpu-check.sh   tried here without a GPU: every GPU part
#                                  fails fast, the table is still written (under a minute)
#   scripts/gpu-check.sh data      gpu-ref/data alone (the prepared tokens; REF= elsewhere)
#   CHECK=1 DEVICE=guard NO_GPU_OK=1 scripts/gpu-check.sh   every training run's command only
#                                  checked (trident train --check: the deck, the overrides, the
#                                  data, the memory) on DEVICE, with no GPU: an argument the node
#                                  would refuse at start-up is refused here (make test-bundle)
#   make test-gpu-check-emu        this script run whole on the CUDA emulator, its verdicts tried
#                                  (tests/cuda_emu/gpu-check-dry-run.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
BUNDLE=${BUNDLE:-$REPO/bundle}
REF=${REF:-$REPO/gpu-ref}
STEPS=${STEPS:-20}
DEADLINE_S=${DEADLINE_S:-480}
OUT=${OUT:-$REPO/gpu-out}
PY=${PY:-python3}  # with h5py and numpy (the GPU node's python3 has them; here /usr/bin/python3)
DEVICE=${DEVICE:-cuda}  # the runs' kernels.device (CHECK=1: guard where there is no GPU)
CHECK=${CHECK:-0}  # 1: the training runs alone (what trident train --check can try), checked
# Overrides added to every GPT-2 124M command (train, bench --ops, plan): none on a GPU; the dry
# run on the emulator makes the model small (tests/cuda_emu/gpu-check-dry-run.sh).
GPT2_OVERRIDES=${GPT2_OVERRIDES:-}
CORPUS=(Apache-2.0 Artistic BSD CC0-1.0 GFDL-1.2 GFDL-1.3 GPL-1 GPL-2 GPL-3 LGPL-2 LGPL-2.1 LGPL-3 MPL-1.1 MPL-2.0)

# The training pairs: NAME|RANKS|TOLERANCE|DECK|OVERRIDES OF BOTH|OVERRIDES OF THE CUDA RUN ALONE.
# Several ranks share the one GPU through MPI (comm.backend = mpi: NCCL refuses two ranks on one
# device; the runs stage through host memory, comm/wrappers/staged.hpp). data2 leaves comm.backend
# at auto: the ranks sharing the GPU take MPI by themselves (job/job.cpp choose_comm_backend).
DATA="--data.train=$REF/data/train.bin --data.val=$REF/data/val.bin"
PAIRS=(
  "default_fp32|1|1e-4|inputs/default.deck||"
  "default_bf16|1|2e-2|inputs/default.deck|--optim.precision=bf16|"
  "default_fp32_graphs|1|1e-4|inputs/default.deck||--cuda.graphs=true"
  "bench_s_fp32|1|1e-4|inputs/bench-s.deck|--data.format=llmc --train.eval_tokens=4096|"
  "tensor2|2|1e-4|inputs/default.deck|--parallel.tensor=2 --comm.backend=mpi|"
  "pipeline2|2|1e-4|inputs/default.deck|--parallel.pipeline=2 --train.micro_batch=2 --comm.backend=mpi|"
  "data2|2|1e-4|inputs/default.deck|--parallel.data=2|"
  "data2_no_overlap|2|1e-4|inputs/default.deck|--parallel.data=2 --comm.backend=mpi --comm.overlap=false|"
  "data2_zero3|2|1e-4|inputs/default.deck|--parallel.data=2 --comm.backend=mpi --optim.zero=3|"
  "data2_zero3_bf16_recompute|2|2e-2|inputs/default.deck|--parallel.data=2 --comm.backend=mpi --optim.zero=3 --optim.precision=bf16 --memory.recompute=full|"
  "pipeline2_bf16_graphs|2|2e-2|inputs/default.deck|--parallel.pipeline=2 --train.micro_batch=2 --comm.backend=mpi --optim.precision=bf16|--cuda.graphs=true"
  "llama_fp32|1|1e-4|inputs/default.deck|--model.arch=llama --model.kv_heads=2 --model.rope_scaling=llama3 --model.rope_original_context=32|"
  "llama_tensor4_bf16|4|2e-2|inputs/default.deck|--model.arch=llama --model.kv_heads=2 --parallel.tensor=4 --comm.backend=mpi --optim.precision=bf16|"
  "context2_bf16|2|2e-2|inputs/default.deck|--parallel.context=2 --comm.backend=mpi --optim.precision=bf16|"
  "tensor2_sp_overlap_bf16|2|2e-2|inputs/default.deck|--parallel.tensor=2 --parallel.sequence_parallel=true --parallel.tp_comm_overlap=true --comm.backend=mpi --optim.precision=bf16|"
)
pair_field() { echo "$1" | cut -d'|' -f"$2"; }
train_args() { echo "--train.steps=$STEPS --train.eval_interval=0 --checkpoint.at_end=false $DATA $(pair_field "$1" 5)"; }

use_bundle() {
  export TRIDENT_UNPACK_DIR=${TRIDENT_UNPACK_DIR:-/tmp/trident-bundle}  # not into the carried folder
  . "$BUNDLE/env.sh" 2>> "$LOGS/env.log" || return 1
  . scripts/mpi-env.sh
  export OMP_NUM_THREADS=${THREADS:-4}
}

# The runs' tokens: the licenses Debian ships, a 1024-token BPE (7,629 validation tokens).
prepare_data() {
  rm -rf "$REF/data" && mkdir -p "$REF/data"
  trident prepare "$LOGS/data" "${CORPUS[@]/#//usr/share/common-licenses/}" --tokenizer=bpe --vocab=1024 > /dev/null &&
    cp "$LOGS"/data/* "$REF/data/"  # the tokens and the tokenizer that made them (trident generate's)
}

# ---- prepare (here) --------------------------------------------------------------------------
if [[ ${1:-} == data ]]; then
  LOGS=$(mktemp -d /tmp/gpu-prepare.XXXXXX)
  use_bundle || { echo "the bundle's env.sh failed: $(cat "$LOGS/env.log")"; exit 1; }
  prepare_data
  exit
fi
if [[ ${1:-} == prepare ]]; then
  # The bundle made here (make bundle writes bundle/), or the one BUNDLE names, as it was made
  # (tests/cuda_emu/gpu-check-dry-run.sh: the emulator's).
  if [[ $BUNDLE == "$REPO/bundle" ]]; then make bundle || exit 1; fi
  LOGS=$(mktemp -d /tmp/gpu-prepare.XXXXXX)
  use_bundle || { echo "the bundle's env.sh failed: $(cat "$LOGS/env.log")"; exit 1; }
  prepare_data || exit 1
  for pair in "${PAIRS[@]}"; do
    name=$(pair_field "$pair" 1)
    # shellcheck disable=SC2046
    if mpirun -np "$(pair_field "$pair" 2)" trident train "$(pair_field "$pair" 4)" $(train_args "$pair") \
        --train.run_dir="$LOGS/$name" > "$LOGS/$name.log" 2>&1; then
      # Repacked contiguous: each of its ~140 datasets otherwise keeps an 8 KB chunk for 20 rows
      # (1.5 MB a file, 12 MB in all, against the 64 MiB a device call carries; 0.1 MB so).
      mkdir -p "$REF/$name" && h5repack -l CONTI "$LOGS/$name/metrics.h5" "$REF/$name/metrics.h5" &&
        echo "prepared $name (CPU, $STEPS steps)"
    else
      echo "the CPU run $name failed: $(grep -m1 error "$LOGS/$name.log")"; exit 1
    fi
  done
  # What a device call carries: the tracked tree and the two folders, at most 64 MiB.
  tree=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
  read -r bundle_bytes _ < <(du -sb "$BUNDLE")
  read -r ref_bytes _ < <(du -sb "$REF")
  carried=$((tree + bundle_bytes + ref_bytes))
  echo "carried: $((carried / 1048576)) MiB of 64 (bundle $((bundle_bytes >> 20)) MiB, gpu-ref $((ref_bytes >> 20)) MiB, the tracked tree $((tree >> 20)) MiB)"
  ((carried < 64 * 1048576)) || { echo "over the device call's 64 MiB: carry less"; exit 1; }
  exit 0
fi

# ---- the check (on the GPU node) --------------------------------------------------------------
mkdir -p "$OUT"
LOGS=$(mktemp -d /tmp/gpu-check.XXXXXX)
SUMMARY="$OUT/summary.txt"
START=$SECONDS
failures=0 unreached=0 deadline_cut=0
: > "$SUMMARY"
left() { echo $((DEADLINE_S - (SECONDS - START))); }
# within BUDGET COMMAND...: the command under the smaller of its budget and what the deadline leaves.
# A command the deadline stopped (it ran under less than its own budget and timed out), or never
# let start, sets deadline_cut: its part was not reached, which is no verdict on the code.
within() {
  local budget=$1 rest clamped=0 status
  shift
  rest=$(left)
  ((rest <= budget)) && budget=$rest clamped=1
  ((budget < 1)) && { deadline_cut=1; return 124; }
  timeout -k 5 "$budget" "$@"
  status=$?
  ((clamped && (status == 124 || status == 137))) && deadline_cut=1
  return $status
}
# verdict PASS|FAIL|SKIP PART FIGURES: appended to the summary and printed; PASS needs figures.
# A FAIL whose command the deadline cut off is a SKIP, counted as not reached.
verdict() {
  local status=$1 part=$2 figures=${3:-}
  if [[ $status == PASS && -z $figures ]]; then status=FAIL figures="no figure was measured"; fi
  if [[ $status == FAIL ]] && ((deadline_cut)); then
    deadline_cut=0
    not_reached "$part" "not finished: the deadline (DEADLINE_S=$DEADLINE_S) cut it off; $figures"
    return
  fi
  deadline_cut=0
  [[ $status == FAIL ]] && failures=$((failures + 1))
  printf '%-4s %-28s %s\n' "$status" "$part" "$figures" | tee -a "$SUMMARY"
}
# not_reached PART FIGURES: a SKIP that is no verdict on the code (the time ran out), counted apart.
not_reached() {
  unreached=$((unreached + 1))
  verdict SKIP "$1" "$2"
}
# wanted PART: whether ONLY (a regular expression over part names; empty: every part) selects it,
# counting the parts it selects.
selected=0
selects() {
  ((CHECK)) && [[ ! $1 =~ ^(pair|gpt2_124m|resume) ]] && return 1
  [[ -z ${ONLY:-} || $1 =~ $ONLY ]]
}
wanted() {
  selects "$1" || return 1
  selected=$((selected + 1))
  if (($(left) < 5)); then
    not_reached "$1" "not reached: the deadline (DEADLINE_S=$DEADLINE_S) was spent"
    return 1
  fi
}
# The model files every finished run writes (model.bin, model/: up to 500 MB at GPT-2 124M) are
# not logs: removed, so that logs.tar.gz stays small enough to come back.
drop_model() { rm -rf "$LOGS/$1/model.bin" "$LOGS/$1/model"; }
# failed_run STATUS LOG: why a run failed, for its verdict. Stopped at its part's time limit
# (timeout's 124, or 137 after the kill): said so, with its last line (a line such as "fp32 GEMM:
# on the device" is no error). Otherwise its first error line — past the warning every CUDA run
# prints (TRIDENT_TRY_CUDA_TRAINER) — or a crash's, or its last line where it has neither. By the
# output, not grep's status: under pipefail, grep -m1 stopping early can end the first grep by
# SIGPIPE whatever was found.
failed_run() {
  local found last
  # The last line the run wrote: not a blank one, nor bash's notice of the timeout it killed.
  last=$(grep -vE '^\s*$|^[^ ]+: line [0-9]+: +[0-9]+ (Killed|Terminated)' "$2" 2> /dev/null | tail -1 | cut -c1-200)
  if [[ $1 == 124 || $1 == 137 ]]; then
    echo "ran past its time limit (exit status $1); its last line: ${last:-none, it wrote nothing}"
    return
  fi
  found=$(grep -v TRIDENT_TRY_CUDA_TRAINER "$2" 2> /dev/null |
          grep -m1 -E 'rror|what\(\)|terminate called|Segmentation|Abort|on signal [0-9]')
  echo "exit status $1: ${found:-${last:-it wrote nothing}}"
}
# CHECK=1: the runs with --check, and their verdict from its exit status and last line.
CHECKED=$( ((CHECK)) && echo --check)
checked() {  # checked PART STATUS LOG [FIGURES]
  [[ $2 == 0 ]] && verdict PASS "$1" "checked: $(tail -1 "$3" | cut -c1-100)${4:+; $4}" ||
    verdict FAIL "$1" "$(failed_run "$2" "$3")"
}
finish() {
  [[ -n ${SMI_PID:-} ]] && kill "$SMI_PID" 2> /dev/null
  echo "== summary ($((SECONDS - START)) s of $DEADLINE_S; $failures part(s) failed, $unreached not reached)"
  cat "$SUMMARY"
  timeout 20 tar -C "$LOGS" --exclude=model.bin --exclude=model -czf "$OUT/logs.tar.gz" . 2> /dev/null
  echo "summary: $SUMMARY; logs: $OUT/logs.tar.gz"
}
trap finish EXIT
if [[ -n ${ONLY:-} ]]; then
  [[ x =~ $ONLY ]]
  (($? == 2)) && { verdict FAIL selection "ONLY='$ONLY' is not a regular expression"; exit 2; }
fi

# 0. Preflight: everything missing named at once, within 10 s.
missing=()
gpus=$(timeout 20 nvidia-smi -L 2> /dev/null | grep -c '^GPU')
((gpus > 0)) || [[ ${NO_GPU_OK:-0} == 1 ]] || missing+=("a GPU visible to nvidia-smi")
[[ -f $BUNDLE/env.sh && -f $BUNDLE/root.tar.gz ]] || missing+=("the bundle ($BUNDLE: scripts/gpu-check.sh prepare, then carry bundle)")
[[ -f $REF/data/train.bin ]] || missing+=("the CPU reference runs ($REF: scripts/gpu-check.sh prepare, then carry gpu-ref)")
if ((!CHECK)) && [[ -f $REF/data/train.bin ]]; then
  for pair in "${PAIRS[@]}"; do
    name=$(pair_field "$pair" 1)
    selects "pair $name" && [[ ! -f $REF/$name/metrics.h5 ]] && missing+=("$REF/$name/metrics.h5 (scripts/gpu-check.sh prepare)")
  done
fi
for tool in timeout tar "$PY"; do command -v "$tool" > /dev/null || missing+=("$tool"); done
"$PY" -c 'import h5py, numpy' 2> /dev/null || missing+=("$PY with h5py and numpy (PY=...)")
if [[ -f $BUNDLE/env.sh ]]; then
  if ! within 60 env TRIDENT_UNPACK_DIR=/tmp/trident-bundle bash -c ". '$BUNDLE/env.sh' && trident version" \
      > "$LOGS/version.log" 2>&1; then
    missing+=("a trident that starts from the bundle: $(grep -vE '^\s*$' "$LOGS/version.log" | tail -2 | tr '\n' ' ')")
  fi
  grep -q 'libcublasLt.so.13 from' "$LOGS/version.log" || missing+=("libcublasLt.so.13 (CUDA 13's cuBLASLt) on this node")
  # trident opens cuBLASLt on first use: `trident version` opens it and says from where, or why not.
  grep -qE 'cuBLASLt [0-9]+ \(' "$LOGS/version.log" ||
    missing+=("cuBLASLt that trident can open: $(grep -o 'cuBLASLt not loadable.*' "$LOGS/version.log" | head -1)")
  # A CUDA run's comm.backend = auto is NCCL on a build with NCCL, one rank too; where NCCL cannot
  # be opened, auto takes MPI (job/job.cpp choose_comm_backend), and only commbench's NCCL rows
  # need it. Said in the preflight's line, not a stop.
  grep -qE 'NCCL [0-9.]+ \(' "$LOGS/version.log" ||
    nccl_note="; NCCL not loadable, so the CUDA runs take MPI (comm.backend = auto) and commbench nccl is skipped: $(grep -o 'NCCL not loadable.*' "$LOGS/version.log" | head -1)"
  # The bundle's kernels against the node's GPU (machine code, PTX compiled at the first launch,
  # or none: then every CUDA part would stop at its deck check, and make CUDA_ARCHS is the fix).
  if grep -q 'no kernel of this binary runs on it' "$LOGS/version.log"; then
    missing+=("a GPU the bundle's kernels run on ($(grep -o '^CUDA kernels: .*' "$LOGS/version.log"); $(grep -o '^CUDA devices: .*' "$LOGS/version.log"))")
  fi
fi
if ((${#missing[@]})); then
  for m in "${missing[@]}"; do verdict FAIL preflight "missing: $m"; done
  exit 1
fi
verdict PASS preflight "$( ((gpus > 0)) && timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1 || echo 'no GPU (NO_GPU_OK=1)'); $(grep -c 'from' "$LOGS/version.log") CUDA libraries found ($(grep -o 'from .*' "$LOGS/version.log" | sort -u | tr '\n' ' '))${nccl_note:-}"
NODE_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
use_bundle
# python3 and h5py with the node's own libraries, not the bundle's Debian ones (libstdc++, libz,
# libssl, ...), which use_bundle puts first.
py() { LD_LIBRARY_PATH=$NODE_LIBRARY_PATH "$PY" "$@"; }
export TRIDENT_TRY_CUDA_TRAINER=1
((gpus > 0)) && { nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
                    --format=csv -l 1 > "$LOGS/nvidia-smi.csv" 2>&1 & SMI_PID=$!; }

# 1. Each kernel against the CPU backend: every check in one process first (each process pays the
# CUDA context's and cuBLASLt's start), then, a process each, every check that did not pass there:
# a sticky CUDA error (an illegal address ends the context) fails every later check of its process,
# so only a check's own process gives its verdict.
# kernel_check BUDGET NAME [--gpt2]: one check in a process of its own, its line as the verdict
# (named NAME_124m at GPT-2 124M sizes: gpu_tests --gpt2).
kernel_check() {
  local budget=$1 check=$2 size=${3:-} name=$2
  [[ -n $size ]] && name=${check}_124m
  within "$budget" gpu_tests $size "$check" > "$LOGS/kernel-$name.log" 2>&1
  local status=$? line
  line=$(grep -m1 -E '^(PASS|FAIL|SKIP) ' "$LOGS/kernel-$name.log")
  case $status:$line in
    0:PASS*) verdict PASS "kernel $name" "${line#PASS cuda_$name }" ;;
    *:SKIP*) verdict FAIL "kernel $name" "not run: ${line#SKIP cuda_$name }" ;;
    *:?*) verdict FAIL "kernel $name" "exit status $status: $line" ;;
    *) verdict FAIL "kernel $name" "$(failed_run "$status" "$LOGS/kernel-$name.log")" ;;
  esac
}
# kernel_checks BUDGET [--gpt2] NAME...: the selected ones in one process, then kernel_check for
# each that did not pass in it. A PASS line stands whatever the process's exit status (gpu_tests
# prints it only after the check's stream synchronized cleanly; the status is 1 when any check
# failed); the reruns share what is left of the group's budget, at most 60 s each.
kernel_checks() {
  local budget=$1 size="" suffix="" check name chosen=() line rest
  shift
  [[ ${1:-} == --gpt2 ]] && { size=--gpt2 suffix=_124m; shift; }
  for check in "$@"; do wanted "kernel $check$suffix" && chosen+=("$check"); done
  ((${#chosen[@]})) || return 0
  rest=$(left)
  ((rest < budget)) && budget=$rest
  local group_end=$((SECONDS + budget)) log="$LOGS/kernels$suffix-$1.log"
  within "$budget" gpu_tests $size "${chosen[@]}" > "$log" 2>&1
  local status=$? hung=0
  # Stopped at the group's own budget (not the deadline's): inside the first check without a line,
  # which hung or ran too long — a verdict on that check; the ones after it were not reached.
  ((!deadline_cut && (status == 124 || status == 137))) && hung=1
  deadline_cut=0  # each check's own verdict below
  for check in "${chosen[@]}"; do
    name=$check$suffix
    line=$(grep -m1 -E "^(PASS|FAIL|SKIP) cuda_$name " "$log")
    rest=$((group_end - SECONDS))
    ((rest > 60)) && rest=60
    if [[ $line == PASS* ]]; then verdict PASS "kernel $name" "${line#PASS cuda_$name }"
    elif [[ -z $line ]] && ((hung)); then
      verdict FAIL "kernel $name" "the group's process was stopped at its $budget s inside this check (it hung, or ran too long)"
      hung=0
    elif ((rest >= 15)); then kernel_check "$rest" "$check" $size  # a process's start alone takes seconds
    elif [[ -n $line ]]; then verdict FAIL "kernel $name" "not rerun alone (under 15 s left of the group's $budget s): $line"
    else not_reached "kernel $name" "not reached: the group's $budget s were spent before it ran (exit status $status)"
    fi
  done
}
if ! kernel_list=$(within 20 gpu_tests --list 2> "$LOGS/list.log") || [[ -z $kernel_list ]]; then
  verdict FAIL kernels "gpu_tests --list failed: $(tail -1 "$LOGS/list.log")"
  kernel_list=""
fi
# cuDNN's attention checks in a group of their own, after the rest: each size builds cuDNN's
# graphs (NVRTC compiles some of its kernels), seconds a size, which would leave the cheap checks
# after them unrun where the group's time ran out.
# shellcheck disable=SC2086
kernel_checks 120 $(echo "$kernel_list" | grep -v _cudnn_)
# shellcheck disable=SC2086
kernel_checks 90 $(echo "$kernel_list" | grep _cudnn_)
# 2. The cuBLASLt GEMM rate.
if wanted "gemm bf16 8192^3"; then
  within 90 gpu_gemm_rate > "$LOGS/gemm.log" 2>&1
  status=$?
  gemm=$(grep -m1 'gemm bf16 .*square' "$LOGS/gemm.log" | grep -oE '[0-9.]+ TFLOP/s')
  [[ -n $gemm ]] && verdict PASS "gemm bf16 8192^3" "$gemm" || verdict FAIL "gemm bf16 8192^3" "$(failed_run "$status" "$LOGS/gemm.log")"
  # The rates as a profile's [gemm] section: append it to inputs/hardware/<this GPU>.ini and the
  # planner times each product from the nearest measured shape (docs/PLANNER.md).
  { echo "[gemm]  # measured by scripts/gpu-check.sh (gpu_gemm_rate) on $(grep -m1 '^device:' "$LOGS/gemm.log" | cut -d' ' -f2-)"
    grep '^profile ' "$LOGS/gemm.log" | cut -d' ' -f2-; } > "$LOGS/gemm-table.ini"
  cp "$LOGS/gemm-table.ini" "$OUT/gemm-table.ini"
fi

# 3. GPT-2 124M (seq 1024) bf16, 30 steps of 16 sequences, the median of the last 15.
# The planner's figures for the same run on this GPU's profile, beside each measurement: the
# first GPU run is the planner's first check against a GPU of ours (docs/PLANNER.md).
# The GPU's dense bf16 peak by its data sheet, which the MFU figures divide by: an SXM H100 or an
# H200 989 TFLOP/s, a PCIe H100 756, an H100 NVL 835, a B200 2250, a GB200 2500 (nvidia-smi's name tells them apart).
PROFILE=h100-80gb-dgx PEAK_BF16=989 GPU_NAME="an H100/H200"
if ((gpus > 0)); then
  GPU_NAME=$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  case $GPU_NAME in
    *H200*) PROFILE=h200 ;;
    *GB200*) PROFILE=gb200-nvl72 PEAK_BF16=2500 ;;
    *B200*) PROFILE=b200-dgx PEAK_BF16=2250 ;;
    *H100*PCIe*) PEAK_BF16=756 ;;
    *H100*NVL*) PEAK_BF16=835 ;;
  esac
fi
export PEAK_BF16 GPU_NAME
planned() {  # planned NAME OVERRIDES...: "planned S ms a step, MFU M% (PROFILE)", or why not
  local name=$1
  shift
  within 30 trident plan inputs/bench-124m.deck --gpus=1 --hardware="$PROFILE" --optim.precision=bf16 \
    --train.global_batch=16 --train.micro_batch=16 --top=1 --json $GPT2_OVERRIDES "$@" > "$LOGS/plan-$name.json" 2> "$LOGS/plan-$name.log"
  py - "$LOGS/plan-$name.json" "$PROFILE" 2> /dev/null <<'PY' || echo "no plan: $(tail -1 "$LOGS/plan-$name.log")"
import json, sys
with open(sys.argv[1]) as f:
    d = json.loads(f.readline())  # the first line: the deck's own layout, where it has no problem
if d.get("source") != "deck": sys.exit(print(f"no plan of this layout (the planner's first row is its {d.get('source')}'s)"))
print(f"planned {1e3 * d['step_time_s']:.1f} ms a step, MFU {100 * d['mfu']:.1f}% ({sys.argv[2]})")
PY
}
gpt2_124m() {  # gpt2_124m NAME OVERRIDES...
  local name=$1 plan
  shift
  wanted "$name" || return 0
  # The first-light warp kernels' f32 products are a diagnostic the planner does not model.
  if [[ "$*" == *attention_products=f32* ]]; then plan="not planned (the planner models no f32 attention products)"
  else plan=$(planned "$name" "$@"); fi
  # eval_tokens: gpu-ref's validation split holds 7 sequences of 1024 (the deck's default asks 64).
  within 150 trident train inputs/bench-124m.deck --kernels.device="$DEVICE" --optim.precision=bf16 --train.steps=30 \
    --train.global_batch=16 --train.micro_batch=16 --train.eval_interval=0 --train.eval_tokens=4096 \
    --checkpoint.at_end=false $DATA --data.format=llmc --train.run_dir="$LOGS/$name" $GPT2_OVERRIDES "$@" $CHECKED > "$LOGS/$name.log" 2>&1
  local status=$? figures
  drop_model "$name"
  if ((CHECK)); then checked "$name" "$status" "$LOGS/$name.log" "$plan"; return; fi
  figures=$( ((status == 0)) && py - "$LOGS/$name/metrics.h5" 2> /dev/null <<'PY'
import os, sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
if len(f["step"]) != 30: sys.exit(1)  # a run cut short has no median of its last 15 steps
# A run that trained: every loss finite, none skipped, the loss lower at the end than at the start.
loss = f["loss"][:]
if not np.all(np.isfinite(loss)) or int(np.sum(f["skipped"][:])) or not loss[-5:].mean() < loss[:5].mean():
    sys.exit(print(f"losses {loss[0]:.4f} .. {loss[-1]:.4f}, {int(np.sum(f['skipped'][:]))} skipped") or 1)
half = len(f["step"]) // 2
tflops = np.median(f['tflops'][half:])  # model FLOPs (6N + 12·L·C·T a token), as issue 32's MFU
tokens = np.median(f['tokens_per_s'][half:])
step_ms = np.median(f['step_ms'][half:])  # measured, not derived from a sequence length
# The memory beside the speed: the tracked buffers' peak (what the memory model counts) and the
# kernels' stream-ordered scratch (cuDNN's workspace and the like, which it does not).
tracked = max(np.sum([f["memory"][k][:] for k in f["memory"] if k.endswith("_peak_bytes")], axis=0))
scratch = max(f["memory/stream_scratch_peak"][:])
peak, gpu = float(os.environ.get("PEAK_BF16", 989)), os.environ.get("GPU_NAME", "an H100/H200")
print(f"{tokens:.0f} tokens/s ({step_ms:.1f} ms a step), {tflops:.1f} TFLOP/s, MFU {100 * tflops / peak:.1f}% of {gpu}'s {peak:.0f} dense bf16; "
      f"memory: tracked peak {tracked / 2**30:.2f} GiB, stream-ordered scratch {scratch / 2**20:.0f} MiB")
PY
)
  # Which kernels ran the flash attention (kernels::cuda says so once a size on stderr).
  local attention
  attention=$(grep -m1 -oE 'the flash attention \(B [0-9]+, T [0-9]+[^)]*\) runs on [^:(]*' "$LOGS/$name.log" | sed 's/.* runs on //')
  [[ -n $figures && -n $attention ]] && figures="$figures; attention on $attention"
  [[ -n $figures ]] && figures="$figures; $plan"
  if [[ -n $figures && $figures != losses* ]]; then verdict PASS "$name" "$figures"
  elif [[ -n $figures ]]; then verdict FAIL "$name" "did not train: $figures"
  else verdict FAIL "$name" "$(failed_run "$status" "$LOGS/$name.log")"; fi
}
gpt2_124m gpt2_124m_bf16
gpt2_124m gpt2_124m_bf16_graphs --cuda.graphs=true

# 4, 5. The training pairs, one rank first, then several sharing the GPU over MPI: the CUDA run
# against the CPU run prepared here.
for ranks in $(for pair in "${PAIRS[@]}"; do pair_field "$pair" 2; done | sort -nu); do  # every pair's count
  for pair in "${PAIRS[@]}"; do
    [[ $(pair_field "$pair" 2) == "$ranks" ]] || continue
    name=$(pair_field "$pair" 1)
    wanted "pair $name" || continue
    # shellcheck disable=SC2046
    within 90 mpirun -np "$ranks" < /dev/null trident train "$(pair_field "$pair" 4)" $(train_args "$pair") --kernels.device="$DEVICE" \
      $(pair_field "$pair" 6) --train.run_dir="$LOGS/$name" $CHECKED > "$LOGS/$name.log" 2>&1
    status=$?
    drop_model "$name"
    if ((CHECK)); then checked "pair $name" "$status" "$LOGS/$name.log"; continue; fi
    figures=$(py - "$REF/$name/metrics.h5" "$LOGS/$name/metrics.h5" "$(pair_field "$pair" 3)" "$STEPS" 2>&1 <<'PY'
import math, sys, h5py
cpu, gpu, tol, want = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), float(sys.argv[3]), int(sys.argv[4])
def by_step(f, steps, values):
    return dict(zip(f[steps][:], f[values][:]))
def largest(steps_key, key, first_only=False):  # ((relative difference, step), steps): NaN or Inf is infinite
    a, b = by_step(cpu, steps_key, key), by_step(gpu, steps_key, key)
    both = sorted(set(a) & set(b))[:1 if first_only else None]
    errors = [(abs(a[s] - b[s]) / max(abs(a[s]), 1e-30) if math.isfinite(a[s]) and math.isfinite(b[s]) else math.inf, s)
              for s in both]
    return max(errors) if errors else (0.0, None), len(both)
(loss, at), steps = largest("step", "loss")
if steps < want: sys.exit(print(f"only {steps} of {want} steps") or 1)
skipped = int(sum(gpu["skipped"][:]))
# The first step's gradient norm before clipping (a gradient off by a constant factor leaves the
# clipped, Adam-normalized losses alike; later norms follow the trajectories' small differences
# tens of times magnified) at 10 times the losses' tolerance; the validation losses (step 0 and
# the last) at theirs.
(norm, norm_at), _ = largest("step", "grad_norm", first_only=True)
(val, val_at), vals = largest("val_step", "val_loss")
print(f"{steps} steps, largest relative loss difference {loss:.1e} at step {at} (tolerance {tol:g}); "
      f"gradient norm {norm:.1e} at step {norm_at} ({10 * tol:g}); validation {val:.1e} over {vals} "
      f"({tol:g}); {skipped} skipped step(s)")
sys.exit(0 if loss <= tol and norm <= 10 * tol and val <= tol and vals > 0 and skipped == 0 else 1)
PY
)
    compared=$?
    echo "$figures" > "$LOGS/$name.compared.txt"
    if [[ $status == 0 && $compared == 0 ]]; then verdict PASS "pair $name" "$figures"
    elif [[ $status == 0 ]]; then verdict FAIL "pair $name" "$(echo "$figures" | tail -1)"
    else verdict FAIL "pair $name" "$(failed_run "$status" "$LOGS/$name.log")"; fi
  done
done

# 5b. A restart on the GPU: the default deck's run on CUDA with a full checkpoint half-way, then
# resumed from it on CUDA to the end; the resumed steps' losses and gradient norms against the
# uninterrupted run's, bit for bit (the device's state — parameters, moments, the step, the data's
# place — written out of device memory and read back into it). The checkpoints are removed after.
default_run() {  # default_run NAME OVERRIDES...: the default deck as the first pair runs it, on DEVICE
  local name=$1
  shift
  # shellcheck disable=SC2046
  within 60 trident train inputs/default.deck $(train_args "${PAIRS[0]}") --kernels.device="$DEVICE" \
    --train.run_dir="$LOGS/$name" "$@" > "$LOGS/$name.log" 2>&1
}
if wanted "resume default_fp32"; then
  half=$((STEPS / 2))
  default_run resume_whole --checkpoint.full_interval="${half}steps" $CHECKED
  status=$?
  if ((CHECK)); then  # the first run's command alone: a --check run writes no checkpoint to resume
    checked "resume default_fp32" "$status" "$LOGS/resume_whole.log"
  else
    if ((status == 0)); then
      default_run resume_rest --checkpoint.resume="$LOGS/resume_whole/checkpoints/$(printf 'step-%08d.full.h5' "$half")"
      status=$?
    fi
    figures=$( ((status == 0)) && py - "$LOGS/resume_whole/metrics.h5" "$LOGS/resume_rest/metrics.h5" "$half" "$STEPS" 2>&1 <<'PY'
import sys, h5py
whole, rest, half, steps = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), int(sys.argv[3]), int(sys.argv[4])
def after(f, key):
    return {int(s): v for s, v in zip(f["step"][:], f[key][:]) if s > half}
differ = []
for key in ("loss", "grad_norm"):
    uninterrupted = after(whole, key)
    differ += [(key, s) for s, v in after(rest, key).items() if uninterrupted.get(s) != v]
resumed = len(after(rest, "loss"))
print(f"{resumed} resumed steps ({half + 1}..{steps}) against the uninterrupted run: "
      + (f"{len(differ)} figure(s) differ, the first {differ[0]}" if differ else "losses and gradient norms equal bit for bit"))
sys.exit(0 if resumed == steps - half and not differ else 1)
PY
)
    compared=$?
    if ((status == 0 && compared == 0)); then verdict PASS "resume default_fp32" "$figures"
    elif ((status == 0)); then verdict FAIL "resume default_fp32" "$(echo "$figures" | tail -1)"
    else
      log=$LOGS/resume_rest.log
      [[ -s $log ]] || log=$LOGS/resume_whole.log  # the first run failed: the second never started
      verdict FAIL "resume default_fp32" "$(failed_run "$status" "$log")"
    fi
  fi
  rm -rf "$LOGS/resume_whole/checkpoints" "$LOGS/resume_rest/checkpoints"
  drop_model resume_whole
  drop_model resume_rest
fi

# 5c. The commands beside training that run a model on the device: generate (its key/value cache
# and the decode attention on the GPU) and eval, from a model the default deck's run trained on
# DEVICE, each against the same command on the CPU backend, here on the node: the greedy texts
# equal, the validation losses within 1e-5 relative (f32 both; their sums' orders differ).
if wanted "generate+eval default_fp32"; then
  default_run decode_model
  status=$?
  model=$LOGS/decode_model/model.bin
  for device in cpu "$DEVICE"; do
    ((status == 0)) || break
    within 60 trident generate inputs/default.deck $DATA --model.init="$model" --prompt="This License" --tokens=48 \
      --temperature=0 --kernels.device="$device" > "$LOGS/generate_$device.txt" 2> "$LOGS/generate_$device.err" &&
      within 60 trident eval inputs/default.deck $DATA --model.init="$model" --train.eval_tokens=4096 \
        --kernels.device="$device" > "$LOGS/eval_$device.out" 2>&1
    status=$?
  done
  if ((status != 0)); then
    log=$LOGS/decode_model.log
    for other in "$LOGS/generate_$DEVICE.err" "$LOGS/eval_$DEVICE.out" "$LOGS/generate_cpu.err" "$LOGS/eval_cpu.out"; do
      [[ -s $other ]] && log=$other
    done
    verdict FAIL "generate+eval default_fp32" "$(failed_run "$status" "$log")"
  else
    figures=$(py - "$LOGS/generate_cpu.txt" "$LOGS/generate_$DEVICE.txt" "$LOGS/eval_cpu.out" "$LOGS/eval_$DEVICE.out" 2>&1 <<'PY'
import re, sys
cpu_text, gpu_text = (open(p, encoding="utf-8", errors="replace").read() for p in sys.argv[1:3])
def val_loss(path):
    found = re.search(r"val_loss[ =]([0-9.eE+-]+)", open(path).read())
    return float(found.group(1)) if found else None
cpu_loss, gpu_loss = val_loss(sys.argv[3]), val_loss(sys.argv[4])
if cpu_loss is None or gpu_loss is None: sys.exit(print("no val_loss in eval's output") or 1)
same = next((i for i, (a, b) in enumerate(zip(cpu_text, gpu_text)) if a != b), min(len(cpu_text), len(gpu_text)))
loss = abs(gpu_loss - cpu_loss) / cpu_loss
text = ("the greedy text equal to the CPU's" if cpu_text == gpu_text and cpu_text.strip() else
        f"the greedy text differs from the CPU's after {same} characters: {gpu_text[same:same + 20]!r} against {cpu_text[same:same + 20]!r}")
print(f"{text} ({len(gpu_text.strip())} characters); validation loss {gpu_loss:.6f} against {cpu_loss:.6f} (relative {loss:.1e}, tolerance 1e-5)")
sys.exit(0 if cpu_text == gpu_text and cpu_text.strip() and loss <= 1e-5 else 1)
PY
)
    if (($? == 0)); then verdict PASS "generate+eval default_fp32" "$figures"
    else verdict FAIL "generate+eval default_fp32" "$(echo "$figures" | tail -1)"; fi
  fi
  drop_model decode_model
fi

# The kernel checks that have GPT-2 124M sizes (B 2, T 1024, C 768, NH 12, V 50304), at those:
# after the training runs (a kernel that hangs at these sizes would otherwise take their time).
kernel_checks 180 --gpt2 linear_f32 linear_bf16 linear_gelu_bf16 linear_gelu_backward_bf16 strided_matmul strided_matmul_bf16 layernorm residuals \
  attention_f32 attention_bf16 flash_attention flash_attention_bf16 flash_attention_cudnn_bf16 crossentropy crossentropy_fused

# 6. Issue 32's comparison, after the pairs (whose verdicts matter more): GPT-2 124M with the
# attention and the head as before that issue (the defaults are flash and the chunked classifier).
gpt2_124m gpt2_124m_bf16_materialized --model.attention=materialized --model.classifier_chunk=0
# cuDNN's fused attention against our tensor-core kernels (the default takes cuDNN's where it
# builds the graphs: the run's stderr says which ran).
gpt2_124m gpt2_124m_bf16_own_attention --cuda.attention_kernel=own
# The tensor-core attention's gain: the same run with the flash attention's products in f32 on
# the first-light warp kernels.
gpt2_124m gpt2_124m_bf16_f32_attention --cuda.attention_products=f32
# The GELU epilogues' gain (GELU_AUX_BIAS forward, DGELU backward): the same run without them.
gpt2_124m gpt2_124m_bf16_unfused_gelu --cuda.gelu_epilogues=off
# Each operation's share of the step (trident bench --ops: events on the stream), at that size.
if wanted "bench --ops gpt2_124m_bf16"; then
  within 120 trident bench inputs/bench-124m.deck --ops --kernels.device="$DEVICE" --optim.precision=bf16 --steps=3 \
    --warmup=2 --train.micro_batch=16 --train.global_batch=16 $GPT2_OVERRIDES > "$LOGS/ops.log" 2>&1
  status=$?
  ops=$(grep -m1 -o 'step_ms=[0-9.]* operations_ms=[0-9.]*' "$LOGS/ops.log")
  [[ -n $ops ]] && verdict PASS "bench --ops gpt2_124m_bf16" "$ops; the table in logs/ops.log" ||
    verdict FAIL "bench --ops gpt2_124m_bf16" "$(failed_run "$status" "$LOGS/ops.log")"
fi

# 6b. The profile this GPU gives the planner (trident plan --calibrate on kernels.device = cuda):
# the GEMM rates of GPT-2 124M's shapes, the bandwidth of the rest of a step, the memory the
# runtime holds, the SMs — beside the figures the assumed profile gives. One rank: a links.ini of
# one rank a level (no links measured).
if wanted "plan --calibrate"; then
  size=(--train.global_batch=16 --train.micro_batch=16)
  # Tried here on the CPU: GPT-2 124M's step of 16 takes minutes, one block of one sequence seconds.
  [[ $DEVICE == cuda ]] || size=(--train.global_batch=1 --train.micro_batch=1 --model.layers=1)
  printf '[%s]\nranks = 1\nlatency_us = 0\nbusbw_gbps = 0\n' node rack cross_rack > "$LOGS/links-1.ini"
  if within 120 trident plan inputs/bench-124m.deck --calibrate="$LOGS/calibrated.ini" --links="$LOGS/links-1.ini" \
      --kernels.device="$DEVICE" --parallel.data=1 "${size[@]}" $GPT2_OVERRIDES > "$LOGS/calibrate.log" 2>&1; then
    figures=$(py - "$LOGS/calibrated.ini" "inputs/hardware/$PROFILE.ini" "$DEVICE" 2>&1 <<'PY'
import sys
def read(path):  # [device] keys of a profile: name -> value (comments dropped)
    values, section = {}, ""
    for line in open(path):
        line = line.split("#")[0].strip()
        if line.startswith("["): section = line.strip("[]")
        elif "=" in line and section == "device":
            key, value = (part.strip() for part in line.split("=", 1))
            values[key] = value
    return values
got, assumed = read(sys.argv[1]), read(sys.argv[2])
num = lambda d, k: float(d.get(k, 0) or 0)
text = (f"bf16 GEMMs {num(got, 'peak_tflops_bf16'):.3g} TFLOP/s (profile: {num(assumed, 'peak_tflops_bf16') * num(assumed, 'gemm_fraction'):.0f} "
        f"achieved), fp32 {num(got, 'peak_tflops_fp32'):.3g}; the rest of a step at {num(got, 'memory_bandwidth_gbps'):.0f} GB/s "
        f"({num(assumed, 'memory_bandwidth_gbps'):.0f}); runtime {num(got, 'reserved_gb'):.2f} GB ({num(assumed, 'reserved_gb'):.2f}); "
        f"{got.get('compute_units', '0')} SMs, {got.get('shared_memory_kb', '0')} KB a block")
print(text)
gpu = sys.argv[3] == "cuda"
sys.exit(0 if num(got, "peak_tflops_bf16") > 0 and (not gpu or int(num(got, "compute_units")) > 0) else 1)
PY
)
    [[ $? == 0 ]] && verdict PASS "plan --calibrate" "$figures" || verdict FAIL "plan --calibrate" "$(echo "$figures" | tail -1)"
  else
    verdict FAIL "plan --calibrate" "$(failed_run "$?" "$LOGS/calibrate.log")"
  fi
fi

# 6c. commbench's NCCL rows on device buffers, one rank: each collective's NCCL call on the GPU and
# its exactness (a link's figures need a GPU a rank: on one, links.ini says 0).
if ! wanted "commbench nccl"; then
  :
elif [[ $DEVICE != cuda ]]; then
  verdict SKIP "commbench nccl" "NCCL needs kernels.device = cuda (DEVICE=$DEVICE)"
elif [[ -n ${nccl_note:-} ]]; then
  verdict SKIP "commbench nccl" "NCCL is not loadable on this node (the preflight's line)"
else
  within 90 trident commbench inputs/default.deck --kernels.device=cuda --comm.backend=nccl --parallel.tensor=1 \
    --parallel.pipeline=1 --parallel.data=1 --train.run_dir="$LOGS/commbench" > "$LOGS/commbench.log" 2>&1
  status=$? rows=$(grep -cE '^ +[0-9]+ +[0-9]+  [a-z_]+ +nccl' "$LOGS/commbench.log")
  if ((status == 0 && rows > 0)) && grep -q '^# all results exact' "$LOGS/commbench.log"; then
    verdict PASS "commbench nccl" "$rows NCCL rows exact; $(grep -E '^ +67108864 .* all_reduce +nccl ' "$LOGS/commbench.log" |
      awk '{print "64 MiB all-reduce " $5 " us"}')"
  else
    verdict FAIL "commbench nccl" "$rows NCCL rows; $(failed_run "$status" "$LOGS/commbench.log")"
  fi
fi

# 7. compute-sanitizer (on PATH or in the toolkit), after every figure: under it the checks run
# tens of times slower. memcheck over every small check in one process (not runtime_reserved: the
# sanitizer's own device memory counts against it), racecheck and synccheck over the tensor-core
# attention's (its warps share tiles in shared memory). Exit status 99 is a finding; another is
# the checks' own failure (or the time). A node where the sanitizer cannot start gives one SKIP.
SANITIZER=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" 2> /dev/null)
sanitize() {  # sanitize TOOL PART BUDGET CHECK...
  local tool=$1 part=$2 budget=$3 status summary
  shift 3
  wanted "$part" || return 0
  within "$budget" env TRIDENT_CUDA_TOOL="compute-sanitizer --tool $tool" "$SANITIZER" --tool "$tool" --error-exitcode 99 \
    gpu_tests "$@" > "$LOGS/$tool.log" 2>&1
  status=$?
  summary=$(grep -m1 -E '(ERROR|RACECHECK) SUMMARY' "$LOGS/$tool.log")
  case $status in
    0) verdict PASS "$part" "$summary" ;;
    99) verdict FAIL "$part" "$summary: $(grep -m1 -E 'Invalid|hazard|Race|Barrier' "$LOGS/$tool.log")" ;;
    *) verdict FAIL "$part" "exit status $status (the checks, or the time): $(grep -E '^FAIL ' "$LOGS/$tool.log" |
         head -2 | tr '\n' ' ')$summary" ;;
  esac
}
if selects "memcheck kernels" || selects "racecheck flash_attention_bf16" || selects "synccheck flash_attention_bf16"; then
  selected=$((selected + 1))
  probe=0
  [[ -n $SANITIZER ]] && ((gpus > 0)) && { within 90 "$SANITIZER" --tool memcheck gpu_tests memory > "$LOGS/sanitizer-probe.log" 2>&1; probe=$?; }
  if [[ -z $SANITIZER ]] || ((gpus == 0)); then
    verdict SKIP sanitizers "compute-sanitizer not found (or no GPU)"
  elif ((probe != 0)) && grep -qiE 'not supported|error 999|LibraryNotLoaded|Unable to|Device not' "$LOGS/sanitizer-probe.log"; then
    verdict SKIP sanitizers "compute-sanitizer does not run here: $(grep -m1 -iE 'not supported|error|unable' "$LOGS/sanitizer-probe.log")"
  elif ((probe != 0)); then
    verdict FAIL sanitizers "memcheck over the memory check: exit status $probe: $(grep -m1 -E 'Invalid|ERROR SUMMARY|^FAIL ' "$LOGS/sanitizer-probe.log")"
  else
    # shellcheck disable=SC2046
    sanitize memcheck "memcheck kernels" 240 $(echo "$kernel_list" | grep -vx runtime_reserved)
    sanitize racecheck "racecheck flash_attention_bf16" 120 flash_attention_bf16
    sanitize synccheck "synccheck flash_attention_bf16" 120 flash_attention_bf16
  fi
fi

# 8. NCCL, last: one rank per GPU.
if ! wanted nccl; then
  :
elif ((gpus >= 2)); then
  within 120 mpirun -np 2 test_nccl < /dev/null > "$LOGS/nccl.log" 2>&1
  p=$(grep -c '^PASS' "$LOGS/nccl.log") f=$(grep -c '^FAIL' "$LOGS/nccl.log")
  ((p > 0 && f == 0)) && verdict PASS nccl "$p checks passed" || verdict FAIL nccl "$p passed, $f failed"
else
  verdict SKIP nccl "not exercised: $gpus GPU(s); NCCL needs a GPU per rank"
fi
[[ -n ${ONLY:-} ]] && ((selected == 0)) && verdict FAIL selection "ONLY='$ONLY' selected no part"
((failures == 0 && unreached == 0))
