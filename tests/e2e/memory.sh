#!/usr/bin/env bash
# tier: long
# The analytic memory model (src/plan/memory_model.hpp) against the tracked peaks of real runs:
# for every configuration below (layouts x recompute modes x precisions x ZeRO x schedules x async
# checkpoints) every
# category of `trident train --check`'s estimate equals the busiest rank's peak in metrics.h5 to
# the byte (the model is derived buffer by buffer: it is exact, and a few bytes off is a buffer it
# does not know). Then
# memory.budget_gb: recompute = auto picks the cheapest mode that fits, the K formula, and the
# errors when nothing fits or no budget is given.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
write_deck m.deck '[checkpoint]
at_end = false'
# The materialized attention and the whole logits, as before issue 32 made flash and the chunked
# classifier the defaults: the cases below that do not name them hold those paths.
sed -i 's/^\[model\]$/[model]\nattention = materialized\nclassifier_chunk = 0/' m.deck

# estimate RANKS OVERRIDES...: the --check line "memory_estimate_bytes: parameters=… total=…"
estimate() {
  local ranks=$1
  shift
  mpirun -q -np "$ranks" "$TRIDENT" train m.deck "$@" --check 2>&1 | sed -n 's/^memory_estimate_bytes: //p'
}

# model_matches NAME RANKS OVERRIDES...: 2 steps, then every category equal to the estimate.
model_matches() {
  local name=$1 ranks=$2
  shift 2
  local predicted
  predicted=$(estimate "$ranks" "$@")
  if [[ -z $predicted ]]; then fail "memory_model_$name" "no estimate from --check"; return; fi
  if ! timeout 120 mpirun -q -np "$ranks" "$TRIDENT" train m.deck --train.run_dir="$name" --train.steps=3 \
      --checkpoint.full_interval=2steps "$@" > "$name.out" 2>&1; then
    fail "memory_model_$name" "run failed: $(tail -2 "$name.out")"; return
  fi
  if $PY - "$name/metrics.h5" "$predicted" > "$name.cmp" 2>&1 <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
predicted = dict(kv.split("=") for kv in sys.argv[2].split())
worst, lines = 0.0, []
for category, value in predicted.items():
    if category in ("total", "block_activations", "buffers"):
        continue
    measured = float(f[f"memory/{category}_peak_bytes"][:].max())
    value = float(value)
    error = abs(measured - value) / max(measured, value) if max(measured, value) > 0 else 0.0
    worst = max(worst, error)
    if error > 0 or category == "activations":
        lines.append(f"{category} {measured / 1048576:.3f} MiB measured, {value / 1048576:.3f} predicted")
# The buffers alive at once, each a cudaMalloc on a GPU: the model's count is a bound.
buffers = int(f["memory/buffers_peak"][:].max())
lines.append(f"buffers {buffers} measured, at most {predicted['buffers']} predicted")
print(f"worst {100 * worst:.2f}%; " + "; ".join(lines))
sys.exit(0 if worst == 0 and buffers <= int(predicted["buffers"]) else 1)
PY
  then pass "memory_model_$name ($(cat "$name.cmp"))"; else fail "memory_model_$name" "$(cat "$name.cmp")"; fi
}

model_matches serial 1
model_matches selective 1 --memory.recompute=selective
model_matches full 1 --memory.recompute=full
model_matches every3 1 --memory.recompute=every_k --memory.recompute_interval=3
model_matches d2 2 --parallel.data=2
model_matches d2_zero_async 2 --parallel.data=2 --optim.zero=1 --checkpoint.async=true
model_matches t2 2 --parallel.tensor=2 --memory.recompute=selective
model_matches p2_1f1b 2 --parallel.pipeline=2
model_matches p2_gpipe_full 2 --parallel.pipeline=2 --parallel.schedule=gpipe --memory.recompute=full
# ZB-H1 holds min(p, m) micro-batches on every stage (1F1B: p − s on stage s).
# Interleaved: v chunks' slots per stage, each chunk's blocks, and a gradient buffer per slot.
model_matches p2_interleaved_v2 2 --parallel.pipeline=2 --parallel.virtual_stages=2
model_matches p2_interleaved_uneven 2 --parallel.pipeline=2 --model.layers=6 --parallel.virtual_stages=2 \
  --parallel.stage_layers=2,1,1,2
