#!/usr/bin/env bash
# run-default.sh — `make run`: prepare the default corpus (once) and train inputs/default.deck.
# The corpus is the license texts every Debian system ships in /usr/share/common-licenses
# (package base-files), read as bytes in a fixed order: deterministic and always present.
set -euo pipefail
. scripts/mpi-env.sh
CORPUS=(Apache-2.0 Artistic BSD CC0-1.0 GFDL-1.2 GFDL-1.3 GPL-1 GPL-2 GPL-3 LGPL-2 LGPL-2.1 LGPL-3 MPL-1.1 MPL-2.0)
if [[ ! -f data/default/train.bin || ! -f data/default/val.bin ]]; then
  build/bin/trident prepare data/default "${CORPUS[@]/#//usr/share/common-licenses/}"
fi
# One rank using both cores (the serial trainer); OpenMP threads for oneDNN and our kernels.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
exec mpirun -np 1 build/bin/trident train inputs/default.deck "$@"
