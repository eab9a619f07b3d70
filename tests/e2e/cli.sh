#!/usr/bin/env bash
# The user-facing commands: help texts, the resolved deck, `layout` on an emulated cluster.
. tests/e2e/lib.sh
write_deck "$WORK/ok.deck"
cd "$WORK" || exit 1


"$TRIDENT" --help > help.txt; status=$?
check main_help_lists_commands bash -c "[[ $status == 0 ]] && grep -q '^  train ' help.txt && grep -q '^  layout ' help.txt && grep -q 'Exit status' help.txt"

"$TRIDENT" train --help > train-help.txt
"$TRIDENT" help deck | grep -oE '^\| `[a-z_]+`' | tr -d '|` ' | sort > keys.txt
missing=0
for key in $(grep -oE '^### \[[a-z_]+\]' <("$TRIDENT" help deck) | tr -d '#[] '); do
  for name in $("$TRIDENT" help deck | awk -v s="### [$key]" '$0==s{on=1;next} /^### /{on=0} on && /^\| `/{gsub(/[|` ]/,"",$2); print $2}'); do
    grep -q -- "--$key.$name " train-help.txt || { echo "train --help lacks --$key.$name"; missing=1; }
  done
done
check train_help_lists_every_key_with_default bash -c "[[ $missing == 0 ]] && grep -q -- '--parallel.tensor INT (=1)' train-help.txt && [[ \$(wc -l < keys.txt) -ge 40 ]]"

"$TRIDENT" train ok.deck --parallel.schedule=gpipe --optim.lr=3e-4 > train.out 2> train.err; status=$?
check train_writes_resolved_deck bash -c "[[ -f run/deck.resolved.ini ]] && grep -q '^schedule = gpipe  # command line' run/deck.resolved.ini && grep -q '^lr = 0.0003' run/deck.resolved.ini"
check train_succeeds bash -c "[[ $status == 0 ]] && [[ -f run/metrics.h5 && -f run/model.bin ]]"

cp run/deck.resolved.ini resolved-1.ini
"$TRIDENT" train --check resolved-1.ini > check.out 2>&1; status=$?
check resolved_deck_is_a_valid_deck bash -c "[[ $status == 0 ]] && grep -q '^deck ok:' check.out"
"$TRIDENT" train resolved-1.ini --train.run_dir=run2 > /dev/null 2>&1
check resolved_deck_round_trips bash -c "diff <(grep -v '^#' resolved-1.ini | sed 's/  # command line//') <(grep -v '^#' run2/deck.resolved.ini | sed 's/  # command line//; s/run2/run/')"

rm -rf run3
"$TRIDENT" train --check ok.deck --train.run_dir=run3 > /dev/null 2>&1
check check_writes_nothing bash -c "[[ ! -e run3 ]]"

mpirun -np 8 "$TRIDENT" layout ok.deck --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 \
  --topology.ranks_per_node=2 --topology.nodes_per_rack=2 > layout.out 2> layout.err; status=$?
check layout_emulates_4_nodes_in_2_racks bash -c "[[ $status == 0 ]] && grep -q '4 nodes (emulated, 2 ranks each) in 2 racks' layout.out && [[ \$(grep -cE '^ +[0-9]+  node[0-3] ' layout.out) == 8 ]]"
check layout_shows_levels_per_group bash -c "grep -q '^tensor  .* 4 inside a node' layout.out && grep -q '^data  .* 4 across nodes within a rack' layout.out && grep -q '^pipeline  .* 4 across racks' layout.out"
check layout_rank_table_row bash -c "grep -qE '^ +5  node2 +2 +1 +1 +1 +0 +1$' layout.out"

# Context parallelism (issue 34): the context group next to the tensor group, inside a node, a
# cp column in the rank table, and the data group of data x context ranks.
mpirun -np 8 "$TRIDENT" layout ok.deck --parallel.tensor=2 --parallel.context=2 --parallel.data=2 \
  --topology.ranks_per_node=4 > layout_cp.out 2> layout_cp.err; status=$?
check layout_shows_the_context_group bash -c "[[ $status == 0 ]] && grep -q 'tensor 2 x context 2 x pipeline 1 x data 2' layout_cp.out && grep -q '^context  .* 4 inside a node' layout_cp.out && grep -qE '^data +4 +2 +2 across nodes within a rack' layout_cp.out && grep -qE '^ +6  node1 +1 +0 +2 +0 +1 +1 +0$' layout_cp.out"

printf 'SwitchName=left Nodes=node[0,3]\nSwitchName=right Nodes=node[1-2]\nSwitchName=top Switches=left,right\n' > topo.conf
mpirun -np 8 "$TRIDENT" layout ok.deck --parallel.pipeline=2 --parallel.data=4 \
  --topology.ranks_per_node=2 --topology.file=topo.conf > layout2.out 2> layout2.err; status=$?
check layout_racks_from_topology_file bash -c "[[ $status == 0 ]] && grep -qE '^ +6  node3 +3 +0 ' layout2.out && grep -q '^data  .* 2 across racks' layout2.out"
check layout_warns_when_block_order_is_better bash -c "grep -q 'warning: 2 of 2 data groups cross racks, but with ranks numbered node by node only 0 would' layout2.err"

"$TRIDENT" version > version.txt
check version_names_the_backends bash -c "grep -q '^MPI: Open MPI' version.txt && grep -q '^CPU: oneDNN' version.txt && grep -q '^CUDA: ' version.txt"

# The CUDA libraries are opened on first use (src/core/shared_library.hpp): a CPU training run of
# two ranks maps none of cuBLASLt, cuDNN, NVRTC, NCCL (each rank mapped ~200 MiB of cuBLASLt when
# they were linked); `trident version` opens cuBLASLt and NCCL to say where they are.
if grep -q '^CUDA: runtime' version.txt; then
  LD_DEBUG=files mpirun -np 2 "$TRIDENT" train ok.deck --parallel.data=2 --train.run_dir=no_cuda > no_cuda.out 2> no_cuda.err
  status=$?
  check cpu_run_loads_no_cuda_library bash -c "[[ $status == 0 ]] && grep -q 'file=libdnnl' no_cuda.err &&
    ! grep -qE 'file=lib(cublasLt|cudnn|nvrtc|nccl)' no_cuda.err"
  check version_says_where_cuda_libraries_are bash -c "grep -qE '^CUDA: runtime .*cuBLASLt [0-9]+ \(/.*libcublasLt\.so\.[0-9]+\)' version.txt &&
    grep -qE 'NCCL ([0-9.]+ \(/.*libnccl\.so\.[0-9]+\)|not built in)' version.txt"
else
  skip cpu_run_loads_no_cuda_library "a build without CUDA links none"
  skip version_says_where_cuda_libraries_are "a build without CUDA"
fi