model_matches p2_interleaved_v2_full_bf16 2 --parallel.pipeline=2 --parallel.virtual_stages=2 --memory.recompute=full \
  --optim.precision=bf16 --model.classifier_chunk=0
model_matches p4_zb_h1 4 --parallel.pipeline=4 --parallel.schedule=zb-h1 --train.global_batch=8
model_matches p2_zb_h1_whole_classifier_bf16 2 --parallel.pipeline=2 --parallel.schedule=zb-h1 --model.classifier_chunk=0 \
  --optim.precision=bf16
model_matches p2_uneven_every2 2 --parallel.pipeline=2 --parallel.stage_layers=1,3 --memory.recompute=every_k
model_matches t2p2 4 --parallel.tensor=2 --parallel.pipeline=2
model_matches t2d2_zero_selective 4 --parallel.tensor=2 --parallel.data=2 --optim.zero=1 --memory.recompute=selective
model_matches t2p2d2_zero 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=1
model_matches p2d2_gpipe_every2 4 --parallel.pipeline=2 --parallel.data=2 --parallel.schedule=gpipe --memory.recompute=every_k
# Mixed precision: 16-bit parameters and kept activations, f32 master weights, working set
# and (fp16) the GEMMs' widened operands.
# comm.node_algo = shm: each rank's part of a shared window (8 MiB + 64 B) per group that uses
# one — here the tensor, data and embedding groups on one host, and the node level of the
# hierarchical data-parallel all-reduce on 2 emulated nodes.
model_matches t2p2d2_shm 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --comm.node_algo=shm
model_matches d4_hierarchical_shm 4 --parallel.data=4 --comm.node_algo=shm --topology.ranks_per_node=2 \
  --comm.algo=hierarchical
model_matches bf16 1 --optim.precision=bf16
# Issue 33: the distributed optimizer's shard with asynchronous checkpoints (the staging of the
# master's shard), and bf16 gradient traffic (the 16-bit packing buffer; under ZeRO the 16-bit shard).
model_matches bf16_d2_zero_async 2 --parallel.data=2 --optim.zero=1 --optim.precision=bf16 --checkpoint.async=true
model_matches grad16_d2 2 --parallel.data=2 --comm.grad_dtype=bf16
model_matches grad16_bf16_d4_zero 4 --parallel.data=4 --optim.zero=1 --optim.precision=bf16 --comm.grad_dtype=bf16
# ZeRO-2: the gradients outside the blocks, two one-block slots and the own part (exactly).
model_matches bf16_d2_zero2_async 2 --parallel.data=2 --optim.zero=2 --optim.precision=bf16 --checkpoint.async=true
model_matches grad16_bf16_d4_zero2 4 --parallel.data=4 --optim.zero=2 --optim.precision=bf16 --comm.grad_dtype=bf16
model_matches t2p2d2_zero2 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=2
# ZeRO-3: the shard, the whole tensors outside the blocks, two gathered-block slots (and a 16-bit
# model's f32 reads of them), the shards' gathering buffer.
model_matches bf16_d2_zero3_async 2 --parallel.data=2 --optim.zero=3 --optim.precision=bf16 --checkpoint.async=true
model_matches grad16_bf16_d4_zero3 4 --parallel.data=4 --optim.zero=3 --optim.precision=bf16 --comm.grad_dtype=bf16
model_matches t2p2d2_zero3_full 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=3 --memory.recompute=full
model_matches bf16_full 1 --optim.precision=bf16 --memory.recompute=full
model_matches fp16_selective 1 --optim.precision=fp16 --memory.recompute=selective
model_matches bf16_t2p2d2_zero_every2 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=1 --optim.precision=bf16 --memory.recompute=every_k
model_matches fp16_t2p2 4 --parallel.tensor=2 --parallel.pipeline=2 --optim.precision=fp16
model_matches bf16_p2_gpipe_selective 2 --parallel.pipeline=2 --parallel.schedule=gpipe --optim.precision=bf16 --memory.recompute=selective
# bf16 GEMMs widened to f32 (the path of CPUs without a bf16 matmul): the widening workspace.
model_matches bf16_widened 1 --optim.precision=bf16 --kernels.low16_gemm=widened
model_matches bf16_widened_t2p2_selective 4 --parallel.tensor=2 --parallel.pipeline=2 --optim.precision=bf16 \
  --kernels.low16_gemm=widened --memory.recompute=selective

