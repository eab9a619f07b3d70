#!/usr/bin/env bash
# layering.sh — the module layers point one way (docs/ARCHITECTURE.md, "The communication seam"):
# comm/ includes nothing from the layers above it, topo/ does not read the deck, and MPI stays
# inside comm/ (and core/'s MPI session): everything else talks to comm::Communicator, and the
# one native handle outside comm/ goes to parallel HDF5 (ckpt/parallel_hdf5.cpp).
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

# expect_no_code NAME WHAT PATTERN FILES...: no line of FILES matches PATTERN in its code — with
# comments and string literals taken out (a comment may name MPI_Abort, a message MPI's variables).
expect_no_code() {
  local name=$1 what=$2 pattern=$3; shift 3
  local found
  found=$(PATTERN=$pattern /usr/bin/python3 - "$@" <<'PY'
import os, re, sys
pattern = re.compile(os.environ["PATTERN"])
strip = re.compile(r'//.*|"(?:\\.|[^"\\])*"')
found = []
for path in sys.argv[1:]:
    for number, line in enumerate(open(path, errors="replace"), 1):
        if pattern.search(strip.sub("", line)):
            found.append(f"{path}:{number}: {line.strip()}")
print("\n".join(found[:3]))
PY
)
  if [[ -z "$found" ]]; then pass "$name"; else fail "$name" "$what: $found"; fi
}

# Everything but comm/ and core/ (the MPI session, MPI_CHECK): no MPI identifier, no <mpi.h>.
# The one exception is the parallel HDF5 adapter, which hands HDF5 the MPI communicator under a
# Communicator; and no file outside comm/ but that adapter reaches for comm/mpi/ (native
# handles, MpiCommunicator): an MPI_Comm handed through an accessor shows as that include.
above_comm=$(find src kernels tests/unit -name '*.[ch]pp' -o -name '*.cu' | grep -v -e '^src/comm/' -e '^src/core/' \
  -e '^src/ckpt/parallel_hdf5\.cpp$')
expect_no_code no_mpi_outside_comm "an MPI identifier outside comm/ (talk to a comm::Communicator)" \
  '\bMPI_[A-Za-z_]+' $above_comm
expect_none no_mpi_header_outside_comm "<mpi.h> included outside comm/ and core/" '#include <mpi.h>' $above_comm
expect_none native_handle_only_in_its_adapter "comm/mpi/ (a native MPI handle) reached outside comm/ and ckpt/parallel_hdf5.cpp" \
  '#include "comm/mpi/' $above_comm

# Ranks are passed, not looked up: the process's world rank (core/mpi_util.hpp) is read by the
# messages of core/, the MPI layer in comm/ and main(); library code asks its communicator. (Only
# files that include core/mpi_util.hpp can call it: a Grid's own world_size() is another thing.)
expect_no_code no_world_rank_lookup "a world_rank()/world_size() lookup in library code (ask the communicator passed in)" \
  '(^|[^.>A-Za-z_])world_(rank|size)\(\)' \
  $(grep -l '#include "core/mpi_util.hpp"' $(find src kernels -name '*.[ch]pp' -o -name '*.cu') |
    grep -v -e '^src/comm/' -e '^src/core/' -e '^src/app/main\.cpp$') /dev/null

# The device is a value (Job::device, a kernels::Context) passed to what runs kernels: no
# process-wide default backend, 16-bit GEMM path or arithmetic that a default Context picks up,
# and no process-wide size of the guarded backend's device (kernels.guard_memory_gb is a setting).
expect_none no_process_wide_kernel_default "a process-wide kernel default (pass the job's kernels::Context)" \
  'set_default_(backend|low16_gemm|arithmetic)|set_guard_memory|g_default|g_memory_bytes' $(find src kernels -name '*.[ch]pp' -o -name '*.cu')

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
dp optim pipeline
ckpt
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
