// The cost model of one training step for a layout on a hardware profile: per-rank memory (the
// exact memory model, from shapes only), compute time from FLOPs, tensor / pipeline / data /
// embedding communication per level from the collectives' byte formulas (docs/COMMUNICATION.md)
// and the profile's α-β links, the pipeline bubble, and the part of the data-parallel reduction
// that overlap hides. Every formula is in docs/PLANNER.md. Nothing model-sized is allocated.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "plan/hardware.hpp"
#include "plan/memory_model.hpp"

namespace trident::plan {

struct Workload {
  model::GptConfig config;
  int seq_len = 1;
  int64_t global_batch = 1;  // sequences per optimizer step
  // model.attention = flash: in the memory model, row statistics instead of the probabilities;
  // in the step's time no T×T traffic, and the backward's products as trident_flash_backward says.
  bool flash_attention = false;
  // The flash attention's backward as Trident runs it: on a GPU two kernels, one per query tile
  // and one per key tile, each recomputing the scores so that no gradient needs atomics (7
  // products: 3.5 passes of the forward's two); on the CPU one (5: 2.5). Others' FlashAttention-2
  // backward stays counted as the materialized one's 2 passes, as when gemm_fraction was fitted to
  // their published runs (docs/PLANNER.md).
  bool trident_flash_backward = true;
  // cuda.attention_kernel = auto: on a GPU, a 16-bit model's whole sequences (no context
  // parallelism) run on cuDNN's fused attention, a FlashAttention-2 — counted as others' (2).
  bool library_attention = true;
  // cuda.gelu_epilogues = auto: on a GPU a 16-bit GPT-2 MLP's GELU runs in its input layer's GEMM
  // (cuBLASLt's GELU_AUX_BIAS epilogue: the pre-activation an auxiliary 16-bit output) and GELU's
  // derivative in the output layer's input-gradient GEMM (DGELU), so the activation is no
  // element-wise pass of its own; what stays: the auxiliary output written and read, and the
  // input layer's bias gradient summed from the 16-bit dpre (kernels/cuda/matmul.cu).
  bool gelu_epilogues = true;
  // Megatron-LM's bias-GELU is a fused element-wise kernel of its own (--bias-gelu-fusion), read
  // and write the 4h-wide activation forward and back, as Trident's on a CPU or in f32.
  bool bias_gelu_pass = false;
  // The loss's element-wise row passes over the last stage's logits (loss_bytes in
  // step_model.cpp), Trident's. Megatron-LM's and TorchTitan's losses stay inside the gemm_fraction
  // fitted to their published runs, which did not count them.
  bool loss_passes = true;
  // Trident's own CUDA kernels on a GPU profile: their workspaces (cuBLASLt's, the 16-bit
  // epilogues' biases) in the memory model (plan::MemoryInputs::cuda_kernels). Others' are inside
  // the profile's reserved memory, as measured for them.
  bool trident_kernels = true;
  // model.classifier_chunk: tokens per chunk of the fused classifier (0: the whole logits), in
  // the memory model (a training step computes the same GEMMs either way).
  int classifier_chunk = 0;
  // Attention and hidden dropout, as Megatron-LM trains (its defaults 0.1 / 0.1): element-wise
  // passes and masks our blocks do not have (Trident has no dropout). For modelling others' runs.
  bool dropout = false;
  // Bytes per activation element in the tensor all-reduces and the pipeline's messages. Trident
  // sends them in f32 in every precision (model/tensor_parallel.cpp, pipeline/runner.cpp: the
  // activations are computed in f32, and 16-bit sums would round at every hop); Megatron-LM
  // sends its 16-bit activations (2). For modelling others' runs, like `dropout`.
  double activation_message_bytes = 4;
  // Bytes per value of the element-wise passes (LayerNorm, GELU, softmax, residual adds) in
  // 16-bit training. Trident computes every such pass in f32 and rounds only what it keeps
  // (docs/PRECISION.md), so its passes move f32 values in every precision; Megatron-LM's fused
  // kernels read and write 16-bit values (2). With 2 the step model predicted Trident's bf16 data-
  // parallel step 20-24% fast (tests/e2e/plan.sh); f32 steps are unaffected.
  double elementwise_value_bytes_low16 = 4;
  // Megatron-LM's scatter/gather of pipeline messages (Narayanan et al. 2021, §4.1; on unless
  // --no-scatter-gather-tensors-in-pipeline): the t tensor ranks hold the same (b, T, C)
  // activation, so each sends a t-th of it to its peer on the next stage and the receivers
  // all-gather the pieces over the node's links. Trident sends the whole activation from every
  // tensor rank (pipeline/runner.cpp) unless sequence parallelism has already split its rows.
  bool pipeline_scatter_gather = false;
  // TorchTitan's activation checkpointing (torchtitan/distributed/activation_checkpoint.py) under
  // the same names as Trident's modes, for modelling its runs. every_k with interval K is its
  // per-layer selective AC: one block in K wrapped whole and recomputed in its backward, the others
  // keeping everything (Trident's every_k keeps every K-th block's input and recomputes them all).
  // selective is its per-op AC: a block keeps its matmuls' outputs except every second one, the
  // attention's output and the reduce-scatters'; the other matmuls, the element-wise passes and the
  // all-gathers run again (Trident's selective recomputes the attention probabilities alone).
  bool torchtitan_recompute = false;
  // FSDP's prefetch (TorchTitan's FSDP2, Megatron-FSDP): under ZeRO-3 the next block's parameters
  // are gathered behind the current block's compute, and the embedding and head are gathered and
  // scattered every micro-batch. Trident (dp/parameter_shards.hpp) gathers a block when its pass
  // begins, where neither of its two slots holds it, and the tensors outside the blocks once a step.
  bool fsdp_prefetch = false;
  // Sequence parallelism's backward all-gathers each LayerNorm output again for the weight
  // gradients of the GEMMs that read it (Trident's blocks and Megatron-LM keep the rank's rows
  // alone). TorchTitan's DTensor autograd keeps the gathered input instead, unless its activation
  // checkpointing recomputes the all-gather (Workload::torchtitan_recompute's `collectives`).
  bool sequence_parallel_regathers = true;
  // How far parallel.tp_comm_overlap reaches. Trident and Megatron-LM (its userbuffers) overlap
  // every sequence-parallel collective with its GEMM. TorchTitan's async TP is PyTorch's micro-
  // pipeline pass (torch/_inductor/fx_passes/micro_pipeline_tp.py): it fuses an all-gather with
  // the matmuls that read it as their left operand and a reduce-scatter with the one matmul whose
  // output it scatters; in the backward the input gradients of [wq | wk | wv] and of [w1 | w3] are
  // sums of three and two matmuls, so their two reduce-scatters a block stay unfused and exposed.
  bool tp_overlap_backward_scatters = true;
  // Sequence parallelism's all-gathers move the values as the model stores them where its
  // activation messages are f32 (Trident in 16-bit precision: the GEMMs' gathered inputs, the
  // re-gathers and the row-parallel layers' output gradients, written rounded by the norms'
  // backward, travel in 16 bits; the reduce-scatters, the embedding's gradient and the pipeline's
  // messages in f32). Megatron-LM and TorchTitan have 16-bit messages throughout. Trident's, as the
  // other defaults here: what `trident train`'s own layout choice and figures use.
  bool sequence_parallel_gathers_stored = true;
};

// Whose costs the model charges where implementations of the same layout differ (`trident plan
// --as`): Trident's own, the default and what `trident train` runs; Megatron-LM's — attention
// and hidden dropout, 16-bit activations in the tensor all-reduces and pipeline messages, fused
// 16-bit element-wise kernels, the scatter/gather of pipeline messages —; or TorchTitan's — 16-bit
// activations in the collectives, torch.compile's fused 16-bit element-wise kernels, its
// activation checkpointing (Workload::torchtitan_recompute), DTensor's kept all-gathered inputs
// and async TP's reach (Workload::sequence_parallel_regathers, tp_overlap_backward_scatters) —,
// and either's FSDP prefetch (Workload::fsdp_prefetch), for predicting their published runs.
// Everything else (the
// distributed optimizer, sequence and context parallelism, interleaving, the tensor-parallel
// overlap, the schedules) is a layout setting that both have.
enum class Implementation { trident, megatron, torchtitan };
// "trident" | "megatron" | "torchtitan"; std::invalid_argument for another name.
Implementation parse_implementation(const std::string& name);
const char* implementation_name(Implementation who);
// The Workload's implementation fields set to `who`'s.
void model_implementation(Workload& w, Implementation who);

struct Layout {
  int tensor = 1, pipeline = 1, data = 1;
  int micro_batch = 1;
  // ZeRO stage (optim.zero; trident train runs each): 0 none; 1 the distributed optimizer (master
  // weights and moments sharded over the gradient group); 2 also shards the gradients, each
  // block's reduce-scattered after every micro-batch's backward of it (ZeRO-2);
  // 3 also the parameters, each block's gathered before its forward and again before its
  // backward, its gradients reduce-scattered after (dp/parameter_shards.hpp; with
  // Workload::fsdp_prefetch the next block's gathered behind the current one's work, as FSDP).
  int zero = 0;
  std::string recompute = "none";  // none, selective, every_k, full
  int recompute_interval = 1;
  pipeline::Schedule schedule = pipeline::Schedule::OneFOneB;
  int virtual_stages = 1;          // model chunks per stage: interleaved 1F1B (schedule 1f1b)
  bool sequence_parallel = false;  // the rows outside the tensor-parallel GEMMs split over tensor (tensor > 1)
  int context = 1;                 // ranks each replica's sequences are split over (ring attention)
  bool tp_comm_overlap = false;    // sequence parallelism's collectives as rings beside the GEMMs
  std::string precision = "fp32";
  bool hierarchical = true;        // comm.algo auto/hierarchical; false: one flat ring
  bool overlap = true;             // comm.overlap (never with ZeRO-1: the reducer's rule)
  bool low16_widened = false;      // CPU only: 16-bit GEMM operands widened in a workspace
  bool cpu_kernels = false;        // the CPU's kernels: 16-bit GEMM outputs' f32 sums in a workspace
  int cpu_threads = 1;             // the CPU's kernels: OpenMP threads a rank, each with its workspace parts
  double bucket_mb = 25;
  double gradient_bytes = 4;       // comm.grad_dtype: bytes per gradient value on the wire (f32 4, bf16 2)
  std::vector<int> stage_layers;   // empty: the even split of the runtime
  int devices() const { return tensor * context * pipeline * data; }
  int gradient_group() const { return data * context; }  // the ranks that sum a stage's gradients
  bool splits_rows() const { return sequence_parallel && tensor > 1; }  // sequence parallelism in effect
  bool recomputes_blocks() const { return recompute == "full" || recompute == "every_k"; }  // forward runs twice
};

// Time of one micro-batch's forward + backward (and recompute) on one stage, by part.
struct StageTime {
  double compute_s = 0, elementwise_s = 0, tensor_s = 0, p2p_s = 0;
  double context_s = 0;  // the ring attention's messages the blocks' work does not hide
  double sharded_s = 0;  // ZeRO-2/3: the gathers and reduce-scatters of each micro-batch the work does not hide
  double total() const { return compute_s + elementwise_s + tensor_s + p2p_s + context_s + sharded_s; }
};

struct StepEstimate {
  bool feasible = true;
  std::string reason;              // why not: the overflowing categories and by how much
  MemoryEstimate memory;           // per category, the largest over ranks
  int64_t memory_total = 0;        // the busiest rank's total
  // Beside the tensors on a device: the runtime's reservation, NCCL's buffers for each of the
  // rank's communicators (Hardware::reserved_bytes, nccl_bytes_per_group) and the allocation
  // slack below; 0 on a CPU profile.
  double runtime_bytes = 0;
  // Of runtime_bytes, the bound on the pages cudaMalloc rounds each buffer up to (MemoryEstimate::
  // buffers × 2 MiB on a GPU profile; 0 on a CPU's).
  double allocation_slack_bytes = 0;
  int communicators = 0;           // the rank's groups of more than one rank, the world's included
  double headroom_bytes = 0;       // device memory − memory_total − runtime_bytes (negative: overflow)
  int micro_batches = 0;           // per replica per step
  std::vector<StageTime> stages;   // per micro-batch, per stage
  double pipeline_s = 0;           // forward/backward of all micro-batches, bubble included
  double bubble_s = 0;             // the idle part of pipeline_s on the slowest stage
  double data_s = 0, data_exposed_s = 0;  // the gradient reduction, and the part not hidden
  double embedding_s = 0, optimizer_s = 0;
  double step_s = 0;
  std::array<double, 3> data_bytes{}, tensor_bytes{}, pipeline_bytes{};  // per rank per step, per level
  double model_flops = 0;          // per step, all devices: 3 passes, no recompute
  double hardware_flops = 0;       // per step, all devices: recompute included
  double tokens_per_s = 0;
  double tflops_per_device = 0;    // model FLOPs / step / devices
  double hardware_tflops_per_device = 0;  // the figure Megatron papers publish (recompute counted)
  double mfu = 0;                  // model FLOP/s / (devices × peak)
};

// The memory model's inputs for a layout (stage_layers resolved, micro-batches from the batch).
MemoryInputs memory_inputs(const Workload& w, const Layout& l);

// Checks the layout against the workload the way deck validation does; "" if it is runnable,
// else what is wrong ("model.heads 12 is not divisible by tensor 8").
std::string layout_problem(const Workload& w, const Layout& l);

// `cache`: one kept across the estimates of the workload (a search's); none: one for this estimate.
StepEstimate estimate_step(const Workload& w, const Layout& l, const Hardware& hw, EstimateCache* cache = nullptr);

// The shape of a group of world ranks under the tp-dp-pp rank order and the profile's nodes and
// racks.
GroupShape group_shape(const std::vector<int>& ranks, const Hardware& hw);

// Seconds of one all-reduce of `bytes` over a group of that shape: hierarchical (reduce-scatter
// in the node, all-reduce across nodes and racks on 1/k of the data, all-gather) or one flat
// ring at the speed of the slowest level it crosses. `level_bytes` accumulates bytes sent.
double all_reduce_seconds(double bytes, const GroupShape& g, const Hardware& hw, bool hierarchical,
                          std::array<double, 3>* level_bytes = nullptr);

}  // namespace trident::plan
