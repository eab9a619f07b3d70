#!/usr/bin/env bash
# One case per kind of bad input: one "error:" line from rank 0, exit 2, nothing written.
. tests/e2e/lib.sh
D="$WORK/decks"; mkdir -p "$D"

write_deck "$D/unknown_section.deck" "[modle]"
expect_user_error unknown_section "unknown_section.deck:11: unknown section [modle]|Did you mean [model]?" \
  "$TRIDENT" train "$D/unknown_section.deck"

write_deck "$D/unknown_key.deck" "[parallel]
tensr = 2"
expect_user_error unknown_key "unknown_key.deck:12: unknown key 'parallel.tensr'|Did you mean 'parallel.tensor'?" \
  "$TRIDENT" train "$D/unknown_key.deck"

write_deck "$D/wrong_type.deck" "[optim]
lr = fast"
expect_user_error wrong_type "wrong_type.deck:12: optim.lr = 'fast' is not a finite number|allowed: a number in [0, 10]" \
  "$TRIDENT" train "$D/wrong_type.deck"

write_deck "$D/out_of_range.deck" "[parallel]
schedule = 1f1b
pipeline = 0"
expect_user_error out_of_range "out_of_range.deck:13: parallel.pipeline = '0' is below the minimum|an integer in [1, 4096]" \
  "$TRIDENT" train "$D/out_of_range.deck"

printf '[model]\nlayers = 4\nheads = 4\nhidden = 64\nseq_len = 8\n[train]\nrun_dir = run\n' > "$D/missing_key.deck"
expect_user_error missing_required_key "missing_key.deck: missing required key model.vocab|--model.vocab=VALUE" \
  "$TRIDENT" train "$D/missing_key.deck"

expect_user_error missing_deck "cannot read deck '$D/nope.deck': No such file or directory" \
  "$TRIDENT" train "$D/nope.deck"

expect_user_error unreadable_deck "cannot read deck '$D': is a directory" \
  "$TRIDENT" train "$D"

write_deck "$D/twice.deck" "[model]
heads = 8"
expect_user_error key_given_twice "twice.deck:12: model.heads is given twice (lines 3 and 12)" \
  "$TRIDENT" train "$D/twice.deck"

write_deck "$D/ok.deck"
expect_user_error layout_product_vs_ranks "2 x 2 x 1 = 4, but the job has 2 ranks|set them so that their product is 2, or launch 4 ranks" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.tensor=2 --parallel.pipeline=2

expect_user_error heads_not_divisible_by_tensor "model.heads must be divisible by parallel.tensor|model.heads = 3 (command line)" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.tensor=2 --model.heads=3 --model.hidden=66

expect_user_error hidden_not_divisible_by_heads "model.hidden must be divisible by model.heads|model.hidden = 66" \
  "$TRIDENT" train "$D/ok.deck" --model.hidden=66

expect_user_error layers_fewer_than_stages "model.layers must be at least parallel.pipeline|model.layers = 1 (command line)" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.pipeline=2 --model.layers=1

expect_user_error global_batch_not_divisible "train.global_batch must be divisible by train.micro_batch x parallel.data = 3" \
  "$TRIDENT" train "$D/ok.deck" --train.global_batch=8 --train.micro_batch=3

touch "$WORK/a_file"
expect_user_error run_dir_not_creatable "run directory '$WORK/a_file/run' cannot be created|is not a directory" \
  "$TRIDENT" train "$D/ok.deck" --train.run_dir="$WORK/a_file/run"

expect_user_error unknown_override "command line: unknown option '--parallel.tensro=2'|Did you mean 'parallel.tensor'?" \
  "$TRIDENT" train "$D/ok.deck" --parallel.tensro=2

expect_user_error override_wrong_type "command line: train.steps = 'ten' is not an integer" \
  "$TRIDENT" train "$D/ok.deck" --train.steps=ten

printf '[model]\nlayers 4\n' > "$D/syntax.deck"
expect_user_error syntax_error "syntax.deck:2: cannot read 'layers 4'" "$TRIDENT" train "$D/syntax.deck"

expect_user_error unknown_command "unknown command 'trian'" "$TRIDENT" trian "$D/ok.deck"

expect_user_error no_deck "command line: no deck given" "$TRIDENT" train

expect_user_error topology_file_missing "cannot read topology file 'nope.conf'" \
  "$TRIDENT" layout "$D/ok.deck" --topology.file=nope.conf

# kernels.device = cuda names what this binary and machine lack: CUDA compiled in, a GPU, or
# (with both) the parts of the trainer that still work on host memory.
if "$TRIDENT" version 2>/dev/null | grep -q "CUDA: not compiled in"; then
  lacks="this binary was built without CUDA"
elif nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  lacks="the trainer does not run on CUDA yet"
else
  lacks="this machine has no GPU visible to CUDA"
fi
expect_user_error device_cuda_unavailable "kernels.device = cuda (command line), but|$lacks|use kernels.device = cpu" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.data=2 --kernels.device=cuda

# comm.backend = nccl needs NCCL in the binary, then device buffers (kernels.device = cuda);
# a bad value is refused like every choice.
if [[ -f "${BUILD:-build}/nccl-flag" && $(cat "${BUILD:-build}/nccl-flag") == 1 ]]; then
  nccl_lacks="NCCL communicates device memory, and kernels.device = cpu keeps the model in host memory"
else
  nccl_lacks="this binary was built without NCCL"
