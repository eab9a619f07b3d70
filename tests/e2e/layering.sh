#!/usr/bin/env bash
# layering.sh — the module layers point one way (docs/ARCHITECTURE.md, "The communication seam"):
# comm/ includes nothing from the layers above it, topo/ does not read the deck, and MPI stays
# inside comm/ and the start-up code: no MPI_ identifier in the model, the kernels, the
# pipeline, the optimizer, the data readers or the trainer.
. tests/e2e/lib.sh
cd "$ROOT"

# expect_none NAME WHAT PATTERN FILES...: no line of FILES matches PATTERN.
expect_none() {
  local name=$1 what=$2 pattern=$3; shift 3
  local found
  found=$(grep -nE "$pattern" "$@" 2>/dev/null | head -3)
  if [[ -z "$found" ]]; then pass "$name"; else fail "$name" "$what: $found"; fi
}

expect_none comm_includes_nothing_above_it "comm/ includes a layer above it" \
  '#include "(model|dp|pipeline|train|optim|ckpt|data|metrics)/' src/comm/*
expect_none topo_does_not_read_the_deck "topo/ includes deck/" '#include "deck/' src/topo/*
expect_none no_mpi_outside_comm "an MPI_ identifier outside comm/ and the start-up code" \
  'MPI_[A-Za-z_]' $(find src/model src/pipeline src/optim src/data src/dp kernels -name '*.[ch]pp' -o -name '*.cu') \
  src/train/trainer*.[ch]pp
expect_none no_mpi_header_above_comm "<mpi.h> included outside comm/ and core/" \
  '#include <mpi.h>' $(find src/model src/pipeline src/optim src/data src/dp kernels -name '*.[ch]pp') \
  src/train/trainer*.[ch]pp
