#!/usr/bin/env bash
# run-default.sh — `make run`: prepare the default corpus (once), train inputs/default.deck, and
# print a sample of the trained model's text.
# The corpus is the license texts every Debian system ships in /usr/share/common-licenses
# (package base-files), in a fixed order: deterministic and always present. It is tokenized with
# a byte-level BPE of 1024 tokens learned from it (docs/DATA.md).
set -euo pipefail
. scripts/mpi-env.sh
CORPUS=(Apache-2.0 Artistic BSD CC0-1.0 GFDL-1.2 GFDL-1.3 GPL-1 GPL-2 GPL-3 LGPL-2 LGPL-2.1 LGPL-3 MPL-1.1 MPL-2.0)
# Prepared again when missing or made by an older `make run` (byte-level, no BPE record).
if ! grep -qs '^kind = bpe' data/default/tokenizer.txt || [[ ! -f data/default/train.bin || ! -f data/default/val.bin ]]; then
  build/bin/trident prepare data/default "${CORPUS[@]/#//usr/share/common-licenses/}" --tokenizer=bpe --vocab=1024
fi
# One rank using both cores (the serial trainer); OpenMP threads for oneDNN and our kernels.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mpirun -np 1 build/bin/trident train inputs/default.deck "$@"
# The sample: the run directory may be overridden on the command line.
run_dir=runs/default
for arg in "$@"; do [[ $arg == --train.run_dir=* ]] && run_dir=${arg#--train.run_dir=}; done
echo "sample (temperature 0.8, top 40, seed 1):"
build/bin/trident generate inputs/default.deck --model.init="$run_dir/model.bin" \
  --prompt="This License" --tokens=96 --temperature=0.8 --top_k=40 --seed=1
