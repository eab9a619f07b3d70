// The transformer's runtime, for every architecture (model.arch: GPT-2 or the Llama family;
// the block's parts — norm, positions, MLP activation, biases — are model/block_parts.hpp's, the
// attention's grouping and the head's tying sizes of model/config.hpp; docs/MODEL.md), with
// explicit forward and backward over micro-batches: the serial model, or this rank's
// part of it — a tensor slice (heads, MLP rows and vocabulary split as model/tensor_parallel.hpp
// states) of a pipeline stage (blocks [first_layer, first_layer + num_layers), the embedding on
// the first stage, the final LayerNorm, head and loss on the last). With sequence parallelism
// (TensorGroup::sequence_parallel) the LayerNorms, the residual stream and what crosses a stage
// boundary hold this rank's B·T/tensor token rows only. Parameters and gradients
// each live in one allocation laid out as model/params.hpp says (ZeRO-2: the block gradients in
// one-block slots instead, set_gradient_slots). Activations are kept per
// micro-batch slot, so that a pipeline schedule can hold several micro-batches between their
// forward and their backward; they are sized for (B, T) and reallocated only when that changes.
//
// Memory and every operation on it go through the kernel backend of the Context
// (kernels/backend.hpp): buffers are allocated from it (MemoryKind::device, host memory on the
// CPU backend), cleared, uploaded (the tokens) and summed (the loss) by its calls.
//
// Mixed precision (bf16, fp16): the model's parameters are 16-bit values, what the GEMMs and the
// token lookup read; the fp32 master weights belong to the optimizer (optim/adamw.hpp, sharded
// over the data group with ZeRO), which writes the 16-bit values after each update. The biases,
// LayerNorm parameters and wpe — 1% of the parameters, read by f32 kernels — are read from an
// f32 copy of their 16-bit values, widened exactly at the first forward after the parameters
// were written. Activations are kept for backward in the 16-bit type: each
// is computed in f32 into one shared working set, rounded to nearest even, stored, and the f32
// kernels go on with the rounded values — so what backward reads (widened again) is exactly
// what forward used. Exceptions, kept in f32: LayerNorm statistics, the stage's input and its
// last block's output (what the pipeline sends and receives, rounded to 16-bit values), the
// logits (the cross-entropy turns them into their gradient in place) and the losses.
// Gradients are f32 and accumulate in f32. In bf16 every product is a bf16 GEMM, the attention
// core's too; fp16's run in f32 on the fp16 values.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/kernels.hpp"
#include "kernels/stream_intervals.hpp"
#include "model/block_parts.hpp"
#include "model/config.hpp"
#include "model/context_parallel.hpp"
#include "model/params.hpp"
#include "model/tensor_parallel.hpp"
#include "tensor/buffer.hpp"

