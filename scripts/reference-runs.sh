#!/usr/bin/env bash
# reference-runs.sh — the training arithmetic against recorded fingerprints, bit for bit: the
# per-step losses, the validation losses and the final model file of two runs,
#   default   tests/reference/default.deck (inputs/default.deck as of the redesign of issue 15)
#             on one rank, on the default corpus, 40 steps (300 with `full`)
#   bf16      the same as default in bf16 mixed precision (optim.precision = bf16)
#   tp2pp2dp2 a (tensor 2, pipeline 2, data 2) ZeRO-1 run of a small model on 8 ranks, 12 steps
# Each run twice: in native arithmetic and in portable (kernels.arithmetic = portable, named
# RUN-portable).
#   portable  our fixed-order kernels instead of oneDNN's: the same bits on every x86-64 and
#             AArch64 CPU (scripts/aarch64-check.sh), every build target (-march) and every
#             thread count, so one record, keyed "portable", holds everywhere and the check
#             runs on any machine — the proof that a change left the training arithmetic alone,
#             wherever CI runs.
#   native    oneDNN's kernels sum in an order set by the CPU's instruction set, ours vectorized
#             for the build target: records keyed by oneDNN's ISA, the code generation target of
#             our kernels and the thread count; where no record exists for this machine, `check`
#             says SKIP and `record` adds one. (Two CPUs that oneDNN both runs as
#             avx512_core_amx, whose -march=native GCC expands to different targets, vectorize
#             our loops differently and train to other bits.)
#   scripts/reference-runs.sh record [full]   run and write tests/reference/fingerprints.txt
#   scripts/reference-runs.sh check [full]    run and compare: PASS/FAIL/SKIP lines
# RUNS="default bf16-portable" selects runs.
set -uo pipefail
MODE=${1:?usage: reference-runs.sh record|check [full]}
FULL=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRIDENT="$ROOT/${BUILD:-build}/bin/trident"
RECORDS="$ROOT/tests/reference/fingerprints.txt"
. "$ROOT/scripts/mpi-env.sh"
WORK=$(mktemp -d /tmp/trident-reference.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

CORPUS=(Apache-2.0 Artistic BSD CC0-1.0 GFDL-1.2 GFDL-1.3 GPL-1 GPL-2 GPL-3 LGPL-2 LGPL-2.1 LGPL-3 MPL-1.1 MPL-2.0)
"$TRIDENT" prepare "$WORK/data" "${CORPUS[@]/#//usr/share/common-licenses/}" > /dev/null || exit 1
DATA=(--data.train="$WORK/data/train.bin" --data.val="$WORK/data/val.bin")
ISA=$("$TRIDENT" version | sed -n 's/^CPU: oneDNN [^ ]* on //p')
# What our objects were compiled for: the build's -march (its compile-flags stamp), and for
# -march=native what GCC makes of it on this machine — its target name and a digest of every
# target option it sets (features included), e.g. "rocketlake.3f2a91c0".
code_target() {
  local march
  march=$(grep -o -- '-march=[^ ]*' "$ROOT/${BUILD:-build}/compile-flags" 2>/dev/null | head -1)
  march=${march:--march=native}
  local options
  options=$(g++ "$march" -Q --help=target 2>/dev/null)
  echo "$(awk '$1 == "-march=" {print $2; exit}' <<<"$options").$(sha256sum <<<"$options" | cut -c1-8)"
}
TARGET=$(code_target)

# fingerprint RUN_DIR: sha256 (first 16 hex digits) of the loss and val_loss arrays' bytes
# and of the final model file.
fingerprint() {
  /usr/bin/python3 - "$1" <<'PY'
import hashlib, sys, h5py
run = sys.argv[1]
h = lambda b: hashlib.sha256(b).hexdigest()[:16]
with h5py.File(run + "/metrics.h5", "r") as f:
    loss, val = f["loss"][:], f["val_loss"][:]
print(f"steps={len(loss)} loss={h(loss.tobytes())} val={h(val.tobytes())} "
      f"model={h(open(run + '/model.bin', 'rb').read())}")
PY
}

run_default() {  # run_default RUN_DIR [OVERRIDES...]
  local steps=40 run_dir=$1
  shift
  [[ $FULL == full ]] && steps=300
  OMP_NUM_THREADS=2 mpirun -np 1 "$TRIDENT" train "$ROOT/tests/reference/default.deck" \
    --train.steps=$steps --train.run_dir="$run_dir" "${DATA[@]}" "$@"
}

run_bf16() {  # run_bf16 RUN_DIR [OVERRIDES...]
  run_default "$@" --optim.precision=bf16
}

run_tp2pp2dp2() {  # run_tp2pp2dp2 RUN_DIR [OVERRIDES...]
  local run_dir=$1
  shift
  OMP_NUM_THREADS=1 mpirun -np 8 "$TRIDENT" train "$ROOT/tests/reference/default.deck" \
    --model.hidden=64 --model.seq_len=32 --train.steps=12 --train.global_batch=16 \
    --train.micro_batch=2 --train.eval_interval=6 --train.eval_tokens=2048 \
    --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=1 \
    --train.run_dir="$run_dir" "${DATA[@]}" "$@"
}

for run in ${RUNS:-default bf16 tp2pp2dp2 default-portable bf16-portable tp2pp2dp2-portable}; do
  name="$run${FULL:+-$FULL}"
  base=${run%-portable}
  arithmetic=()
  if [[ $run == *-portable ]]; then
    key="portable $name"
    arithmetic=(--kernels.arithmetic=portable)
  else
    key="$ISA/$TARGET/omp$([[ $run == tp2pp2dp2 ]] && echo 1 || echo 2) $name"
  fi
  if ! "run_$base" "$WORK/$name" "${arithmetic[@]}" > "$WORK/$name.log" 2>&1; then
    echo "FAIL reference $name: the run failed"; tail -5 "$WORK/$name.log"; continue
  fi
  got=$(fingerprint "$WORK/$name")
  want=$(grep -F "$key " "$RECORDS" 2>/dev/null | head -1 | cut -d' ' -f3-)
  if [[ $MODE == record ]]; then
    { grep -vF "$key " "$RECORDS" 2>/dev/null; echo "$key $got"; } | sort > "$WORK/records"
    cp "$WORK/records" "$RECORDS"
    echo "recorded $key $got"
  elif [[ -z $want ]]; then
    echo "SKIP reference $name: no fingerprint recorded for $ISA with code for $TARGET (scripts/reference-runs.sh record on a build known good)"
  elif [[ $got == "$want" ]]; then
    echo "PASS reference $name bitwise ($got)"
  else
    echo "FAIL reference $name: $got, recorded $want"
  fi
done