# model.attention = flash: each block keeps its row statistics (B, heads, T), no probabilities,
# no probability-gradient scratch, and selective recompute has nothing to recompute.
model_matches flash 1 --model.attention=flash
model_matches flash_selective_t2 2 --model.attention=flash --parallel.tensor=2 --memory.recompute=selective
model_matches flash_bf16_t2p2d2_every2 8 --model.attention=flash --parallel.tensor=2 --parallel.pipeline=2 \
  --parallel.data=2 --optim.precision=bf16 --memory.recompute=every_k

# model.classifier_chunk: one (chunk, Vp/p) logits buffer for all micro-batches, and per
# micro-batch the final LayerNorm's output gradient that the training forward computes; the
# last stage of GPipe holds every micro-batch's; the head's widened GEMMs are a chunk's.
# The Llama family: grouped-query attention's smaller qkv and its expanded copy, SwiGLU's
# [gate | up] and F-wide activation, the untied head.
LLAMA="--model.arch=llama --model.attention=flash --model.kv_heads=2 --model.ffn_hidden=96"
model_matches llama_gqa 1 $LLAMA
model_matches llama_t2p2_bf16 4 $LLAMA --parallel.tensor=2 --parallel.pipeline=2 --optim.precision=bf16
model_matches llama_full_chunked_d2_zero 2 $LLAMA --memory.recompute=full --model.classifier_chunk=7 --parallel.data=2 \
  --optim.zero=1
model_matches llama_t4_replicated_kv 4 $LLAMA --parallel.tensor=4
model_matches llama_c2_t2_sp 4 $LLAMA --parallel.context=2 --parallel.tensor=2 --parallel.sequence_parallel=true
model_matches llama_materialized_bf16_selective 1 --model.arch=llama --model.kv_heads=2 --model.ffn_hidden=96 \
  --model.attention=materialized --optim.precision=bf16 --memory.recompute=selective
model_matches chunked 1 --model.classifier_chunk=7
model_matches chunked_t2p2 4 --model.classifier_chunk=7 --parallel.tensor=2 --parallel.pipeline=2
model_matches chunked_p2_gpipe_flash 2 --model.classifier_chunk=16 --parallel.pipeline=2 --parallel.schedule=gpipe \
  --model.attention=flash
model_matches chunked_bf16_widened 1 --model.classifier_chunk=7 --optim.precision=bf16 --kernels.low16_gemm=widened

# Sequence parallelism (issue 34): B·T/t rows in the LayerNorms, the residual stream and at the
# stage boundary; one gathered (B·T, C) GEMM input of the stored type and the LayerNorm parts.
SP=--parallel.sequence_parallel=true
model_matches t2_sp 2 --parallel.tensor=2 $SP
model_matches t4_sp_flash_chunked_bf16 4 --parallel.tensor=4 $SP --model.attention=flash --model.classifier_chunk=16 \
  --optim.precision=bf16
model_matches t2p2_sp_full_fp16 4 --parallel.tensor=2 --parallel.pipeline=2 $SP --memory.recompute=full \
  --optim.precision=fp16
model_matches t2p2d2_sp_interleaved_selective 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 $SP \
  --parallel.virtual_stages=2 --memory.recompute=selective --optim.zero=1

# Context parallelism (issue 34): seq_len/c rows of each sequence per rank, the ring's four
# travelling buffers and the chunks' positions on the first stage.
model_matches t2_sp_overlap_bf16 2 --parallel.tensor=2 $SP --parallel.tp_comm_overlap=true --optim.precision=bf16
model_matches c2_flash 2 --parallel.context=2 --model.attention=flash
model_matches t2c2_sp_flash_bf16_chunked 4 --parallel.tensor=2 --parallel.context=2 $SP --model.attention=flash \
  --optim.precision=bf16 --model.classifier_chunk=16
model_matches c2p2d2_flash_full_zero 8 --parallel.context=2 --parallel.pipeline=2 --parallel.data=2 \
  --model.attention=flash --memory.recompute=full --optim.zero=1