namespace trident::model {

class Transformer {
 public:
  // tensor_group.slice is this rank's Partition (tensor slice and pipeline stage).
  // gradient_slots: set_gradient_slots's, from the start (no flat buffer allocated before).
  // parameter_slots: the blocks' parameters in that many one-block slots (ZeRO-3; see
  // set_block_gather), from the start: no whole parameter buffer is ever allocated.
  Transformer(const GptConfig& config, kernels::Context& ctx, const TensorGroup& tensor_group = {},
       kernels::Precision precision = kernels::Precision::fp32, int gradient_slots = 0, int parameter_slots = 0);
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;
  kernels::Precision precision() const { return gemm_.precision; }
  const TensorGroup& tensor_group() const { return tp_; }
  const Partition& partition() const { return tp_.slice; }
  const GptConfig& config() const { return config_; }
  int64_t num_parameters() const { return num_parameters_; }
  // The parameters, of the storage type (f32, or bf16/fp16), for writing (the optimizer; a
  // restore): the 16-bit model's f32 copy of its small tensors is widened again before the next
  // forward.
  Tensor parameters_to_write();
  // The parameters were written where parameter_memory says (ZeRO-3's gathers of the tensors
  // outside the blocks): the f32 reads are widened again before the next forward.
  void parameters_changed() { f32_reads_stale_ = true; }
  // The f32 parameters of an fp32 model, in host-addressable memory on the CPU backend (tests,
  // the optimizer); a 16-bit model has none (std::logic_error).
  float* params();
  // The f32 gradients: the flat buffer laid out as the parameters (model/params.hpp); with
  // gradient slots the tensors outside the blocks only (outside_block_views).
  float* grads() { return grads_.data(); }
  const ParamViews& gradient_views() const { return g_; }  // the block tensors null with slots
  // ZeRO-2 (optim.zero = 2): the block gradients in `slots` buffers of one block each, block l's
  // in slot l % slots, cleared as its backward begins — one micro-batch's gradient, which the
  // data-parallel reducer takes (on_final(l), a reduce-scatter) before the slot is used again;
  // grads() shrinks to the tensors outside the blocks, which accumulate over the step as
  // before. The old buffers are freed first. Not with deferred weight gradients (zb-h1: a
  // block's B and W passes apart). 0: every gradient in the flat buffer.
  void set_gradient_slots(int slots);
  // ZeRO-2: called with a slot's index before a block's backward writes it (the reducer's
  // GradientReducer::before_slot_reuse).
  void set_slot_reuse_hook(std::function<void(int)> hook) { slot_reuse_ = std::move(hook); }
  int gradient_slots() const { return static_cast<int>(grad_slots_.size()); }
  // Block l's gradient tensors, each at its layer l (in the flat buffer, or in l's slot).
  ParamViews block_gradients(int l) const;
  // ZeRO-3 (optim.zero = 3, the constructor's parameter_slots): the blocks' parameters, of the
  // storage type, in `slots` buffers of one block each (block l's in slot l % slots, laid out as
  // one_block_views), and the parameter buffer shrunk to the tensors outside the blocks
  // (embeddings, final norm, head), which stay whole. Before any pass of block l reads its
  // parameters — its forward, a recomputed forward, its backward — the model calls gather(l, next),
  // which makes block l's slot hold its parameters (dp::ParameterShards: an all-gather of the data
  // group's shards, or nothing where the slot holds them already) and says whether it wrote the
  // slot anew (a 16-bit model then widens the slot's f32 reads); next is the block the pass uses
  // after l (forward: l + 1 within the pass's blocks; backward: l − 1, or with recompute the
  // previous segment's first block; -1 at the end), which the gather may prefetch into the other
  // slot. No pass is recorded as a CUDA graph then (a replay would skip the gathers). fence: after
  // each pass, the Work that completes once the gathers the model's stream waited for have run
  // (dp::ParameterShards::fence), waited for as the tensor group's fence is (settle_communication).
  using BlockGather = std::function<bool(int layer, int next)>;
  using BlockFence = std::function<comm::Work()>;
  void set_block_gather(BlockGather gather, BlockFence fence) {
    gather_ = std::move(gather);
    gather_fence_of_ = std::move(fence);
  }
  int parameter_slots() const { return static_cast<int>(param_slots_.size()); }
  // Where tensor t's parameters of block `layer` (layer -1: a tensor outside the blocks, whole)
  // live now, of the storage type: in the flat buffer, or in the layer's parameter slot.
  Tensor parameter_memory(int layer, int t) const;
  // Where the parameters and grads() live (host memory on the CPU backend): host code reads or
  // writes them only through the two calls below, or kernels and communicators on this device.
  Device device() const { return params_.view().device; }
  // The stream the model's kernels run on, on its device: what communication of its buffers
  // (activations, gradients, parameters) is ordered on.
  Stream stream() const { return Stream{device(), ctx_.stream.handle}; }
  const kernels::Context& context() const { return ctx_; }  // where its kernels run
  // The parameters from / into host memory (num_parameters() floats), through the backend: what
  // initialisation, llm.c weights, export, the replica check and the whole-model gather use.
  // A 16-bit model rounds what it is given to its type, and gives its values widened.
  void upload_params(const float* host);
  // With parameter slots: the tensors outside the blocks (outside_block_count floats, laid out as
  // outside_block_views), what the model holds of its parameters besides the slots.
  void upload_outside(const float* host);
  std::vector<float> host_params() const;
  // The f32 views of the tensors: all of them in fp32; in 16-bit mode those that are not GEMM
  // weights (ParamSpec::gemm_weight), the others null.
  const ParamViews& param_views() const { return p_; }

