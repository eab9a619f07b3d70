// The analytic memory model: the bytes each rank holds per category (tensor/buffer.hpp), from
// the model shape, the layout, the micro-batch and its count, the schedule, the recompute mode
// and ZeRO — derived buffer by buffer from what our code allocates (model/transformer.cpp,
// dp/reducer.cpp, optim/adamw.cpp, ckpt/checkpointer.cpp), so it is exact, not a fit; tests
// hold it to the tracked peaks of real runs (tests/e2e/memory.sh).
//
// Activations of one block per micro-batch, in values, with b = B·T, C the width, p the tensor
// size, a = heads/p, T the sequence (Korthikanti et al. 2022 count 34·b·C + 5·a·b·T bytes in
// 16 bit with dropout; ours keep a different set):
//   4·b·C (ln1 out, residual after attention, ln2 out, block output) + 4·b (LayerNorm stats)
//   + 3·b·C/p (q, k, v) + b·C/p (attention output) + 8·b·C/p (MLP up, GELU out)
//   + a·b·T (attention probabilities; none with selective recompute)
// 4 bytes each in fp32; in bf16/fp16 2 bytes each, but the statistics and the stage's last
// block output stay f32 (4 bytes), and there is one f32 working set of a block (everything
// but statistics, output, the norms' outputs and GELU's, which are written where they are
// kept), two f32 (b, C) residual-stream buffers and a 16-bit scratch for
// the widest output gradient of a block (b·max(C, 4C/p); the head's is narrowed in place).
// A stage keeps one set per micro-batch it holds at once (1F1B: min(m, p − stage), GPipe: m);
// full / every-K recompute keeps only segment-ending block outputs (b·C) per micro-batch plus K
// working sets; selective keeps everything but the probabilities, recomputed into one shared
// (a·b·T) f32 buffer (and, in bf16, its 16-bit copy). Backward's gradient scratch is one f32
// set per stage. The last stage keeps the final LayerNorm's output (16-bit in bf16/fp16), and
// the logits (b·Vp/p) and the losses in f32 — with the chunked classifier no logits but the
// final LayerNorm's output gradient (b·C) per micro-batch, and one (min(chunk, b)·Vp/p) f32
// buffer for all. Widened 16-bit GEMMs (always fp16: oneDNN 2.6
// has no f16 CPU matmul; bf16 where the CPU has no bf16 matmul, or kernels.low16_gemm =
// widened) widen their operands into one f32 workspace, as large as the largest need: a linear
// backward's dy, x and w (M·N + M·K + N·K floats) and, in bf16, the attention backward's q, k, v
// and dy (4·b·C/p).
// Sequence parallelism (tensor > 1): the four (b, C) tensors, the statistics, the stage input,
// the residual stream and the stage's input gradient hold b/p rows; the final LayerNorm's output
// stays (b, C) (gathered for the classifier), and one (b, C) buffer of the stored type holds a
// column-parallel input gathered. Per block that is Korthikanti et al.'s sbh·34/t + 5as²b/t
// (their Table 2) without dropout's masks and outputs: 32·b·C/p stored values + the attention
// probabilities / p, in 16 bit.
// Context parallelism (c > 1, flash attention): every activation holds seq_len/c rows of each
// sequence (the ring's four (b/c, 2C/p) travelling buffers are the MLP's gradient scratch), and
// on the first stage the position table's rows and their gradient (2 · (T/c, C) f32).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "model/config.hpp"
#include "model/params.hpp"
#include "plan/hardware.hpp"
#include "pipeline/schedule.hpp"
#include "tensor/buffer.hpp"

