#!/usr/bin/env bash
# run-default.sh — `make run`: the default job, inputs/default.deck on 2 ranks.
set -euo pipefail
. scripts/mpi-env.sh
exec mpirun -np 2 build/bin/trident train inputs/default.deck "$@"