  // Micro-batches whose activations each model chunk holds at once (chunk c: per_chunk[c];
  // default 1 each): slot(c, k) is chunk c's k-th. A chunk is a pipeline stage's part of an
  // interleaved schedule (Partition::chunks; 1 without): a slot's forward and backward run that
  // chunk's blocks, the embedding only in chunk 0 of the first stage, the head only in the last
  // chunk of the last stage.
  void set_slots(const std::vector<int>& per_chunk);
  int slot(int chunk, int k) const { return first_slot_[chunk] + k; }
  // Activation recompute every K blocks (K = 1: full recompute): keep the input of every K-th
  // block only and run each segment of K blocks forward again in backward (K blocks'
  // activations in memory instead of every block's). 0: keep everything. Before prepare().
  void set_recompute_interval(int K) { interval_ = K; }
  // Selective recompute (Korthikanti et al. 2022): keep everything but the attention
  // probabilities (B, NH/p, T, T), recomputed from q and k in backward. Before prepare().
  void set_attention_recompute(bool on) { recompute_attention_ = on; }
  // model.attention = flash: the memory-efficient attention (kernels::flash_attention_*), which
  // keeps each query's log-sum-exp (B, NH/p, T) instead of the probabilities and recomputes them
  // in backward — nothing of (B, NH/p, T, T) is allocated, and selective recompute has nothing
  // left to do. Before prepare().
  // Off, the materialized attention reads q and k as rotated and grouped key/value heads
  // expanded: in bf16 with the 16-bit kernels where it reads the kept q, k, v as they are (heads
  // not grouped), else with the f32 products on the stored values, as fp16.
  void set_flash_attention(bool on);
  // Fewer key/value heads than tensor ranks (model::kv_replicas > 1): each head's k and v rows
  // are on its replicas, each holding the gradient of its own query heads' use of them; their
  // sum, the head's gradient, replaces each copy. Collective over the tensor group; once per
  // step, after the last backward (gradients accumulate linearly). Nothing otherwise.
  // With gradient slots each block's sum is taken in its backward, in its slot.
  void sum_replicated_kv_gradients();
  // Context parallelism (model/context_parallel.hpp): each micro-batch's T rows per sequence are
  // this rank's two chunks of sequences c·T long; the flash attention runs as a ring over the
  // group and the positions are the chunks'. Needs set_flash_attention(true). Before prepare().
  void set_context_group(const ContextGroup& group);
  const ContextGroup& context_group() const { return cp_; }
  // model.classifier_chunk = n > 0: the fused, chunked classifier (model/classifier.hpp), the
  // head, its loss and (in a training forward, enqueue_forward's backward_scale) its gradient
  // over chunks of n tokens — only (n, Vp/p) logits exist; no logits() then. 0: the (B, T, Vp/p)
  // logits kept per slot from forward to backward. Before prepare().
  void set_classifier_chunk(int rows) { classifier_chunk_ = rows; }
  // Allocates every slot for micro-batches of (B, T) (forward does it too).
  void prepare(int B, int T);
  // Creates the GEMM primitives that forward and backward of (B, T) micro-batches run
  // (kernels::prepare_linear / prepare_attention), allocating nothing: at set-up and in
  // --check, so that a GEMM this CPU cannot run fails there, naming it, not in the first step.
  void prepare_kernels(int B, int T);

  // Forward of one micro-batch into `slot`. The first stage reads the tokens `inputs` (B, T);
  // the others read stage_input(slot), which the caller fills with the previous stage's output.
  // The last stage with targets returns the mean cross-entropy over the B·T targets (0 without
  // targets, and on other stages); other stages leave their output in output(slot).
  float forward(int slot, const int32_t* inputs, const int32_t* targets, int B, int T);
  // The same, the loss left on the device: the last stage with targets keeps the sum of the
  // B·T losses in the slot (keep_loss), and nothing is read on the host — what a pipeline step
  // runs, so that a micro-batch's forward is device work only (cuda.graphs).
  // backward_scale, given with targets: a training step's forward, whose backward(slot) follows
  // with this loss scale. The chunked classifier then computes the head's gradient here (the
  // final LayerNorm's output gradient kept in the slot, the head's dwte accumulated), and the
  // backward starts from it instead of computing each chunk's logits again. A backward with
  // another scale is a programming error and throws.
  void enqueue_forward(int slot, const int32_t* inputs, const int32_t* targets, int B, int T,
                       std::optional<float> backward_scale = std::nullopt);
  // Last stage: the loss sum of `slot`'s last forward with targets kept as micro-batch
  // `index`'s (a copy on the device); kept_loss_sums(count): those of micro-batches 0 … count−1
  // (f64, on the device), after the tensor group's last all-reduces.
  void keep_loss(int slot, int index);
  Tensor kept_loss_sums(int count);
  // Last stage: room for the loss sums of `micro_batches` micro-batches (keep_loss's indices
  // 0 … micro_batches − 1), sized once, as the memory model counts it; other stages keep none.
  void keep_losses_for(int micro_batches);

  // CUDA Graphs (cuda.graphs; the backend records them: graphs_unavailable() says where not).
  // Each slot's forward, and each slot's backward without an on_final hook, is recorded at its
  // second call (the first runs as usual, so that lazily created GEMM workspaces exist before a
  // capture) and replayed from then on as one launch. The tokens are uploaded before the
  // recorded part and the loss stays on the device. A backward with a hook (the data-parallel
  // overlap, which launches collectives between blocks) runs as usual. The records are dropped
  // when the activations are reallocated (shapes, slots) and a backward's when its loss scale
  // changes (fp16's dynamic scaling). A replay does not time the embedding and head apart
  // (take_edge_seconds counts the calls that ran as usual only).
  void set_graphs(bool on);
  int64_t graph_replays() const { return graph_replays_; }
  // On a device the tensor group's all-reduces, the context ring's messages and ZeRO-3's block
  // gathers stay on the stream (TensorGroup, ContextGroup, set_block_gather), a fence of each
  // group after each forward and backward; this waits for the last fences, under the groups'
  // watchdogs — before the host reads what the passes computed (the losses, the gradients' norm).
  void settle_communication();
  // What crosses a stage boundary, activation or gradient: (B, T, C), or with sequence
  // parallelism this rank's B·T/tensor rows of it — activation_elements(B, T) values.
  size_t activation_elements(int B, int T) const {
    return static_cast<size_t>(tp_.local_rows(B * T)) * config_.channels;
  }
  float* stage_input(int slot);            // where a received activation goes
  // Seconds spent in the embedding (first stage) and the head with its loss (last stage),
  // forward and backward, since the last call: the stages' fixed cost that moving blocks
  // between them does not change (pipeline/balance.hpp).
  double take_edge_seconds();
  const float* output(int slot) const;     // what a non-last stage sends on
  const float* losses(int slot) const;     // (B·T) per-position losses, last stage
  void download_losses(int slot, float* host) const;  // the same, into host memory
  // (B, T, Vp/p), last stage, until backward; the whole classifier only (classifier chunk 0).
  const float* logits(int slot) const;