namespace trident::plan {

struct MemoryInputs {
  model::GptConfig config;
  int tensor = 1, pipeline = 1, data = 1;
  std::vector<int> stage_layers;  // blocks per stage
  int micro_batch = 1, seq_len = 1, micro_batches = 1;  // micro-batches per step on a replica
  bool sequence_parallel = false;  // parallel.sequence_parallel with tensor > 1: rows / tensor outside the GEMMs
  int context = 1;                 // parallel.context: seq_len / context rows of each sequence per rank
  bool tp_comm_overlap = false;    // with sequence parallelism: the reduce-scatter ring's (b/p, C) block
  pipeline::Schedule schedule = pipeline::Schedule::OneFOneB;
  int virtual_stages = 1;          // model chunks per stage (interleaved 1F1B)
  std::vector<int> chunk_layers;   // interleaved: blocks per virtual stage (pipeline · virtual_stages)
  std::string recompute = "none";  // none, selective, every_k, full
  bool flash_attention = false;    // model.attention = flash: row statistics, not probabilities
  int classifier_chunk = 0;        // model.classifier_chunk: (chunk, Vp/p) logits, not (b, Vp/p)
  int recompute_interval = 1;      // K of every_k
  // TorchTitan's checkpointing (plan::Workload::torchtitan_recompute): every_k keeps everything of
  // all blocks but one in K, which keeps its input; selective counted as keeping everything (an
  // upper bound: its per-op AC frees the element-wise outputs and every second matmul's).
  bool torchtitan_recompute = false;
  // ZeRO-3 as FSDP runs it (plan::Workload::fsdp_prefetch; TorchTitan's FSDP2, Megatron-FSDP):
  // the embeddings and head sharded like the blocks, two blocks gathered (the one computing, the
  // next prefetched), two gradient buckets in flight. Trident's (dp/parameter_shards.hpp) keeps
  // the tensors outside the blocks whole, their gradients too, and two slots of each.
  bool fsdp = false;
  int zero = 0;  // ZeRO stage (plan::Layout::zero): 0 to 3, as trident train runs them
  double bucket_mb = 25;
  int64_t grad_bytes = 4;  // comm.grad_dtype's element: the packing buffer's
  bool async_checkpoint = false;
  std::string precision = "fp32";  // fp32, bf16, fp16 (optim.precision)
  bool low16_widened = true;       // bf16/fp16: GEMM operands widened to f32 (kernels::widens_low16)
  // The CPU's kernels (kernels::Backend::runs_cpu_kernels), and their workspaces: in 16 bits the
  // f32 sums of the GEMMs whose outputs are kept in 16 bits, the norms' f32 values. A GPU's kernels
  // write those themselves.
  bool cpu_kernels = true;
  // Trident's CUDA kernels (kernels.device = cuda; a GPU profile's plan of trident train), and
  // their workspaces: cuBLASLt's, and in 16 bits the biases its epilogues read in the output's
  // type (GPT-2's GELU layer's with cuda.gelu_epilogues = auto: gelu_epilogues).
  bool cuda_kernels = false;
  bool gelu_epilogues = true;
  bool portable_arithmetic = false;  // kernels.arithmetic = portable: the CPU's LayerNorm backward needs no workspace
  int cpu_threads = 1;               // a rank's OpenMP threads: the CPU kernels' per-thread workspaces, each
  // comm.node_algo = shm: per stage, the most shared windows one of its ranks holds (tensor,
  // data and embedding groups), each SharedWindow::bytes_per_rank(kCapacity); empty: none.
  std::vector<int> shared_windows;
};

constexpr int kCategories = static_cast<int>(MemoryCategory::Count);

struct MemoryEstimate {
  std::array<int64_t, kCategories> bytes{};
  // At most how many buffers are alive at once (metrics.h5's memory/buffers_peak): each kept
  // block's 13 (layer_bytes' tensors), each slot's input and segment outputs, and a bound on the
  // rest (kBuffersBesideBlocks). On a GPU each is one cudaMalloc, rounded up to the driver's
  // pages: the step model's allocation slack.
  int64_t buffers = 0;
  int64_t total() const;
};

// Buffers outside the pipeline's slots — parameters, gradients, optimizer state, the working set,
// the reducer's, ZeRO's shards and slots, checkpoint staging, the step's tokens: at most 40 in
// the layouts e2e/memory.sh runs (whose every case holds the count below the measured peak),
// bounded here with room to spare.
constexpr int64_t kBuffersBesideBlocks = 48;
// A kept block's buffers: its three (rows, C) tensors, qkv, the attention's output, the MLP's
// input and activation, the output, the four row statistics and the attention's kept scores or
// row statistics (layer_bytes in memory_model.cpp, model/transformer.cpp allocate_layer).
constexpr int64_t kBuffersPerKeptBlock = 13;

// What a stage's estimate needs that depends on less than the whole layout, kept for the next
// estimates of the same model and comm.bucket_mb: each slice of the model a stage holds (by
// tensor split, blocks, first and last stage, the buckets' packing, 16 bits or not) its
// parameters, those a 16-bit model also holds in f32 and its gradient buckets' sizes as the
// reducer packs them (dp::plan_buckets, or ZeRO-2's and 3's dp::plan_block_buckets; none without
// data parallelism); each schedule's slots (by schedule, stages, micro-batches,
// chunks and stage; pipeline::chunk_slots); and for the step model (plan::estimate_step) each
// stage's widest tensor and data group. A layout search estimates thousands of layouts over a few
// dozen of each, and packing the buckets, playing the schedule and placing every group on the
// nodes were most of each estimate. One per model and bucket size (search_layouts keeps one).
class EstimateCache {
 public:
  struct Slice {
    int64_t parameters = 0, f32_reads = 0;
    int64_t outside = 0, one_block = 0;  // with ZeRO-2 and 3: outside the blocks, of one block
    std::vector<int64_t> buckets;        // elements, in the reducer's order
  };
  const Slice& slice(const MemoryInputs& in, const model::Partition& part);
  // Per model chunk: the micro-batches whose activations stage `stage` holds at once.
  const std::vector<int>& slots(const MemoryInputs& in, int stage);
  // Tensor groups or not (data), tensor size, gradient group, stage, the profile's devices per
  // node and nodes per rack: the shape `make` returns the first time a key is asked.
  using GroupKey = std::tuple<bool, int, int, int, int, int>;
  const GroupShape& widest_group(const GroupKey& key, const std::function<GroupShape()>& make);

 private:
  std::map<std::tuple<int, int, bool, bool, int, bool>, Slice> slices_;
  std::map<std::tuple<pipeline::Schedule, int, int, int, int>, std::vector<int>> slots_;
  std::map<GroupKey, GroupShape> groups_;
};

// One rank of pipeline stage `stage` (the largest over its tensor and data ranks). `cache`: one
// kept across estimates of the same model (none: one for this estimate).
MemoryEstimate estimate_stage(const MemoryInputs& in, int stage, EstimateCache* cache = nullptr);
// Per category, the largest over all ranks (what metrics.h5's memory/<category>_peak_bytes
// records); `busiest_total`: the largest per-rank total.
MemoryEstimate estimate_busiest(const MemoryInputs& in, int64_t* busiest_total = nullptr, EstimateCache* cache = nullptr);
// Activation bytes of one block for one micro-batch, everything kept (the K formula's unit).
int64_t block_activation_bytes(const MemoryInputs& in);

}  // namespace trident::plan
