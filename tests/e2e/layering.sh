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
  '#include "(model|dp|pipeline|train|optim|ckpt|data|metrics)/' $(find src/comm -name "*.[ch]pp")
expect_none topo_does_not_read_the_deck "topo/ includes deck/" '#include "deck/' src/topo/*
expect_none no_mpi_outside_comm "an MPI_ identifier outside comm/ and the start-up code" \
  'MPI_[A-Za-z_]' $(find src/model src/pipeline src/optim src/data src/dp kernels -name '*.[ch]pp' -o -name '*.cu') \
  src/train/trainer*.[ch]pp
expect_none no_mpi_header_above_comm "<mpi.h> included outside comm/ and core/" \
  '#include <mpi.h>' $(find src/model src/pipeline src/optim src/data src/dp kernels -name '*.[ch]pp') \
  src/train/trainer*.[ch]pp

# The device is a value (Job::device, a kernels::Context) passed to what runs kernels: no
# process-wide default backend, 16-bit GEMM path or arithmetic that a default Context picks up.
expect_none no_process_wide_kernel_default "a process-wide kernel default (pass the job's kernels::Context)" \
  'set_default_(backend|low16_gemm|arithmetic)|g_default' $(find src kernels -name '*.[ch]pp' -o -name '*.cu')

# The kernel operations take Tensor views (kernels/ops.inc's convention): a buffer's dtype and
# extents travel with it, and kernels::* checks them. No raw typed pointer parameter there; the
# host side of upload and download (void*) is the only plain pointer.
expect_none ops_take_tensor_views "kernels/ops.inc declares a raw typed pointer (take a const Tensor&)" \
  '^[^/]*\b(float|double|bf16|low16|u?int(8|16|32|64)_t|int|char|size_t)[[:space:]]*\*' kernels/ops.inc

# Settings typed and read once (job/settings.cpp): no value read from a deck by key elsewhere
# (src/deck/ parses and validates), and below the commands nothing holds a Deck — code keeps a
# deck::Record, which cites keys and records the resolved deck but reads no value. load_job
# (job/job.cpp) parses the deck it turns into settings.
expect_none no_key_read_outside_settings "a deck value read by key outside job/settings.cpp (add a typed setting)" \
  '\.get_(int|float|bool|string|int_list|interval)\("' \
  $(find src kernels -name '*.[ch]pp' -o -name '*.cu' | grep -v -e '^src/deck/' -e '^src/job/settings\.cpp$')
expect_none no_deck_below_the_commands "a deck::Deck below src/app/ (pass RunSettings and the deck::Record)" \
  'deck::Deck\b' \
  $(find src kernels -name '*.[ch]pp' -o -name '*.cu' | grep -v -e '^src/deck/' -e '^src/app/' -e '^src/job/settings\.' -e '^src/job/job\.cpp$')

# The whole module graph (docs/ARCHITECTURE.md, "Modules and their layers"): every #include of
# a project header points to a module on a lower layer, or stays in its own module. One layer
# per line, top first; modules on one line do not include each other.
LAYERS='app
bench
train
job
plan
ckpt dp optim pipeline
model
comm metrics
kernels topo deck data diag
core layout tensor'
violations=$(LAYERS="$LAYERS" /usr/bin/python3 - <<'PY'
import os, re, sys
layers = [line.split() for line in os.environ["LAYERS"].splitlines()]
rank = {module: depth for depth, line in enumerate(layers) for module in line}
found = []
roots = [os.path.join("src", d) for d in sorted(os.listdir("src"))] + ["kernels"]
for root in roots:
    module = os.path.basename(root)
    if module not in rank:
        found.append(f"{root}: a module missing from the layer table")
        continue
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            for number, line in enumerate(open(path, errors="replace"), 1):
                m = re.match(r'\s*#include "([a-z_]+)/', line)
                if not m or m.group(1) == module:
                    continue
                target = m.group(1)
                if target not in rank or rank[target] <= rank[module]:
                    found.append(f"{path}:{number}: {module} includes {target}")
print("\n".join(found[:5]))
PY
)
if [[ -z $violations ]]; then pass "module_includes_point_down"; else fail "module_includes_point_down" "$violations"; fi