  // Backward of the micro-batch in `slot`: grads += ∂(loss_scale · its mean loss)/∂θ. The last
  // stage starts from its loss; the others from output_gradient(), which the caller fills with
  // the next stage's input_gradient() first. Afterwards input_gradient() holds the gradient
  // with respect to this stage's input (valid until the next backward).
  // on_final(l), if given, is called as soon as block l's gradients are final for this backward
  // (l = last … first block), and on_final(-1) at the end, when the embedding's and the final
  // LayerNorm's are: the hook a data-parallel reducer uses to communicate while backward goes on.
  void backward(int slot, float loss_scale, const std::function<void(int)>& on_final = {});
  // Zero-bubble schedules (pipeline/schedule.hpp) split a micro-batch's backward in two.
  // backward_inputs: all that backward() does but the blocks' GEMM weight gradients — the input
  // gradient, and the biases', LayerNorms', embedding's and head's gradients. Each block GEMM's
  // output gradient dy is kept in the slot, in the memory of an activation of its size that
  // this pass was the last to read (residual3, fch, residual2 and qkv keep the dy of the MLP down
  // projection, the MLP up, the attention projection and qkv), so deferring adds no memory; in
  // 16-bit mode dy is kept rounded, as the GEMM reads it (the rounding is the input GEMM's own).
  // The whole classifier's head (classifier chunk 0) defers its dwte too, from the dlogits left in
  // the logits' memory, where the embedding is on another stage (else the order in which the
  // two sum into the tied dwte would change); the chunked classifier's is computed in the forward.
  // backward_weights: the deferred dW += dyᵀ·x of every block, last block first, from the operands
  // backward() would use — the gradients are bitwise backward()'s. on_final as backward()'s:
  // called here, where the weights' gradients become final. Not with recompute every K blocks
  // (the GEMMs' inputs are recomputed, not kept): std::logic_error.
  void backward_inputs(int slot, float loss_scale);
  void backward_weights(int slot, const std::function<void(int)>& on_final = {});
  float* output_gradient();                // activation_elements(B, T) each
  const float* input_gradient() const;
  void copy_input_gradient(float* into) const;  // into (B, T, C) on the model's device, on its stream

  // One micro-batch through the serial model (slot 0): convenience for one-stage use.
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T) {
    return forward(0, inputs, targets, B, T);
  }
  void backward(float loss_scale, const std::function<void(int)>& on_final = {}) {
    backward(0, loss_scale, on_final);
  }
  const float* losses() const { return losses(0); }
  const float* logits() const { return logits(0); }

  void zero_grad();

 private:
  // An activation kept for backward, typed: f32, or the 16-bit storage type, whichever the
  // precision and the role of the buffer say.
  using Kept = TensorBuffer;
  // (rows,·): this rank's rows_ of the B·T (all of them without sequence parallelism).
  struct LayerActivations {
    Kept ln1;                               // (rows,C)
    Buffer<float> ln1_mean, ln1_var;        // (rows) each, always f32 (llama: mean holds RMSNorm's rstd)
    Buffer<float> lse;                      // (B,NH/p,T) f32; flash attention only
    Kept qkv;                               // (B,T,qkv/p): q, k, v of this rank's heads (llama: after the
                                            // rotation, k and v of its key/value heads)
    Kept att;                               // (B,NH/p,T,T); materialized attention only