fi
expect_user_error nccl_backend_needs_device_buffers "comm.backend = nccl (command line), but|$nccl_lacks|use comm.backend = mpi" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.data=2 --comm.backend=nccl
expect_user_error comm_backend_choices "comm.backend = 'gloo' is not an allowed choice|one of auto, mpi, nccl" \
  "$TRIDENT" train "$D/ok.deck" --comm.backend=gloo

# Reported once even when every rank detects it.
expect_user_error reported_once_by_rank_0 "unknown option '--model.layrs=2'" \
  mpirun -np 4 "$TRIDENT" train "$D/ok.deck" --parallel.data=4 --model.layrs=2

# Layout errors of the hybrid-parallel training.
expect_user_error one_f_one_b_needs_micro_batches "the 1F1B schedule needs at least as many micro-batches per step as pipeline stages|parallel.schedule = gpipe" \
  mpirun -np 4 "$TRIDENT" train "$D/ok.deck" --parallel.pipeline=4 --train.global_batch=2
# Interleaved: GPipe takes no virtual stages, so the way out names both keys.
expect_user_error interleaved_needs_micro_batches "the interleaved 1F1B schedule needs at least as many micro-batches|parallel.virtual_stages = 2 (command line)|use parallel.virtual_stages = 1 and parallel.schedule = gpipe" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.pipeline=2 --parallel.virtual_stages=2 --train.global_batch=1
expect_user_error zb_h1_needs_micro_batches "the ZB-H1 schedule needs at least as many micro-batches per step as pipeline stages" \
  mpirun -np 4 "$TRIDENT" train "$D/ok.deck" --parallel.pipeline=4 --train.global_batch=2 --parallel.schedule=zb-h1
expect_user_error zb_h1_not_with_block_recompute "parallel.schedule = zb-h1 keeps each block's GEMM inputs|memory.recompute = full" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.pipeline=2 --parallel.schedule=zb-h1 --memory.recompute=full
# Sequence parallelism (issue 34): the rows split evenly over the tensor group, and no ZB-H1.
expect_user_error sequence_parallel_rows_not_divisible "parallel.sequence_parallel = true|micro_batch x seq_len / context = 30 token rows|parallel.tensor = 4|use a seq_len divisible by 4" \
  mpirun -np 4 "$TRIDENT" train "$D/ok.deck" --parallel.tensor=4 --parallel.sequence_parallel=true --model.seq_len=30
expect_user_error tp_overlap_needs_sequence_parallel "parallel.tp_comm_overlap = true|set parallel.sequence_parallel = true too" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.tensor=2 --parallel.tp_comm_overlap=true
expect_user_error sequence_parallel_not_with_zb_h1 "parallel.sequence_parallel = true|parallel.schedule = zb-h1|use parallel.schedule = 1f1b" \
  mpirun -np 4 "$TRIDENT" train "$D/ok.deck" --parallel.tensor=2 --parallel.pipeline=2 --parallel.sequence_parallel=true \
  --parallel.schedule=zb-h1
# Context parallelism (issue 34): 2c equal chunks, the flash attention, no balance moves.
expect_user_error context_chunks_not_equal "parallel.context = 4|splits each sequence into 8 chunks|model.seq_len = 36 is not divisible by 8" \
  mpirun -np 4 "$TRIDENT" train "$D/ok.deck" --parallel.context=4 --model.seq_len=36
expect_user_error context_needs_flash "parallel.context = 2|ring of flash-attention blocks|use model.attention = flash" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.context=2 --model.attention=materialized
expect_user_error context_not_with_replica_balance "parallel.context = 2|balance.replicas = true|set it to false" \
  mpirun -np 4 "$TRIDENT" train "$D/ok.deck" --parallel.context=2 --parallel.data=2 --balance.replicas=true
expect_user_error context_world_product "parallel.tensor x parallel.context x parallel.pipeline x parallel.data = 1 x 2 x 1 x 2 = 4|launch 4 ranks" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.context=2 --parallel.data=2
expect_user_error interleaved_needs_1f1b "parallel.virtual_stages = 2|is the interleaved 1F1B schedule|parallel.schedule is gpipe" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.pipeline=2 --parallel.virtual_stages=2 --parallel.schedule=gpipe
expect_user_error interleaved_needs_a_block_per_chunk "model.layers 4 must be at least parallel.pipeline x parallel.virtual_stages = 6" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.pipeline=2 --parallel.virtual_stages=3
expect_user_error interleaved_stage_layers_per_virtual_stage "parallel.stage_layers has 2 entries but there are 4 virtual stages" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.pipeline=2 --parallel.virtual_stages=2 --parallel.stage_layers=2,2
expect_user_error interleaved_needs_micro_batch_groups "must be a multiple of 4" \
  mpirun -np 4 "$TRIDENT" train "$D/ok.deck" --parallel.pipeline=4 --model.layers=8 --parallel.virtual_stages=2 \
  --train.global_batch=6 --train.micro_batch=1
expect_user_error stage_layers_must_sum_to_layers "parallel.stage_layers sums to 5 but the model has 4 blocks" \
  mpirun -np 2 "$TRIDENT" train "$D/ok.deck" --parallel.pipeline=2 --parallel.stage_layers=2,3
expect_user_error vocab_must_split_over_tensor "the padded vocabulary (256 rows) must be divisible by parallel.tensor" \
  mpirun -np 3 "$TRIDENT" train "$D/ok.deck" --parallel.tensor=3 --model.heads=3 --model.hidden=48
