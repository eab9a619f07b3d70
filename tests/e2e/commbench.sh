#!/usr/bin/env bash
# trident commbench: every row of the table exact (#wrong 0) on an emulated topology and on an
# odd number of ranks, nccl-tests' columns, exit status 0, and the per-level links file for the
# planner. (Its timings are reported, never asserted.)
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
DECK="$ROOT/inputs/cluster-emulated.deck"

commbench() {  # commbench NAME RANKS OVERRIDES...
  local name=$1 ranks=$2
  shift 2
  timeout 120 mpirun -q -np "$ranks" "$TRIDENT" commbench "$DECK" --parallel.tensor=1 --parallel.pipeline=1 \
    --parallel.data="$ranks" --train.run_dir="$name" "$@" > "$name.out" 2>&1
}

# 4 ranks as 2 nodes of 2 in 2 racks: every algorithm at every size, all exact; the node level
# of the hierarchical all-reduce through shared memory.
if commbench emulated 4 --topology.ranks_per_node=2 --topology.nodes_per_rack=1 --comm.node_algo=shm; then
  rows=$(grep -cE '^ +[0-9]+ +[0-9]+  (all_reduce|reduce_scatter|all_gather) ' emulated.out)
  wrong=$(awk '/^ +[0-9]+ +[0-9]+  /{ if ($NF != 0) n++ } END { print n + 0 }' emulated.out)
  algos=$(grep -oE 'all_reduce +(ring|tree|shm|mpi|hierarchical)' emulated.out | awk '{print $2}' | sort -u | paste -sd,)
  # 6 sizes × (all-reduce by 4 algorithms, reduce-scatter, all-gather); no shm rows across nodes
  if [[ $rows == 36 && $wrong == 0 && $algos == hierarchical,mpi,ring,tree ]] && grep -q '^# all results exact' emulated.out &&
     grep -q 'time(us)  algbw(GB/s)  busbw(GB/s)  #wrong' emulated.out; then
    pass "commbench_emulated_exact ($rows rows, all_reduce by $algos)"
  else fail commbench_emulated_exact "$rows rows, $wrong wrong, algorithms $algos: $(tail -2 emulated.out)"; fi
else fail commbench_emulated_exact "status $?: $(tail -3 emulated.out)"; fi
# The planner's file: each level's ranks, latency and bandwidth.
if [[ -f emulated/links.ini ]] && [[ $(grep -c '^\[\(node\|rack\|cross_rack\)\]' emulated/links.ini) == 3 ]] &&
   grep -A1 '^\[node\]' emulated/links.ini | grep -q 'ranks = 2' && grep -A1 '^\[cross_rack\]' emulated/links.ini | grep -q 'ranks = 2'; then
  pass commbench_writes_links
else fail commbench_writes_links "$(cat emulated/links.ini 2>&1 | head -12)"; fi

# The calibrated profile from that file, run where no inputs/ folder is (a job's directory): the
# layout given on the command line (the probe's own one-rank keys replace it, not a second
# value), inputs/hardware/this-host.ini made under the working directory, which the deck's
# default parallel.hardware = this-host then reads.
EMULATED=(--parallel.tensor=1 --parallel.pipeline=1 --parallel.data=4 --topology.ranks_per_node=2
          --topology.nodes_per_rack=1 --train.run_dir=emulated)
if "$TRIDENT" plan "$DECK" --calibrate "${EMULATED[@]}" > calibrate.out 2>&1 &&
   grep -q '^# this host, 4 ranks' inputs/hardware/this-host.ini &&
   "$TRIDENT" plan "$DECK" "${EMULATED[@]}" > this-host.out 2>&1 &&
   grep -q 'hardware this-host (inputs/hardware/this-host.ini)' this-host.out; then
  pass calibrated_profile_written_and_read_in_a_job_directory
else fail calibrated_profile_written_and_read_in_a_job_directory "$(tail -2 calibrate.out) $(tail -2 this-host.out 2>&1)"; fi

# A model on a device: the rows of device buffers too, through the job's own path — here MPI
# staged through host copies (the guarded backend; NCCL's on a GPU: gpu-check's part
# `commbench nccl`): 5 sizes × (all-reduce flat and hierarchical over the 2 emulated nodes,
# reduce-scatter, all-gather), every one exact.
if commbench guard 4 --topology.ranks_per_node=2 --topology.nodes_per_rack=1 --kernels.device=guard &&
   [[ $(grep -cE '^ +[0-9]+ +[0-9]+  [a-z_]+ +staged(_hier)? ' guard.out) == 20 &&
      $(grep -cE '^ +[0-9]+ +[0-9]+  all_reduce +staged_hier ' guard.out) == 5 ]] &&
   [[ $(awk '/^ +[0-9]+ +[0-9]+  [a-z_]+ +staged/{ if ($NF != 0) n++ } END { print n + 0 }' guard.out) == 0 ]] &&
   grep -q '^# all results exact' guard.out; then
  pass commbench_device_buffers_exact
else fail commbench_device_buffers_exact "$(grep -cE ' staged' guard.out) staged lines: $(tail -2 guard.out)"; fi

# The probe runs on the deck's kernels.device, chosen as a job's: the guarded backend here (its
# kernels are the CPU's, so the rates are one rank's share of the cores, as the CPU's); a GPU
# deck's probe is gpu-check's part `plan --calibrate`.
if "$TRIDENT" plan "$DECK" --calibrate="$WORK/guard.ini" "${EMULATED[@]}" --kernels.device=guard > calibrate-guard.out 2>&1 &&
   grep -q '^# this host, 4 ranks, measured by trident plan --calibrate on the guard backend' "$WORK/guard.ini" &&
   grep -qE '^peak_tflops_fp32 = [0-9.]*[1-9]' "$WORK/guard.ini" && grep -q "one rank's share of the cores" "$WORK/guard.ini"; then
  pass calibrate_probes_the_decks_device
else fail calibrate_probes_the_decks_device "$(tail -2 calibrate-guard.out) $(head -3 "$WORK/guard.ini" 2>&1)"; fi

# 3 ranks (odd, uneven segments), one node: also the shared-memory rows (all-reduce,
# reduce-scatter, all-gather), 6 sizes × 9 rows.
if commbench odd 3 --topology.ranks_per_node=3 --train.global_batch=6 --train.micro_batch=2 &&
   grep -q '^# all results exact' odd.out &&
   [[ $(grep -cE '^ +[0-9]+ +[0-9]+  (all_reduce|reduce_scatter|all_gather) ' odd.out) == 54 &&
      $(grep -cE '^ +[0-9]+ +[0-9]+  [a-z_]+ +shm ' odd.out) == 18 ]]; then
  pass commbench_3_ranks_exact
else fail commbench_3_ranks_exact "$(tail -3 odd.out)"; fi