    Kept atty;                              // (B,T,C/p) attention output before the projection
    Kept residual2;                         // (rows,C) after the attention branch
    Kept ln2;                               // (rows,C)
    Buffer<float> ln2_mean, ln2_var;        // (rows) each
    Kept fch, fch_gelu;                     // (B,T,fc/p), (B,T,hidden/p): GPT-2 4C/p each; llama [gate | up]
                                            // (2F/p) and SwiGLU's output (F/p)
    Kept residual3;                         // (rows,C) block output
  };
  struct Slot {
    int chunk = 0, first = 0, last = -1;     // its model chunk and the chunk's blocks [first, last]
    Buffer<int32_t> inputs, targets;         // (B,T) tokens, first / last stage: uploaded
    Buffer<float> stage_input;               // (rows,C) embedding output or received activation
    std::vector<LayerActivations> layers;    // this stage's blocks
    Kept lnf;                                // (B,T,C) last stage (gathered: the classifier's input)
    Buffer<float> lnf_mean, lnf_var;         // (rows), (rows) last stage
    Buffer<float> logits;                    // (B,T,Vp/p) last stage, whole classifier; dlogits
                                             // in place
    Buffer<float> d_lnf;                     // (B,T,C) last stage, chunked classifier: the head's
                                             // gradient from a training forward
    std::optional<float> head_gradient;      // the loss scale d_lnf was computed with (host state)
    Tensor head_dy;                          // whole classifier, backward_inputs: the dlogits in
                                             // `logits` as the head's deferred dwte GEMM reads them
    Buffer<float> losses, log_normalizers;   // (B,T) last stage
    Buffer<double> loss_sum;                 // (1) last stage: Σ losses of its last forward
  };
  // A recorded forward or backward of a slot (set_graphs).
  // forward_for_backward and backward_from_head: the chunked classifier's head gradient computed
  // in the forward (enqueue_forward's backward_scale), and the backward that starts from it.
  // backward_inputs / backward_weights: the zero-bubble split (backward_inputs).
  enum class Work {
    forward, forward_with_loss, forward_for_backward, backward, backward_from_head,
    backward_inputs, backward_inputs_from_head, backward_weights
  };
  struct Recorded {
    void* graph = nullptr;   // the backend's handle, once captured
    float loss_scale = 0;    // backward: the scale it was recorded with
    bool ran = false;        // ran once as usual (the warm-up before a capture)
  };
  // `work` as usual, or recorded and replayed with graphs on (see set_graphs).
  void run_recorded(Work kind, int slot, float loss_scale, const std::function<void()>& work);
  void drop_graphs();
  void fence_groups();
  void begin_edge();  // the embedding's or head's interval (not inside a capture)
  void end_edge();
  void forward_work(Slot& slot, bool with_loss, std::optional<float> backward_scale);
  // defer: the weight GEMMs left to weights_work (backward_inputs).
  void backward_work(Slot& slot, float loss_scale, const std::function<void(int)>& on_final, bool defer);
  void weights_work(Slot& slot, const std::function<void(int)>& on_final);
  void check_head_gradient(const Slot& slot, float loss_scale) const;
  enum class Role { Kept, OutputOnly, Working };
  bool low() const { return gemm_.precision != kernels::Precision::fp32; }
  // GPT-2's MLP: its input GEMM and GELU are one operation (kernels::linear_gelu_forward), and the
  // GELU's backward reads the kept pre-activation as it is; SwiGLU's parts run apart.
  bool gelu_layer() const { return parts_.activation == ActivationPart::gelu; }
  // The slot's chunk holds the embedding (the first stage's chunk 0) / the head (the last
  // stage's last chunk).
  bool embeds(const Slot& s) const { return tp_.slice.first_stage && s.chunk == 0; }
  bool heads(const Slot& s) const { return tp_.slice.last_stage && s.chunk == chunks_ - 1; }
  int chunk_of(int l) const;  // the chunk that holds this stage's block l
  DType low_type() const { return kernels::storage_dtype(gemm_.precision); }
  // Activation memory of the backend: n f32 values, n tokens, n values of dtype.
  Buffer<float> activations(size_t n) const;
  Buffer<int32_t> tokens(size_t n) const;
  TensorBuffer activations(DType dtype, size_t n) const;
  Kept kept(size_t n, bool f32) const;               // a kept activation of n values
  void allocate_layer(LayerActivations& a, Role role, bool output_f32);
  void allocate_slot(Slot& slot, int index);
  LayerActivations& layer_state(Slot& slot, int l);  // where block l's activations are
  bool keeps_output(int l) const;                    // with recompute: a segment's (or chunk's) last block
  Kept& output_kept(Slot& slot, int l);              // where block l's output is kept
  const float* block_input(Slot& slot, int l, float* into);  // f32; widened into `into`
  Tensor kept_block_input(Slot& slot, int l);                // as kept: f32, or 16-bit (this rank's rows)
  // Memory of the model's device at data seen as `shape`: what a kernel reads its sizes from.
  Tensor on_device(const float* data, Shape shape) const;
  Tensor probabilities(LayerActivations& a) const;      // its attention probabilities (B,NH/p,T,T), f32
  RingBuffers ring_buffers(DType kv_type) const;  // the (k, v) blocks in the type the attention reads
  const float* local_positions();          // wpe's rows of this rank's chunks (all of wpe without context parallelism)
  float* local_position_gradients();       // where the embedding's backward sums dwpe: wpe's gradient, or cleared d_positions_
  void add_position_gradients();           // d_positions_ into the gradient of wpe's rows (context parallelism)
  Tensor probabilities_low(LayerActivations& a) const;  // bf16: in 16 bits
  // The attention's output, kept in a.atty (written there by the flash attention; else computed
  // in w.atty and kept); materialized_attention: the materialized core into `out` (f32).
  void attention_core(LayerActivations& a, LayerActivations& w);
  void materialized_attention(LayerActivations& a, LayerActivations& w, float* out);
  // dqkv_low (or empty): the qkv GEMM's dy (qkv_gradient()) rounded, written by what computes it
  // last (qkv_gradient_writer()).
  void attention_core_backward(LayerActivations& a, LayerActivations& w, const Tensor& dqkv_low);
  // d_qkv_ back through the key/value expansion and the rotation (if any); dqkv_low as
  // attention_core_backward's, written by the rotation.
  void positions_backward(const Tensor& dqkv_low);
  // Keeping an activation computed in `work` (f32): in 16-bit mode rounded and stored in kept.
  void keep(Kept& work, Kept& kept);
  void widen(const Kept& kept, Kept& work);          // 16-bit mode: kept's values into work
  Operand operand(const Kept& work, const Kept& kept) const;
  // The (rows, cols) weight at element `at` of parameter tensor `tensor` (outside the blocks),
  // in the storage type; block l's, in the flat buffer or its slot.
  Operand weight(ParamTensor tensor, int64_t at, int rows, int cols) const;
  Operand block_weight(int l, ParamTensor tensor, int rows, int cols) const;
  // Block l's f32 parameter views, each at its layer l (16-bit: the f32 reads), after
  // use_block(l) where there are parameter slots.
  ParamViews block_params(int l) const;
  // Parameter slots: block l's parameters gathered into its slot (gather_); next: the block the
  // pass uses after it (-1: none, or not known), which the gather may prefetch.
  void use_block(int l, int next);
  void refresh_f32_reads();  // 16-bit mode: f32_reads_ widened again after the parameters changed
  void upload_stored(const Tensor& into, const float* host);  // f32 values, rounded to the storage type
  void forward_blocks(Slot& slot, int first, int last);
  // next: the block whose pass follows (use_block's).
  void block_forward(LayerActivations& a, int l, const float* input, float* output, Kept& kept_output, int next);
  // 16-bit mode, no deferral: the output gradients the backward GEMMs read in 16 bits are written
  // rounded by what computes them, into dy_low_ (GemmMode::dy_low_written) — the norms' backward
  // dresidual (for the attention projection, and the next block's MLP output layer; with sequence
  // parallelism this rank's rows, which the row-parallel layer gathers in 16 bits), the qkv
  // gradient (qkv_gradient_writer()) — not narrowed by a pass of their own.
  bool gradients_written_low(bool defer) const { return low() && !defer; }
  // What computes the qkv GEMM's dy last, and so can write it rounded: the rotation back (rotary
  // positions: every attention path, ring and grouped heads included, ends there), or the flash
  // attention's backward where its gradient is the dy as it is (no ring to sum over); none
  // elsewhere (the GEMM's layer narrows it).
  enum class QkvGradientWriter { none, rotation, attention };
  QkvGradientWriter qkv_gradient_writer() const {
    if (!parts_.learned_positions()) return QkvGradientWriter::rotation;
    return flash_ && cp_.size == 1 ? QkvGradientWriter::attention : QkvGradientWriter::none;
  }
  // For one block's backward (gradients_written_low): dy_low_ holds dresidual rounded on entry
  // (given: the head's or the block after's backward left it), and the block leaves its input
  // gradient there rounded (wanted: the block before runs next).
  struct LowGradient {
    bool given = false, wanted = false;
  };
  void block_backward(LayerActivations& a, int l, const Tensor& input, float* dresidual, bool defer, int next,
                      LowGradient low_gradient);
  Tensor stream_gradient_low() const;  // this rank's (rows, C) of dy_low_ seen as (B·T, C): dresidual rounded
  void block_weight_gradients(LayerActivations& a, int l);
  // The block's norm (block_parts.hpp) on this rank's rows; with sequence parallelism its weight
  // gradients summed over the tensor group.
  void norm_forward(const Tensor& out, const Tensor& mean, const Tensor& variance, const Tensor& inp,
                    const float* weight, const float* bias);
  void norm_backward(const Tensor& dinp, float* dweight, float* dbias, const Tensor& dout, const Tensor& inp,
                     const float* weight, const float* bias, const Tensor& mean, const Tensor& variance,
                     const Tensor& dinp_low = Tensor{});
  // A bias as the layers take it: null where the parts have none.
  float* bias(float* at) const { return parts_.biases ? at : nullptr; }
  const float* bias(const float* at) const { return parts_.biases ? at : nullptr; }
  // The (B,T,3C/p) q, k, v the materialized attention reads from x (the f32 ones, w): x.qkv, or
  // (grouped-query attention) its key and value heads expanded into qkv_full_. The flash
  // attention reads x.qkv's grouped heads as they are.
  Tensor attention_input(LayerActivations& x);
  // Where the qkv GEMM's output gradient is after attention_core_backward: d_qkv_, or the
  // expanded heads' sums in d_qkv_compact_ (both rotated back with rotary positions).
  float* qkv_gradient() { return expands_kv() ? d_qkv_compact_.data() : d_qkv_.data(); }
  bool grouped() const { return kv_local_ != heads_local_; }
  bool expands_kv() const { return grouped() && !flash_; }  // the materialized kernels take every head's k, v
  // The columns of a ring attention's (k, v) block: this rank's key/value heads', 2·kv·hs — its
  // qkv's after the queries'.
  int ring_columns() const { return qkv_local_ - C_local_; }
  // The qkv GEMM writes q, k, v where they are kept (16-bit mode, the flash attention, no rotary
  // positions to apply in f32 first); else into w.qkv, kept after.
  bool qkv_written_kept() const { return low() && flash_ && parts_.learned_positions(); }
  // bf16's materialized attention kernels read the kept 16-bit q, k, v as they are: not when the
  // attention reads an expanded copy (grouped heads), which takes the f32 kernels as fp16 does.
  bool bf16_attention() const { return gemm_.precision == kernels::Precision::bf16 && !flash_ && !grouped(); }
  // The ring attention's blocks fit the MLP's gradient scratch (GELU's 4C widths do; SwiGLU's where
  // the key/value heads are fewer).
  bool ring_in_mlp_scratch() const { return fc_local_ >= 2 * ring_columns() && mlp_local_ >= 2 * ring_columns(); }
  // The head's weight and gradient: wte (tied) or head.
  ParamTensor head_tensor() const { return tied_head(config_) ? kWte : kHead; }
  float* head_gradients() const { return tied_head(config_) ? g_.wte : g_.head; }
  // A deferred GEMM's dy kept in `into` (backward_inputs): the GemmMode its input GEMM runs with.
  GemmMode defer_gradient(const float* dy, Kept& into);
  Tensor deferred_gradient(Kept& kept);  // what the weight GEMM reads of it
  Tensor fc_input_gradient();             // GPT-2's MLP: d(fc's output) as fc's backward reads it
  void head_forward(Slot& slot, bool with_loss, std::optional<float> backward_scale);
  // leave_low: dresidual also left rounded in dy_low_ (stream_gradient_low) for the last block.
  void head_backward(Slot& slot, float loss_scale, float* dresidual, bool defer, bool leave_low);
  void whole_classifier_forward(Slot& slot, bool with_loss);
  void whole_classifier_backward(Slot& slot, float loss_scale, bool defer);
  int head_chunk(int BT) const;  // rows of the chunked classifier's chunk (0: the whole classifier)

