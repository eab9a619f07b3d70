// The memory model, buffer by buffer.
#include "plan/memory_model.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

#include "comm/collective_settings.hpp"
#include "dp/gpt2_segments.hpp"
#include "kernels/kernels.hpp"
#include "metrics/progress.hpp"
#include "model/block_parts.hpp"
#include "model/params.hpp"
#include "pipeline/schedule.hpp"

namespace trident::plan {
namespace {

constexpr int64_t kFloat = sizeof(float);

int index(MemoryCategory c) { return static_cast<int>(c); }

bool low(const MemoryInputs& in) { return in.precision == "bf16" || in.precision == "fp16"; }
// GPT-2's MLP input layer and GELU in one operation each way (linear_gelu_forward / _backward).
bool gelu_layer(const MemoryInputs& in) {
  return model::block_parts(in.config).activation == model::ActivationPart::gelu;
}
// The qkv GEMM writes the kept q, k, v itself: the flash attention reads them as kept, learned
// positions rotate nothing (Transformer::qkv_written_kept, in 16 bits).
bool qkv_written_kept(const MemoryInputs& in) {
  return in.flash_attention && model::block_parts(in.config).learned_positions();
}
int64_t stored_bytes(const MemoryInputs& in) { return low(in) ? 2 : kFloat; }  // a kept value

// probs: a block's attention probabilities (B, NH/p, T, T), none with flash attention, which
// keeps lse (B, NH/p, T) instead.
// chunk: rows of the chunked classifier's logits (0: the whole classifier).
// rows: the token rows a rank holds outside the parallel GEMMs (LayerNorms, residual stream,
// stage boundary): BT, or BT/tensor with sequence parallelism.
// qkv, fc, hidden: a rank's widths of the qkv GEMM's output (3C/p; llama's q and its grouped k
// and v), of the MLP's input GEMM (4C/p; llama's [gate | up], 2F/p) and of its activation (4C/p;
// F/p). grouped: llama's key/value heads fewer than its query heads (for the materialized
// attention the expanded copy and the summed gradient in backward; the flash attention reads
// them as they are). ring: the columns of context parallelism's travelling (k, v) blocks, a rank's
// key/value heads' 2·kv·hs.
struct Sizes {
  int64_t BT, C, Cl, probs, lse, vocab_rows, chunk, rows, qkv, fc, hidden;
  bool grouped;
  int64_t T, hs;  // a rank's rows of a sequence, a head's channels
  int64_t ring;
};
Sizes sizes(const MemoryInputs& in) {
  const int64_t T = in.seq_len / in.context, BT = int64_t(in.micro_batch) * T, C = in.config.channels;
  const int64_t heads = in.config.heads / in.tensor, Cl = C / in.tensor;
  const int64_t qkv = model::qkv_rows_local(in.config, in.tensor);  // [q | k | v]: the ring's (k, v) after q's Cl
  const bool flash = in.flash_attention;
  return {BT, C, Cl, flash ? 0 : BT * heads * T, flash ? BT * heads : 0,
          int64_t(in.config.padded_vocab) / in.tensor, std::min<int64_t>(in.classifier_chunk, BT),
          in.sequence_parallel ? BT / in.tensor : BT, qkv,
          model::fc_rows(in.config) / in.tensor, model::mlp_hidden(in.config) / in.tensor,
          model::kv_heads_local(in.config, in.tensor) != heads, T, C / in.config.heads, qkv - Cl};
}

// Bytes of one block's kept activations (model/transformer.cpp allocate_layer, Role::Kept): the
// statistics in f32, the output in f32 when output_f32 (a stage's last block), the rest stored.
int64_t layer_bytes(const MemoryInputs& in, bool attention_kept, bool output_f32) {
  const Sizes z = sizes(in);
  const int64_t stored = 3 * z.rows * z.C + z.BT * z.qkv + z.BT * z.Cl + z.BT * (z.fc + z.hidden) +
                         (attention_kept ? z.probs : 0) + (output_f32 ? 0 : z.rows * z.C);
  return stored * stored_bytes(in) + (4 * z.rows + z.lse) * kFloat + (output_f32 ? z.rows * z.C * kFloat : 0);
}

// bf16/fp16: the f32 working set of one block (Role::Working), the residual stream, and the
// 16-bit scratch of the widest output gradient.
int64_t low_working_bytes(const MemoryInputs& in, int stage, bool selective) {
  if (!low(in)) return 0;
  const Sizes z = sizes(in);
  // GELU's output is written where it is kept (linear_gelu_forward): in the working set SwiGLU's only.
  // The norms write their kept outputs too: of the (rows, C) buffers only residual2 is there.
  // So does its input GEMM, and so does the qkv GEMM where the flash attention reads q, k, v as kept.
  const int64_t mlp = gelu_layer(in) ? 0 : z.fc + z.hidden;
  const int64_t qkv = qkv_written_kept(in) ? 0 : z.qkv;
  // The flash attention writes its output where it is kept, but for context parallelism's f32 folding.
  const int64_t atty = in.flash_attention && in.context == 1 ? 0 : z.BT * z.Cl;
  const int64_t working = z.rows * z.C + z.BT * qkv + atty + z.BT * mlp + (selective ? 0 : z.probs);
  return (working + 2 * z.rows * z.C) * kFloat + z.BT * std::max({z.C, z.qkv, z.fc}) * 2;
}

// The recompute's segment of K blocks: 1 full, the interval every_k, 0 without (or selective).
int recompute_segment(const MemoryInputs& in) {
  return in.recompute == "full" ? 1 : in.recompute == "every_k" ? in.recompute_interval : 0;
}

// Σ over the stage's model chunks (one without the interleaved schedule) of its slots
// (pipeline::chunk_slots) times per_slot(the chunk's blocks).
int64_t over_slots(const MemoryInputs& in, int stage, const std::vector<int>& slots,
                   const std::function<int64_t(int)>& per_slot) {
  const int chunks = in.virtual_stages;
  int64_t sum = 0;
  for (int j = 0; j < chunks; ++j)
    sum += slots[j] * per_slot(chunks > 1 ? in.chunk_layers[j * in.pipeline + stage] : in.stage_layers[stage]);
  return sum;
}

// Per model chunk (one without the interleaved schedule) its slots (pipeline::chunk_slots), each
// the chunk's blocks and input; the head's buffers in the last chunk's slots of the last stage.
int64_t activation_bytes(const MemoryInputs& in, int stage, const std::vector<int>& slots) {
  const Sizes z = sizes(in);
  const int chunks = in.virtual_stages;
  const bool selective = in.recompute == "selective" && !in.torchtitan_recompute;
  const int K = recompute_segment(in);
  auto slot_bytes = [&](int L) {  // a slot of a chunk of L blocks
    int64_t slot = z.rows * z.C * kFloat;  // stage input
    if (in.torchtitan_recompute && K > 0) {  // blocks K, 2K, ... keep their input alone
      for (int l = 0; l < L; ++l)
        slot += (l + 1) % K == 0 ? z.rows * z.C * stored_bytes(in) : layer_bytes(in, true, l == L - 1);
    } else if (K == 0) {
      for (int l = 0; l < L; ++l) slot += layer_bytes(in, !selective, l == L - 1);
    } else {
      for (int l = 0; l < L; ++l)  // segment-ending outputs; the chunk's last in f32
        if ((l + 1) % K == 0 || l == L - 1) slot += z.rows * z.C * (l == L - 1 ? kFloat : stored_bytes(in));
    }
    return slot;
  };
  const bool last = stage == in.pipeline - 1;
  int64_t head = 0;
  if (last)  // final LayerNorm (all rows) and its statistics (the rank's), the whole classifier's logits, losses
    head = z.BT * z.C * stored_bytes(in) + (2 * z.rows + 2 * z.BT) * kFloat +
           (z.chunk ? z.BT * z.C : z.BT * z.vocab_rows) * kFloat;  // chunked: the head's gradient
  const int64_t kept = over_slots(in, stage, slots, slot_bytes);  // every chunk's slots
  // Selective: one f32 probability buffer for all blocks, and in bf16 its 16-bit copy (P·V's operand).
  // bf16's materialized attention keeps a 16-bit copy of the probabilities where it reads the kept
  // q, k, v as they are (not grouped); a learned position table is read in chunks with context
  // parallelism; the ring's blocks borrow the MLP's gradient scratch where its widths hold two.
  const bool bf16_attention = in.precision == "bf16" && !z.grouped;
  const bool learned_positions = model::block_parts(in.config).learned_positions();
  const bool ring_in_mlp = z.fc >= 2 * z.ring && z.hidden >= 2 * z.ring;
  int64_t shared = K * layer_bytes(in, true, false) +
                   (selective ? z.probs * (kFloat + (bf16_attention ? 2 : 0)) : 0);
  // The GELU layer writes the gradient of its input in fc's operand type; the gradient of its
  // output exists only to carry the ring's blocks.
  const int64_t d_hidden = !gelu_layer(in) || (in.context > 1 && ring_in_mlp) ? z.hidden : 0;
  // The qkv gradient: the flash attention's of qkv's width, the materialized one's of every head's.
  const int64_t d_qkv = in.flash_attention ? z.qkv : 3 * z.Cl;
  shared += (3 * z.BT + 2 * z.BT * z.C + z.rows * z.C + z.BT * z.Cl + z.BT * d_qkv + z.BT * d_hidden + z.probs) *
                kFloat +
            z.BT * z.fc * (gelu_layer(in) ? stored_bytes(in) : kFloat);  // backward scratch
  if (z.grouped && !in.flash_attention)  // the materialized attention's expanded q, k, v; the summed gradient
    shared += 3 * z.BT * z.Cl * kFloat + z.BT * z.qkv * kFloat;
  if (in.sequence_parallel)  // the gathered GEMM input (stored type), the LayerNorm weight-gradient parts
    shared += z.BT * z.C * stored_bytes(in) + 2 * z.C * kFloat + (in.tp_comm_overlap ? z.rows * z.C * kFloat : 0);
  if (in.context > 1 && stage == 0 && learned_positions)  // the chunks' positions and their gradient
    shared += 2 * (in.seq_len / in.context) * z.C * kFloat;
  if (!learned_positions) shared += z.T * 4;  // rotary: each row's position in its sequence (int32)
  if (in.context > 1 && !ring_in_mlp) shared += 4 * z.BT * z.ring * kFloat;  // the ring's key/value blocks
  if (last) shared += z.chunk * z.vocab_rows * (kFloat + (low(in) ? 2 : 0));  // the chunked classifier's logits (dlogits)
  if (stage == 0 || last) shared += 2 * int64_t(in.micro_batches) * z.BT * 4;  // the step's tokens (pinned)
  // Each slot's tokens (model/transformer.cpp allocate_slot): the inputs on the first stage, the
  // targets and the loss sum (f64) on the last, which keeps each micro-batch's loss sum too.
  if (stage == 0) shared += slots.front() * z.BT * 4;
  if (last) shared += slots.back() * (z.BT * 4 + 8) + int64_t(in.micro_batches) * 8;
  shared += kernels::kStepScalars * int64_t(sizeof(double));                  // the step's scalars (trainer)
  // Interleaved: each slot sends its input gradient from a buffer of its own (pipeline/runner.hpp).
  if (chunks > 1) shared += std::accumulate(slots.begin(), slots.end(), int64_t{0}) * z.rows * z.C * kFloat;
  return kept + slots.back() * head + shared + low_working_bytes(in, stage, selective);
}

// The buffers activation_bytes counts: each slot's input — on the first stage its tokens and
// targets, on the last its targets, the final LayerNorm's output and statistics, logits or head
// gradient, losses, normalizers and loss sum (model/transformer.hpp, Transformer::Slot) —, each
// kept block's 13 (the input alone or a segment's output where it keeps one value), the
// recompute's one-segment set.
int64_t activation_buffers(const MemoryInputs& in, int stage, const std::vector<int>& slots) {
  const int K = recompute_segment(in);
  const int64_t slot_own = 1 + (stage == 0 ? 2 : 0) + (stage == in.pipeline - 1 ? 10 : 0);
  auto slot_buffers = [&](int L) {
    int64_t slot = slot_own;
    for (int l = 0; l < L; ++l) {
      if (K == 0) slot += kBuffersPerKeptBlock;
      else if (in.torchtitan_recompute) slot += (l + 1) % K == 0 ? 1 : kBuffersPerKeptBlock;
      else if ((l + 1) % K == 0 || l == L - 1) slot += 1;  // a segment's output
    }
    return slot;
  };
  return int64_t(K) * kBuffersPerKeptBlock + over_slots(in, stage, slots, slot_buffers);
}

// Widened 16-bit GEMMs: the one workspace (kernels/cpu/matmul.cpp), as large as the largest
// need — the operands of the largest linear backward, and in bf16 the attention backward's
// q, k, v and dy (kernels/cpu/attention.cpp; fp16's attention runs on f32 values).
int64_t widening_workspace_bytes(const MemoryInputs& in, int stage) {
  if (!low(in) || !in.low16_widened) return 0;
  const Sizes z = sizes(in);
  std::vector<std::pair<int64_t, int64_t>> linears = {{z.C, z.qkv}, {z.Cl, z.C}, {z.C, z.fc}, {z.hidden, z.C}};
  int64_t largest = in.precision == "bf16" ? 4 * z.BT * z.Cl : 0;
  for (const auto& [K, N] : linears) largest = std::max(largest, z.BT * N + z.BT * K + N * K);
  const int64_t head_rows = z.chunk ? z.chunk : z.BT;  // the tied head, over chunks when chunked
  if (stage == in.pipeline - 1)
    largest = std::max(largest, head_rows * z.vocab_rows + head_rows * z.C + z.vocab_rows * z.C);
  return largest * kFloat;
}

// The CPU's kernels in 16 bits: the f32 sums of the GEMMs whose output is kept in 16 bits, before
// their rounding (kernels/cpu/matmul.cpp rounding_workspace), as large as the largest — the GELU
// layer's both ways, the qkv GEMM's where the flash attention reads q, k, v as kept; under
// sequence parallelism's overlapped rings a block of rows at a time.
int64_t rounding_workspace_bytes(const MemoryInputs& in) {
  if (!low(in) || !in.cpu_kernels) return 0;
  const Sizes z = sizes(in);
  const int64_t rows = in.tp_comm_overlap ? z.BT / in.tensor : z.BT;
  int64_t largest = gelu_layer(in) ? rows * z.fc : 0;
  if (qkv_written_kept(in)) largest = std::max(largest, rows * z.qkv);
  return largest * kFloat;
}

// The CPU's norms (kernels/cpu/layernorm.cpp): oneDNN's LayerNorm backward writes (rows, C) + 2C
// values it then adds, and a 16-bit LayerNorm output is computed there in f32 first (either
// arithmetic); in 16 bits the norms' backward widens its 16-bit input, (rows, C), into a second.
int64_t norm_workspace_bytes(const MemoryInputs& in) {
  if (!in.cpu_kernels) return 0;
  const Sizes z = sizes(in);
  const bool layer_norm = model::block_parts(in.config).norm == model::NormPart::layer;
  int64_t floats = layer_norm && (low(in) || !in.portable_arithmetic) ? z.rows * z.C + 2 * z.C : 0;
  if (low(in)) floats += z.rows * z.C;
  return floats * kFloat;
}

// The CPU's rotary positions (kernels/cpu/llama.cpp rope): the (T, hs/2) cosines and sines of a
// rank's rows of a sequence.
int64_t rope_workspace_bytes(const MemoryInputs& in) {
  if (!in.cpu_kernels || model::block_parts(in.config).learned_positions()) return 0;
  const Sizes z = sizes(in);
  return z.T * z.hs * kFloat;
}

// Trident's CUDA kernels (kernels/cuda/matmul.cu): cuBLASLt's workspace for the one stream the
// model's GEMMs run on (workspace_of), and for a 16-bit GPT-2 the biases its epilogues read rounded
// to the 16-bit output (epilogue_bias: one buffer per output width) — the qkv GEMM's where it
// writes the kept q, k, v itself, the GELU layer's where its GELU is in the epilogue (its width a
// multiple of 8: cuBLASLt's rule for the auxiliary output). A shape cuBLASLt's heuristic declines
// runs unfused (said on stderr), on stream-ordered scratch that neither this nor the run's
// tracked peaks count, as cuDNN's workspace.
int64_t cuda_workspace_bytes(const MemoryInputs& in) {
  if (!in.cuda_kernels) return 0;
  int64_t bias_values = 0;
  if (low(in) && model::block_parts(in.config).biases) {
    const Sizes z = sizes(in);
    if (qkv_written_kept(in)) bias_values += z.qkv;
    if (gelu_layer(in) && in.gelu_epilogues && z.fc % 8 == 0) bias_values += z.fc;
  }
  return kernels::kCudaGemmWorkspaceBytes + bias_values * 2;
}

// kernels.arithmetic = portable: each thread's panel of the GEMM over the largest K
// (kernels::cpu_portable_gemm_thread_floats, kernels/cpu/portable.cpp) — a linear layer's input
// width forward, its output width for the input gradient, its rows for the weight gradient (the
// materialized attention's over T, the flash attention's tiles' over at most T, are fewer), on
// the last stage the classifier's vocabulary rows, and on the first (world rank 0, which writes
// metrics.h5) the n × n × n product the run's MFU peak is measured by at its start, in the run's
// arithmetic (metrics::measure_gemm_peak).
int64_t portable_gemm_workspace_bytes(const MemoryInputs& in, int stage) {
  if (!in.cpu_kernels || !in.portable_arithmetic) return 0;
  const Sizes z = sizes(in);
  int64_t K = std::max({z.C, z.Cl, z.qkv, z.fc, z.hidden, z.BT});
  if (stage == 0) K = std::max(K, int64_t(metrics::kCpuGemmPeakSize));
  if (stage == in.pipeline - 1) K = std::max(K, z.vocab_rows);
  return in.cpu_threads * kernels::cpu_portable_gemm_thread_floats(K) * kFloat;
}

// The CPU's kernels' per-thread parts of their workspaces (kernels/cpu/workspace.hpp), for each of
// a rank's OpenMP threads: the flash attention's tiles (kernels::cpu_flash_attention_thread_floats:
// the whole sequence, or context parallelism's blocks of half a rank's rows against the (k, v)
// buffers that travel the ring), and on the last stage in 16 bits the chunked classifier's f32 row
// of the loss gradient before it is rounded.
int64_t thread_workspace_bytes(const MemoryInputs& in, int stage) {
  if (!in.cpu_kernels) return 0;
  const Sizes z = sizes(in);
  int64_t floats = 0;
  if (in.flash_attention) {
    const bool ring = in.context > 1;
    floats += kernels::cpu_flash_attention_thread_floats(int(z.hs), z.qkv, ring ? z.ring : z.qkv,
                                                         int(ring ? z.T / 2 : z.T), low(in));
  }
  if (low(in) && z.chunk > 0 && stage == in.pipeline - 1) floats += z.vocab_rows;
  return floats * in.cpu_threads * kFloat;
}

// ZeRO-2 and 3 with data parallelism: a bucket per block, then the rest (dp::plan_block_buckets).
bool block_buckets(const MemoryInputs& in) { return in.zero >= 2 && in.data > 1; }

// The reducer's buckets (dp::GradientReducer): ZeRO-2's and 3's are the blocks and the rest.
std::vector<dp::Bucket> stage_buckets(const MemoryInputs& in, const model::Partition& part) {
  if (block_buckets(in))
    return dp::plan_block_buckets(dp::gpt2_slot_segments(in.config, part, {}, [](int) { return model::ParamViews{}; }),
                                  in.bucket_mb);
  return dp::plan_buckets(dp::gpt2_gradient_segments(in.config, part, nullptr), in.bucket_mb);
}

// A stage's gradient buckets as the data-parallel memory needs them (elements): the largest as
// the reducer packs it (with ZeRO padded to data·⌈E/data⌉) and what replica 0 owns under ZeRO,
// ⌈E/data⌉ of each (dp::owned_ranges).
struct BucketFigures {
  int64_t largest = 0, owned = 0;
};
BucketFigures bucket_figures(const MemoryInputs& in, const std::vector<int64_t>& buckets) {
  BucketFigures f;
  for (int64_t elements : buckets) {
    const int64_t share = dp::shard_part(elements, in.data);
    f.largest = std::max(f.largest, in.zero ? share * in.data : elements);
    f.owned += share;
  }
  return f;
}

// One rank of pipeline stage `stage`, its slice's figures and its slots from `cache`.
MemoryEstimate stage_estimate(const MemoryInputs& in, int stage, EstimateCache& cache) {
  MemoryEstimate e;
  const model::Partition part = model::stage_partition(in.stage_layers, stage, 0, in.tensor);
  const EstimateCache::Slice& slice = cache.slice(in, part);
  const BucketFigures bucket = bucket_figures(in, slice.buckets);
  const int64_t n = slice.parameters, f32_reads = slice.f32_reads;
  const int64_t shard = in.zero && in.data > 1 ? bucket.owned : n;  // the largest ZeRO shard
  // bf16/fp16: 16-bit parameters and the f32 copy of the tensors read in f32 (model/transformer.hpp);
  // the optimizer's fp32 master weights of its shard beside the two moments.
  e.bytes[index(MemoryCategory::Parameters)] = n * stored_bytes(in) + f32_reads * kFloat;
  e.bytes[index(MemoryCategory::Gradients)] = n * kFloat;
  if (in.zero >= 2 && in.data > 1) {
    // The tensors outside the blocks whole, two one-block slots (one filled by backward while
    // the other is reduce-scattered) and the own part's sums: ZeRO-2 and 3 (Transformer::set_gradient_slots).
    e.bytes[index(MemoryCategory::Gradients)] = (slice.outside + 2 * slice.one_block + shard) * kFloat;
  }
  if (in.zero == 3 && in.data > 1 && in.fsdp) {
    // FSDP: the own shard's f32 gradients and two buckets of full-size gradients in flight (one
    // filled by the backward while the other is reduce-scattered); the own shard of the
    // parameters and two blocks gathered whole (the one computing, the next prefetched), or the
    // embedding or head where one of those is larger; their f32 copies sharded too.
    e.bytes[index(MemoryCategory::Gradients)] = shard * kFloat + 2 * bucket.largest * in.grad_bytes;
    const int64_t block = model::block_parameters(in.config, in.tensor);
    const int64_t gathered = std::max(2 * block, n - block * part.num_layers);
    e.bytes[index(MemoryCategory::Parameters)] =
        (shard + gathered) * stored_bytes(in) + (f32_reads + in.data - 1) / in.data * kFloat;
  } else if (in.zero == 3 && in.data > 1) {
    // ZeRO-3 (dp::ParameterShards): the own part of every bucket, the tensors outside the blocks
    // whole, two one-block slots the blocks are gathered into; in 16 bits the f32 reads of the
    // outside tensors and of each slot.
    const int64_t outside = slice.outside, block = slice.one_block;
    const int64_t reads = low(in) ? model::outside_f32_read_count(in.config, part) +
                                        2 * model::one_block_f32_read_count(in.config, part)
                                  : 0;
    e.bytes[index(MemoryCategory::Parameters)] = (shard + outside + 2 * block) * stored_bytes(in) + reads * kFloat;
  }
  e.bytes[index(MemoryCategory::OptimizerState)] = (low(in) ? 3 : 2) * shard * kFloat;
  const std::vector<int>& slots = cache.slots(in, stage);
  e.bytes[index(MemoryCategory::Activations)] = activation_bytes(in, stage, slots);
  e.bytes[index(MemoryCategory::Workspace)] =
      widening_workspace_bytes(in, stage) + rounding_workspace_bytes(in) + norm_workspace_bytes(in) +
      rope_workspace_bytes(in) + thread_workspace_bytes(in, stage) + portable_gemm_workspace_bytes(in, stage) +
      cuda_workspace_bytes(in);
  // The reducer's packing buffer: the largest bucket; with ZeRO the parameters' gathering one
  // (the reducer's, ZeRO-3's shards'), and with ZeRO-2's and 3's 16-bit sums their f32 part.
  if (in.data > 1 && !(in.zero == 3 && in.fsdp)) {  // FSDP's buckets in flight are counted above
    e.bytes[index(MemoryCategory::Communication)] = bucket.largest * (in.grad_bytes + (in.zero ? stored_bytes(in) : 0));
    if (in.zero >= 2 && in.grad_bytes != kFloat)
      e.bytes[index(MemoryCategory::Communication)] += bucket.largest / in.data * kFloat;
  }
  if (!in.shared_windows.empty())  // comm.node_algo = shm: the windows' per-rank parts
    e.bytes[index(MemoryCategory::Communication)] +=
        in.shared_windows[stage] * static_cast<int64_t>(comm::shared_window_bytes_per_rank());
  if (model::kv_replicas(in.config, in.tensor) > 1)  // a block's replicated key/value heads' gradient sums
    e.bytes[index(MemoryCategory::Communication)] += model::kv_channels(in.config) * 2 * in.config.channels * kFloat;
  e.buffers = activation_buffers(in, stage, slots) + kBuffersBesideBlocks;
  if (in.async_checkpoint)  // staging copies of replica 0: its parameters (a 16-bit or ZeRO-3 master shard) and moments
    e.bytes[index(MemoryCategory::Checkpoint)] = ((low(in) || in.zero == 3 ? shard : n) + 2 * shard) * kFloat;
  return e;
}

}  // namespace

int64_t MemoryEstimate::total() const {
  int64_t sum = 0;
  for (int64_t b : bytes) sum += b;
  return sum;
}

int64_t block_activation_bytes(const MemoryInputs& in) { return layer_bytes(in, true, false); }

namespace {

// map[key], made by make() the first time the key is asked.
template <class Map, class Make>
const typename Map::mapped_type& remembered(Map& map, const typename Map::key_type& key, Make make) {
  auto found = map.find(key);
  if (found == map.end()) found = map.emplace(key, make()).first;
  return found->second;
}

}  // namespace

const EstimateCache::Slice& EstimateCache::slice(const MemoryInputs& in, const model::Partition& part) {
  const int packing = in.data == 1 ? 0 : block_buckets(in) ? 2 : 1;
  const auto key = std::make_tuple(in.tensor, part.num_layers, part.first_stage, part.last_stage, packing, low(in));
  return remembered(slices_, key, [&] {
    Slice s;
    s.parameters = model::num_parameters(in.config, part);
    s.f32_reads = low(in) ? model::f32_read_count(in.config, part) : 0;
    if (packing > 0)
      for (const dp::Bucket& b : stage_buckets(in, part)) s.buckets.push_back(b.elements);
    if (packing == 2) {
      s.outside = model::outside_block_count(in.config, part);
      s.one_block = model::one_block_count(in.config, part);
    }
    return s;
  });
}

const std::vector<int>& EstimateCache::slots(const MemoryInputs& in, int stage) {
  const auto key = std::make_tuple(in.schedule, in.pipeline, in.micro_batches, in.virtual_stages, stage);
  return remembered(slots_, key, [&] {
    return pipeline::chunk_slots(in.schedule, stage, in.pipeline, in.micro_batches, in.virtual_stages);
  });
}

const GroupShape& EstimateCache::widest_group(const GroupKey& key, const std::function<GroupShape()>& make) {
  return remembered(groups_, key, make);
}

MemoryEstimate estimate_stage(const MemoryInputs& in, int stage, EstimateCache* cache) {
  EstimateCache own;
  return stage_estimate(in, stage, cache ? *cache : own);
}

MemoryEstimate estimate_busiest(const MemoryInputs& in, int64_t* busiest_total, EstimateCache* cache) {
  MemoryEstimate busiest;
  int64_t total = 0;
  EstimateCache own;
  for (int stage = 0; stage < in.pipeline; ++stage) {
    const MemoryEstimate e = stage_estimate(in, stage, cache ? *cache : own);
    for (int c = 0; c < kCategories; ++c) busiest.bytes[c] = std::max(busiest.bytes[c], e.bytes[c]);
    busiest.buffers = std::max(busiest.buffers, e.buffers);
    total = std::max(total, e.total());
  }
  if (busiest_total) *busiest_total = total;
  return busiest;
}

}  // namespace trident::plan