# The CPU kernels' per-thread parts of their workspaces (the flash attention's tiles, a 16-bit
# loss gradient's f32 rows), for each of a rank's OpenMP threads: the cases above run one.
OMP_NUM_THREADS=2 model_matches flash_bf16_chunked_2_threads 1 --model.attention=flash --optim.precision=bf16 \
  --model.classifier_chunk=16
# kernels.arithmetic = portable: each thread's panel of its GEMM over the largest K (the weight
# gradients' rows, the classifier's vocabulary); inside the flash attention's own region a
# GEMM's panel is the call's (not counted: the tile's K).
P=--kernels.arithmetic=portable
model_matches portable 1 $P
OMP_NUM_THREADS=2 model_matches portable_flash_bf16_chunked_2_threads 1 $P --model.attention=flash \
  --optim.precision=bf16 --model.classifier_chunk=16
model_matches portable_t2p2_sp_overlap 4 $P --parallel.tensor=2 --parallel.pipeline=2 $SP --parallel.tp_comm_overlap=true
model_matches portable_llama_c2 2 $P $LLAMA --parallel.context=2
# 40 × 32 rows: the weight gradients' K past the GEMM peak's 1024.
model_matches portable_1280_rows 1 $P --train.micro_batch=40 --train.global_batch=40
model_matches portable_1280_rows_t2_sp_overlap 2 $P --train.micro_batch=40 --train.global_batch=40 --parallel.tensor=2 \
  $SP --parallel.tp_comm_overlap=true

# memory.budget_gb and recompute = auto: budgets between the modes' totals select each mode.
total_of() { estimate 1 --memory.recompute="$1" ${2:+--memory.recompute_interval=$2} | sed -n 's/.*total=\([0-9]*\).*/\1/p'; }
none=$(total_of none) selective=$(total_of selective) full=$(total_of full)
gb() { awk -v b="$1" 'BEGIN { printf "%.9f", b / 1e9 }'; }
chooses() {  # chooses NAME BUDGET_BYTES EXPECTED_MODE
  local out
  out=$(mpirun -q -np 1 "$TRIDENT" train m.deck --memory.recompute=auto --memory.budget_gb="$(gb "$2")" --check 2>&1)
  if grep -q "recompute $3 .*memory.recompute = auto" <<< "$out"; then pass "$1 ($(grep -o 'total [0-9.]* MiB; recompute [a-z_]*' <<< "$out"))"
  else fail "$1" "expected $3: $(grep -E 'memory per rank|error' <<< "$out")"; fi
}
chooses recompute_auto_none $((none + 1000)) none
chooses recompute_auto_selective $(((none + selective) / 2)) selective
chooses recompute_auto_full $(((selective + full) / 2 < full + 1000 ? full + 1000 : (selective + full) / 2)) '\(full\|every_k\)'
expect_user_error recompute_auto_does_not_fit 'does not fit|memory.budget_gb|even full recompute needs' \
  "$TRIDENT" train "$WORK/m.deck" --memory.recompute=auto --memory.budget_gb="$(gb $((full / 2)))"
expect_user_error recompute_auto_needs_budget 'memory.budget_gb is 0|memory.recompute' \
  "$TRIDENT" train "$WORK/m.deck" --memory.recompute=auto
# K = sqrt(2 x available / one block's activations), available = budget - what recompute cannot
# change: a budget of that plus 5 blocks gives floor(sqrt(10)) = 3 (12 blocks, so no clamping).
line=$(estimate 1 --model.layers=12 --memory.recompute=full)
fixed=$($PY -c "
d = dict(kv.split('=') for kv in '$line'.split())
print(int(d['total']) - int(d['activations']))")
block=$(sed -n 's/.*block_activations=\([0-9]*\).*/\1/p' <<< "$line")
out=$(mpirun -q -np 1 "$TRIDENT" train m.deck --model.layers=12 --memory.recompute=every_k --memory.recompute_interval=0 \
  --memory.budget_gb="$(gb $((fixed + 5 * block)))" --check 2>&1)
grep -q "recompute every_k K = 3 (memory.recompute_interval = 0: K = sqrt" <<< "$out" &&
  pass "recompute_interval_auto (fixed $fixed B, block $block B: K = 3)" ||
  fail recompute_interval_auto "$(grep -E 'memory per rank|error' <<< "$out")"