  GptConfig config_;
  kernels::Context& ctx_;
  kernels::Backend& backend_;          // where the buffers live (ctx_'s backend)
  TensorGroup tp_;
  TensorGroup tp_whole_;  // tp_ with every row on every rank: the classifier's (sequence parallelism)
  VocabSlice vocab_;
  bool flash_ = false;  // model.attention = flash
  ContextGroup cp_;     // parallel.context: the ring attention's group (size 1: none)
  int classifier_chunk_ = 0;  // model.classifier_chunk: tokens per chunk; 0: the whole classifier
  int C_local_ = 0, heads_local_ = 0;  // channels and heads of this rank's attention heads
  BlockParts parts_;                   // the block's parts, from config_
  int kv_local_ = 0;                   // this rank's key/value heads (heads_local_ for GPT-2)
  int qkv_local_ = 0, fc_local_ = 0, mlp_local_ = 0;  // rows of its qkv and MLP-input GEMMs, its MLP width
  int layers_ = 0;                     // blocks on this stage
  int chunks_ = 1;                     // its model chunks (interleaved)
  std::vector<int> chunk_begin_, chunk_size_;  // per chunk: its first block (of this stage's) and count
  std::vector<int> slots_per_chunk_;    // per chunk
  std::vector<int> first_slot_;         // per chunk: its slots start there
  int64_t num_parameters_ = 0;
  std::array<int64_t, kNumParamTensors> offsets_{};  // each tensor's first element in params_ (-1: in the slots)
  TensorBuffer params_;                // (num_parameters) of the storage type: f32, bf16 or fp16;
                                       // with parameter slots (outside_block_count)
  Buffer<float> grads_;                // (num_parameters), or with slots (outside_block_count)
  std::array<int64_t, kNumParamTensors> layer_stride_{};  // a block tensor's elements per layer
  std::vector<Buffer<float>> grad_slots_;  // ZeRO-2: (one_block_count) each
  std::vector<ParamViews> slot_views_;     // one_block_views of each slot
  int slot_of(int l) const { return l % static_cast<int>(grad_slots_.size()); }
  std::function<void(int)> slot_reuse_;
  void sum_replicated_kv_rows(float* qkvw);  // one block's (its qkvw gradient's start)
  // ZeRO-3: (one_block_count) each of the storage type; a 16-bit model's f32 reads of each
  // (one_block_f32_read_count); the f32 views of each; the block tensors' offsets in a slot.
  std::vector<TensorBuffer> param_slots_;
  std::vector<Buffer<float>> slot_reads_;
  std::vector<ParamViews> slot_params_;
  std::array<int64_t, kNumParamTensors> block_offsets_{};
  BlockGather gather_;
  BlockFence gather_fence_of_;
  int param_slot_of(int l) const { return l % static_cast<int>(param_slots_.size()); }
  Buffer<float> f32_reads_;            // 16-bit mode: the tensors read in f32, widened (f32_read_count;
                                       // with parameter slots those outside the blocks)
  bool f32_reads_stale_ = true;        // params_ written since f32_reads_ was made
  ParamViews p_{}, g_{};               // p_: into params_ (fp32), into f32_reads_ (16-bit)
  GemmMode gemm_;

  int B_ = 0, T_ = 0;
  int rows_ = 0;           // of the B·T token rows, those this rank holds outside the parallel layers
  int64_t first_row_ = 0;  // (all of them, from 0, without sequence parallelism)
  std::vector<Slot> slots_;
  Buffer<double> kept_losses_;                 // (micro-batches): keep_loss's, last stage
  bool graphs_ = false;
  std::map<std::pair<Work, int>, Recorded> recorded_;  // (what, slot)
  int64_t graph_replays_ = 0;
  comm::Work tensor_fence_, context_fence_, gather_fence_;  // the last pass's (settle_communication)
  int interval_ = 0;                           // recompute every K blocks; 0: none
  bool recompute_attention_ = false;
  kernels::StreamIntervals edge_times_;        // take_edge_seconds(); none while capturing
  bool capturing_ = false;                     // inside a graph capture (run_recorded)
  Buffer<float> shared_att_;                   // selective recompute: (B,NH/p,T,T) for all blocks
  TensorBuffer shared_att_low_;                // and in bf16 (bf16 mode)
  std::vector<LayerActivations> work_;         // recompute: the K blocks being worked on
  // 16-bit mode: the f32 values of the block being computed, and the residual stream.
  LayerActivations work32_;
  Buffer<float> stream_[2];                    // (rows,C) each
  TensorBuffer dy_low_;                        // (B,T,max(C,4C/p)) dy in the 16-bit type
  // Scratch shared by all slots and layers.
  Buffer<float> loss_scratch_;                 // (3·B·T) partial maxes and sums
  Buffer<float> logits_chunk_;                 // (chunk,Vp/p) the chunked classifier's, last stage
  TensorBuffer dlogits_low_;                   // 16-bit mode: (chunk,Vp/p) its dlogits as the GEMMs read them
  Buffer<float> scratch_c_;                    // (B,T,C) row-parallel partial sums; with sequence
                                               // parallelism the gathered output gradient in backward
  Buffer<float> d_residual_;                   // (rows_,C)
  Buffer<float> d_ln_;                         // (B,T,C) the column-parallel input gradient
  TensorBuffer gathered_;                      // (B,T,C) sequence parallelism: a column-parallel
                                               // input gathered, of the storage type
  Buffer<float> norm_partial_;                 // (2C) sequence parallelism: a LayerNorm's dγ, dβ part
  Buffer<float> kv_sums_;                      // (KV, 2·hs, C) a block's replicated key/value heads' gradients
  Buffer<float> ring_incoming_;                // (rows_,C) tp_comm_overlap: TensorGroup::incoming
  Buffer<float> d_atty_;                       // (B,T,C/p)
  Buffer<float> d_qkv_;                        // (B,T,3C/p); flash: (B,T,qkv_local_)
  TensorBuffer d_fch_;                         // (B,T,fc/p) the MLP input GEMM's output gradient: f32,
                                               // or for GPT-2's GELU layer in 16 bits of the storage type
  Buffer<float> d_fch_gelu_;                   // (B,T,hidden/p) its activation's output gradient (not
                                               // GPT-2's fused GELU layer, but for the ring's blocks)
  Buffer<float> ring_scratch_;                 // context parallelism, where the MLP's are narrower:
                                               // ring_buffers' (4, B,T,ring_columns())
  Buffer<float> d_att_;                        // (B,NH/p,T,T)
  // Llama: the rotary positions of this rank's rows (T, i32); the materialized attention's
  // grouped heads expanded, (B,T,3C/p) q, k, v, and the (B,T,qkv/p) gradient summed back to the
  // key/value heads.
  Buffer<int32_t> rope_positions_;
  Buffer<float> qkv_full_;
  Buffer<float> d_qkv_compact_;
  // Context parallelism: this rank's rows of the position table and of its gradient, (T,C) each
  // (the ring's travelling buffers are d_fch_ and d_fch_gelu_: ring_buffers()).
  Buffer<float> positions_, d_positions_;
};

}  // namespace trident::model
