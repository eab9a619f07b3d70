// The transformer's forward and backward over the tensor-parallel layers of
// model/tensor_parallel.hpp (the serial model is the tensor group of one rank), the block's
// maths in its parts (model/block_parts.hpp). Kernel math: kernels/kernels.hpp.
#include "model/transformer.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "comm/wrappers/widen.hpp"
#include "model/classifier.hpp"

namespace trident::model {
namespace {

using kernels::Context;
using kernels::low16;
constexpr MemoryCategory kActs = MemoryCategory::Activations;
constexpr MemoryKind kDevice = MemoryKind::device;

}  // namespace

Transformer::Transformer(const GptConfig& config, Context& ctx, const TensorGroup& tensor_group,
           kernels::Precision precision, int gradient_slots, int parameter_slots)
    : config_(config),
      ctx_(ctx),
      backend_(kernels::backend_of(ctx)),
      tp_(tensor_group),
      vocab_(vocab_slice(config, tensor_group.slice)),
      num_parameters_(model::num_parameters(config, tensor_group.slice)),
      offsets_(parameter_slots ? model::outside_block_offsets(config, tensor_group.slice)
                               : model::param_offsets(config, tensor_group.slice)),
      params_(kernels::storage_dtype(precision),
              Shape{parameter_slots ? outside_block_count(config, tensor_group.slice) : num_parameters_},
              MemoryCategory::Parameters, backend_, kDevice),
      edge_times_(kernels::Context{&backend_, stream()}) {
  gemm_.precision = precision;
  tp_.stream = stream();
  tp_whole_ = tp_.whole_rows();
  const bool slotted = parameter_slots > 0;
  if (low()) {
    f32_reads_ = Buffer<float>(static_cast<size_t>(slotted ? outside_f32_read_count(config_, tp_.slice)
                                                           : f32_read_count(config_, tp_.slice)),
                               MemoryCategory::Parameters, backend_, kDevice);
    p_ = slotted ? outside_f32_read_views(config_, f32_reads_.data(), tp_.slice)
                 : f32_read_views(config_, f32_reads_.data(), tp_.slice);
  } else {
    p_ = slotted ? outside_block_views(config_, params_.data<float>(), tp_.slice)
                 : model::param_views(config_, params_.data<float>(), tp_.slice);
  }
  block_offsets_ = one_block_offsets(config_, tp_.slice);
  for (int k = 0; k < parameter_slots; ++k) {
    param_slots_.emplace_back(params_.dtype(), Shape{one_block_count(config_, tp_.slice)}, MemoryCategory::Parameters,
                              backend_, kDevice);
    if (low()) {
      slot_reads_.emplace_back(static_cast<size_t>(one_block_f32_read_count(config_, tp_.slice)),
                               MemoryCategory::Parameters, backend_, kDevice);
      slot_params_.push_back(one_block_f32_read_views(config_, slot_reads_.back().data(), tp_.slice));
    } else {
      slot_params_.push_back(one_block_views(config_, param_slots_.back().data<float>(), tp_.slice));
    }
  }
  C_local_ = config_.channels / tp_.slice.size;
  heads_local_ = config_.heads / tp_.slice.size;
  parts_ = block_parts(config_);
  kv_local_ = model::kv_heads_local(config_, tp_.slice.size);  // fewer heads than ranks: one, replicated
  qkv_local_ = static_cast<int>(qkv_rows_local(config_, tp_.slice.size));
  fc_local_ = static_cast<int>(fc_rows(config_) / tp_.slice.size);
  mlp_local_ = static_cast<int>(mlp_hidden(config_) / tp_.slice.size);
  layers_ = tp_.slice.layers(config_);
  const auto specs = param_specs(config_, tp_.slice);
  for (int t = 0; t < kNumParamTensors; ++t) layer_stride_[t] = layers_ ? specs[t].count() / layers_ : 0;
  chunks_ = tp_.slice.chunks();
  for (int j = 0, at = 0; j < chunks_; ++j) {
    chunk_begin_.push_back(at);
    chunk_size_.push_back(chunks_ == 1 ? layers_ : tp_.slice.chunk_blocks[j]);
    at += chunk_size_.back();
  }
  set_slots(std::vector<int>(chunks_, 1));
  set_gradient_slots(gradient_slots);
}

Transformer::~Transformer() { drop_graphs(); }

void Transformer::set_flash_attention(bool on) {
  flash_ = on;
}

// Over the tensor group, a block at a time: each rank's k and v rows into its head's slot of a
// (KV, 2·hs, C) buffer, zero elsewhere, all-reduced (the head's replicas summed), its slot back.
// KV times the bytes of a reduction among the replicas alone, with no communicator of its own
// (docs/DECISIONS.md); one block's buffer.
void Transformer::sum_replicated_kv_gradients() {
  if (kv_replicas(config_, tp_.slice.size) == 1 || !grad_slots_.empty()) return;
  for (int l = 0; l < layers_; ++l) sum_replicated_kv_rows(block_gradients(l).qkvw);
}

void Transformer::sum_replicated_kv_rows(float* qkvw) {
  const int64_t C = config_.channels, per = 2 * int64_t(head_size(config_)) * C, KV = kv_heads(config_);
  const int64_t head = first_kv_head(config_, tp_.slice.size, tp_.slice.rank);
  if (kv_sums_.size() == 0)
    kv_sums_ = Buffer<float>(static_cast<size_t>(KV * per), MemoryCategory::Communication, backend_, kDevice);
  const Tensor slot = kv_sums_.view().elements(head * per, per);
  const Tensor rows = on_device(qkvw + int64_t(C_local_) * C, {per});
  kernels::clear(ctx_, kv_sums_.view());
  kernels::copy(ctx_, slot, rows);
  tp_.all_reduce_sum(kv_sums_.data(), kv_sums_.size());
  kernels::copy(ctx_, rows, slot);
}

void Transformer::set_gradient_slots(int slots) {
  grad_slots_.clear();
  slot_views_.clear();
  grads_ = Buffer<float>();  // the old buffer goes before the new ones exist
  if (slots == 0) {
    grads_ = Buffer<float>(static_cast<size_t>(num_parameters_), MemoryCategory::Gradients, backend_, kDevice);
    g_ = model::param_views(config_, grads_.data(), tp_.slice);
    return;
  }
  grads_ = Buffer<float>(static_cast<size_t>(outside_block_count(config_, tp_.slice)), MemoryCategory::Gradients,
                         backend_, kDevice);
  g_ = outside_block_views(config_, grads_.data(), tp_.slice);
  for (int k = 0; k < slots; ++k) {
    grad_slots_.emplace_back(static_cast<size_t>(one_block_count(config_, tp_.slice)), MemoryCategory::Gradients,
                             backend_, kDevice);
    slot_views_.push_back(one_block_views(config_, grad_slots_.back().data(), tp_.slice));
  }
  drop_graphs();  // recorded backwards wrote the old buffers
}

ParamViews Transformer::block_gradients(int l) const {
  if (!grad_slots_.empty()) return slot_views_[static_cast<size_t>(slot_of(l))];
  ParamViews views = g_;
  for (int t = kFirstBlockTensor; t <= kLastBlockTensor; ++t) tensor_view(views, t) += l * layer_stride_[t];
  return views;
}

void Transformer::set_context_group(const ContextGroup& group) {
  if (group.size > 1 && !flash_)
    throw std::logic_error("Transformer::set_context_group: context parallelism needs the flash attention");
  cp_ = group;
  cp_.stream = stream();
}

void Transformer::zero_grad() { kernels::clear(ctx_, grads_.view()); }

Tensor Transformer::parameter_memory(int layer, int t) const {
  const int64_t per_layer = layer_stride_[t];
  if (layer < 0) return params_.view().elements(offsets_[t], param_specs(config_, tp_.slice)[t].count());
  if (param_slots_.empty()) return params_.view().elements(offsets_[t] + layer * per_layer, per_layer);
  return param_slots_[static_cast<size_t>(param_slot_of(layer))].view().elements(block_offsets_[t], per_layer);
}

ParamViews Transformer::block_params(int l) const {
  if (!param_slots_.empty()) return slot_params_[static_cast<size_t>(param_slot_of(l))];
  ParamViews views = p_;
  for (int t = kFirstBlockTensor; t <= kLastBlockTensor; ++t)
    if (tensor_view(views, t) != nullptr) tensor_view(views, t) += l * layer_stride_[t];
  return views;
}

// The gather writes the slot on the model's stream (or before the model's stream waits for it):
// the previous block that used the slot is done with it by then.
void Transformer::use_block(int l, int next) {
  if (param_slots_.empty()) return;
  if (!gather_) throw std::logic_error("Transformer: parameter slots, and no gather of a block's parameters set");
  const int slot = param_slot_of(l);
  if (!gather_(l, next) || !low()) return;
  const auto specs = param_specs(config_, tp_.slice);
  const Tensor stored = param_slots_[static_cast<size_t>(slot)].view();
  const ParamViews& reads = slot_params_[static_cast<size_t>(slot)];
  for (int t = kFirstBlockTensor; t <= kLastBlockTensor; ++t) {
    if (specs[t].gemm_weight || layer_stride_[t] == 0) continue;
    kernels::convert(ctx_, on_device(tensor_view(reads, t), {layer_stride_[t]}),
                     stored.elements(block_offsets_[t], layer_stride_[t]));
  }
}

Tensor Transformer::parameters_to_write() {
  f32_reads_stale_ = true;
  return params_.view();
}

float* Transformer::params() {
  if (low()) throw std::logic_error("Transformer::params(): a " + std::string(kernels::precision_name(precision())) +
                                    " model's parameters are 16-bit (parameters_to_write, upload_params)");
  return params_.data<float>();
}

void Transformer::upload_params(const float* host) {
  if (param_slots_.empty()) return upload_stored(params_.view(), host);
  std::vector<float> outside(params_.size());  // the tensors outside the blocks, from their places in the slice
  const auto specs = param_specs(config_, tp_.slice);
  const auto flat = param_offsets(config_, tp_.slice);
  for (int t = 0; t < kNumParamTensors; ++t)
    if (offsets_[t] >= 0) std::copy(host + flat[t], host + flat[t] + specs[t].count(), outside.begin() + offsets_[t]);
  upload_outside(outside.data());
}

void Transformer::upload_outside(const float* host) { upload_stored(params_.view(), host); }

void Transformer::upload_stored(const Tensor& into, const float* host) {
  f32_reads_stale_ = true;
  if (!low()) return kernels::upload(ctx_, into, host);
  std::vector<low16> rounded(into.numel());
  comm::narrow(low_type(), host, rounded.data(), rounded.size());
  kernels::upload(ctx_, into, rounded.data());
}

void Transformer::download_losses(int slot, float* host) const {
  kernels::download(ctx_, host, slots_[static_cast<size_t>(slot)].losses.view());
}

std::vector<float> Transformer::host_params() const {
  if (!param_slots_.empty())
    throw std::logic_error("Transformer::host_params: the blocks' parameters are sharded (dp::ParameterShards::host_params)");
  std::vector<float> host(static_cast<size_t>(num_parameters_));
  if (!low()) {
    kernels::download(ctx_, host.data(), params_.view());
    return host;
  }
  std::vector<low16> stored(host.size());
  kernels::download(ctx_, stored.data(), params_.view());
  comm::widen(low_type(), stored.data(), host.data(), host.size());
  return host;
}

void Transformer::set_slots(const std::vector<int>& per_chunk) {
  if (per_chunk == slots_per_chunk_) return;
  if (static_cast<int>(per_chunk.size()) != chunks_)
    throw std::logic_error("Transformer::set_slots: slots for " + std::to_string(per_chunk.size()) + " chunks, the stage has " +
                           std::to_string(chunks_));
  drop_graphs();
  slots_per_chunk_ = per_chunk;
  first_slot_.assign(chunks_, 0);
  int total = 0;
  for (int k = 0; k < chunks_; ++k) first_slot_[k] = total, total += per_chunk[k];
  slots_.clear();
  slots_.resize(total);
  if (B_ > 0) {
    const int B = B_, T = T_;
    B_ = T_ = 0;
    prepare(B, T);
  }
}

void Transformer::refresh_f32_reads() {
  if (!low() || !f32_reads_stale_) return;
  const auto specs = model::param_specs(config_, tp_.slice);
  int64_t at = 0;
  for (int t = 0; t < kNumParamTensors; ++t) {
    if (specs[t].gemm_weight || specs[t].count() == 0 || offsets_[t] < 0) continue;  // < 0: in the slots
    kernels::convert(ctx_, f32_reads_.view().elements(at, specs[t].count()),
                     params_.view().elements(offsets_[t], specs[t].count()));
    at += specs[t].count();
  }
  f32_reads_stale_ = false;
}

Buffer<float> Transformer::activations(size_t n) const { return Buffer<float>(n, kActs, backend_, kDevice); }

Buffer<int32_t> Transformer::tokens(size_t n) const { return Buffer<int32_t>(n, kActs, backend_, kDevice); }

TensorBuffer Transformer::activations(DType dtype, size_t n) const {
  return TensorBuffer(dtype, Shape{static_cast<int64_t>(n)}, kActs, backend_, kDevice);
}

Transformer::Kept Transformer::kept(size_t n, bool f32) const { return activations(f32 ? DType::f32 : low_type(), n); }

// Everything backward needs of one block. With recompute every K blocks, a slot keeps only the
// outputs of the blocks that end a segment (the next segment's input, and the last block's for
// the head); the rest lives in K shared sets (work_), refilled by each segment's recompute.
// Role::Working is the 16-bit mode's f32 working set: no statistics, no output (the output
// goes to the residual stream buffers), none of what the GEMMs write where it is kept.
// With sequence parallelism the LayerNorms' and the residual stream's buffers hold this rank's
// rows (rows_) only; the parallel layers' (qkv, atty, fch, fch_gelu) hold every row.
void Transformer::allocate_layer(LayerActivations& a, Role role, bool output_f32) {
  const size_t BT = static_cast<size_t>(B_) * T_, rows = rows_, C = config_.channels, Cl = C_local_;
  const size_t probs = static_cast<size_t>(B_) * heads_local_ * T_ * T_;
  const bool f32 = !low() || role == Role::Working;
  if (role != Role::Working) a.residual3 = kept(rows * C, f32 || output_f32);
  if (role == Role::OutputOnly) return;
  if (role == Role::Kept) {
    a.ln1_mean = activations(rows), a.ln1_var = activations(rows);
    a.ln2_mean = activations(rows), a.ln2_var = activations(rows);
    if (flash_) a.lse = activations(BT * heads_local_);  // statistics, as LayerNorm's: f32
  }
  if (role != Role::Working) a.ln1 = kept(rows * C, f32);  // the norms write the kept values themselves
  // The qkv GEMM writes the kept q, k, v for the flash attention (learned positions): no f32 copy.
  if (role != Role::Working || !qkv_written_kept()) a.qkv = kept(BT * qkv_local_, f32);
  if (!flash_ && !recompute_attention_) a.att = kept(probs, f32);  // selective: one shared f32 buffer
  // The flash attention writes its output where it is kept; f32 only to fold context parallelism's blocks.
  if (role != Role::Working || !flash_ || cp_.size > 1) a.atty = kept(BT * Cl, f32);
  a.residual2 = kept(rows * C, f32);
  if (role != Role::Working) a.ln2 = kept(rows * C, f32);
  // GELU's layer writes its input and output where they are kept (linear_gelu_forward): no f32
  // working copy of either.
  if (role != Role::Working || !gelu_layer()) {
    a.fch = kept(BT * fc_local_, f32);
    a.fch_gelu = kept(BT * mlp_local_, f32);
  }
}

// Slot k of chunk c holds that chunk's blocks only (a chunk's output, what it sends, in f32).
// The final LayerNorm's output is kept for all rows (what the classifier reads), its statistics
// for this rank's.
void Transformer::allocate_slot(Slot& s, int index) {
  const size_t BT = static_cast<size_t>(B_) * T_, rows = rows_, C = config_.channels;
  s.chunk = static_cast<int>(std::upper_bound(first_slot_.begin(), first_slot_.end(), index) - first_slot_.begin()) - 1;
  s.first = chunk_begin_[s.chunk], s.last = s.first + chunk_size_[s.chunk] - 1;
  s.layers.clear();
  s.layers.resize(layers_);
  for (int l = s.first; l <= s.last; ++l)
    if (!interval_ || keeps_output(l))
      allocate_layer(s.layers[l], interval_ ? Role::OutputOnly : Role::Kept, l == s.last);
  s.stage_input = activations(rows * C);
  if (embeds(s)) s.inputs = tokens(BT);
  if (!heads(s)) return;
  s.targets = tokens(BT);
  s.lnf = kept(BT * C, !low());
  s.lnf_mean = activations(rows), s.lnf_var = activations(rows);
  if (head_chunk(B_ * T_) == 0) s.logits = activations(BT * vocab_.rows);
  else s.d_lnf = activations(BT * C);
  s.losses = activations(BT), s.log_normalizers = activations(BT);
  s.loss_sum = Buffer<double>(1, kActs, backend_, kDevice);
}

void Transformer::prepare(int B, int T) {
  if (B == B_ && T == T_) return;
  if (tp_.splits_rows() && (B * T) % tp_.slice.size != 0)
    throw std::logic_error("Transformer::prepare: sequence parallelism over " + std::to_string(tp_.slice.size) +
                           " ranks needs B·T divisible by it, not " + std::to_string(B * T));
  drop_graphs();  // they hold the old buffers' addresses
  B_ = B, T_ = T;
  rows_ = tp_.local_rows(B * T);
  first_row_ = tp_.first_row(B * T);
  for (size_t i = 0; i < slots_.size(); ++i) allocate_slot(slots_[i], static_cast<int>(i));
  work_.clear();
  work_.resize(interval_);
  for (LayerActivations& a : work_) allocate_layer(a, Role::Kept, false);
  if (recompute_attention_ && !flash_) {
    shared_att_ = activations(static_cast<size_t>(B) * heads_local_ * T * T);
    if (bf16_attention())  // what P·V reads
      shared_att_low_ = activations(DType::bf16, shared_att_.size());
  }
  const size_t BT = static_cast<size_t>(B) * T, rows = rows_, C = config_.channels, Cl = C_local_;
  const size_t probs = static_cast<size_t>(B) * heads_local_ * T * T;
  if (low()) {
    allocate_layer(work32_, Role::Working, true);
    stream_[0] = activations(rows * C), stream_[1] = activations(rows * C);
    dy_low_ = activations(low_type(), BT * std::max({C, size_t(qkv_local_), size_t(fc_local_)}));  // the head's: in place
    gemm_.dy_low = dy_low_.view();
  }
  loss_scratch_ = activations(3 * BT);
  logits_chunk_ = activations(static_cast<size_t>(head_chunk(B_ * T_)) * vocab_.rows);
  if (low()) dlogits_low_ = activations(low_type(), logits_chunk_.size());
  scratch_c_ = activations(BT * C);
  d_residual_ = activations(rows * C), d_ln_ = activations(BT * C);
  if (tp_.splits_rows()) {  // the column-parallel GEMMs' gathered input, as the model stores it
    gathered_ = activations(low() ? low_type() : DType::f32, BT * C);
    norm_partial_ = activations(2 * C);
  }
  if (tp_.overlaps()) {  // the reduce-scatter ring's arriving block
    ring_incoming_ = activations(rows * C);
    tp_.incoming = ring_incoming_.view({rows_, config_.channels});
  }
  d_atty_ = activations(BT * Cl), d_qkv_ = activations(BT * (flash_ ? size_t(qkv_local_) : 3 * Cl));
  // GPT-2's GELU layer writes the gradient of its input in fc's operand type (fc_input_gradient).
  d_fch_ = activations(gelu_layer() && low() ? low_type() : DType::f32, BT * fc_local_);
  // GELU's layer computes the gradient of its input in one operation (linear_gelu_backward): the
  // f32 gradient of its output only where the ring attention's blocks travel in it.
  if (!gelu_layer() || (cp_.size > 1 && ring_in_mlp_scratch())) d_fch_gelu_ = activations(BT * mlp_local_);
  if (!flash_) d_att_ = activations(probs);
  if (expands_kv()) {  // the materialized attention's expanded q, k, v (f32) and their gradient's sums
    qkv_full_ = activations(BT * 3 * Cl);
    d_qkv_compact_ = activations(BT * qkv_local_);
  }
  if (!parts_.learned_positions()) {  // each row's position in its sequence: with context parallelism, its chunks'
    rope_positions_ = tokens(size_t(T));
    std::vector<int32_t> at(static_cast<size_t>(T));
    const int n = cp_.size > 1 ? T / 2 : T;
    for (int t = 0; t < T; ++t)
      at[static_cast<size_t>(t)] = cp_.size > 1 ? cp_.chunk(cp_.rank, t / n) * n + t % n : t;
    kernels::upload(ctx_, rope_positions_.view(), at.data());
  }
  if (cp_.size > 1 && !ring_in_mlp_scratch()) ring_scratch_ = activations(4 * BT * ring_columns());  // ring_buffers'
  if (cp_.size > 1 && tp_.slice.first_stage && parts_.learned_positions())  // the learned positions of the chunks
    positions_ = activations(size_t(T) * C), d_positions_ = activations(size_t(T) * C);
}

// In the MLP's gradient scratch, free whenever the attention core runs (forward, or backward
// between the attention projection's and the qkv GEMM's): two (B,T,2·Ckv/p) in each of its
// (B,T,fc/p) and (B,T,hidden/p) — or, where the MLP's widths are less, a scratch of their own. The
// (k, v) blocks travel in kv_type (a 16-bit model's kept values: half the bytes), the gradients f32.
RingBuffers Transformer::ring_buffers(DType kv_type) const {
  const int64_t n = int64_t(B_) * T_ * ring_columns();
  const Shape shape{B_, T_, ring_columns()};
  const bool mlp = ring_in_mlp_scratch();
  const Tensor kv_memory = mlp ? d_fch_.view() : ring_scratch_.view().elements(0, 2 * n);
  const Tensor kv{kv_memory.data, kv_type, Shape{2 * n}, kv_memory.device};
  const Tensor dkv = mlp ? d_fch_gelu_.view() : ring_scratch_.view().elements(2 * n, 2 * n);
  RingBuffers r;
  for (int i = 0; i < 2; ++i) {
    r.kv[i] = kv.elements(i * n, n).reshaped(shape);
    r.dkv[i] = dkv.elements(i * n, n).reshaped(shape);
  }
  return r;
}

Tensor Transformer::attention_input(LayerActivations& x) {
  const Shape full{B_, T_, 3 * C_local_};
  if (!expands_kv()) return x.qkv.view(full);
  const int BT = B_ * T_;
  kernels::expand_kv(ctx_, qkv_full_.view({BT, 3 * C_local_}), x.qkv.view({BT, qkv_local_}), heads_local_, kv_local_);
  return qkv_full_.view(full);
}

// The rows of wpe at this rank's chunks' positions (chunk k: positions [k·n, (k + 1)·n)).
const float* Transformer::local_positions() {
  if (!parts_.learned_positions()) return nullptr;  // rotary positions, in the blocks
  if (cp_.size == 1) return p_.wpe;
  const int n = T_ / 2, C = config_.channels;
  for (int local = 0; local < 2; ++local)
    kernels::copy(ctx_, positions_.view().elements(int64_t(local) * n * C, int64_t(n) * C),
                  on_device(p_.wpe + int64_t(cp_.chunk(cp_.rank, local)) * n * C, {n * C}));
  return positions_.data();
}

float* Transformer::local_position_gradients() {
  if (!parts_.learned_positions()) return nullptr;
  if (cp_.size == 1) return g_.wpe;
  kernels::clear(ctx_, d_positions_.view());
  return d_positions_.data();
}

void Transformer::add_position_gradients() {
  if (cp_.size == 1 || !parts_.learned_positions()) return;  // summed into wpe's gradient directly
  const int n = T_ / 2, C = config_.channels;
  for (int local = 0; local < 2; ++local)
    kernels::add_inplace(ctx_, on_device(g_.wpe + int64_t(cp_.chunk(cp_.rank, local)) * n * C, {n * C}),
                         d_positions_.view().elements(int64_t(local) * n * C, int64_t(n) * C));
}

// The linear layers as block_forward and head_forward call them: the row-parallel ones (the
// attention projection, MLP down) add their bias after the all-reduce, not in the GEMM.
void Transformer::prepare_kernels(int B, int T) {
  const int BT = B * T, C = config_.channels, Cl = C_local_;
  const kernels::Precision p = gemm_.precision;
  if (layers_ > 0) {
    kernels::prepare_linear(ctx_, p, BT, C, qkv_local_, parts_.biases);  // qkv
    kernels::prepare_linear(ctx_, p, BT, Cl, C, false);             // attention projection
    kernels::prepare_linear(ctx_, p, BT, C, fc_local_, parts_.biases);   // MLP up
    kernels::prepare_linear(ctx_, p, BT, mlp_local_, C, false);     // MLP down
    if (!flash_) kernels::prepare_attention(ctx_, p, B, T, Cl, heads_local_);
  }
  if (!tp_.slice.last_stage) return;
  const int chunk = head_chunk(BT);  // the tied head, over the whole batch or chunks (and the last, shorter)
  if (chunk == 0 || BT % chunk != 0) kernels::prepare_linear(ctx_, p, chunk == 0 ? BT : BT % chunk, C, vocab_.rows, false);
  if (chunk > 0) kernels::prepare_linear(ctx_, p, chunk, C, vocab_.rows, false);
}

int Transformer::head_chunk(int BT) const {
  if (!tp_.slice.last_stage || classifier_chunk_ == 0) return 0;
  return std::min(classifier_chunk_, BT);
}

float* Transformer::stage_input(int slot) { return slots_.at(slot).stage_input.data(); }
const float* Transformer::output(int slot) const {
  const Slot& s = slots_.at(slot);
  return s.layers.at(s.last).residual3.data<float>();
}
const float* Transformer::losses(int slot) const { return slots_.at(slot).losses.data(); }
const float* Transformer::logits(int slot) const {
  if (head_chunk(B_ * T_) > 0) throw std::logic_error("Transformer::logits: the chunked classifier keeps no logits");
  return slots_.at(slot).logits.data();
}
float* Transformer::output_gradient() { return d_residual_.data(); }
const float* Transformer::input_gradient() const { return d_residual_.data(); }
void Transformer::copy_input_gradient(float* into) const {
  kernels::copy(ctx_, view(into, d_residual_.size(), device()), d_residual_.view());
}

int Transformer::chunk_of(int l) const {
  int j = 0;
  while (j + 1 < chunks_ && l >= chunk_begin_[j + 1]) ++j;
  return j;
}

// Segments of K blocks from each chunk's first block; a chunk's last block ends one.
bool Transformer::keeps_output(int l) const {
  const int j = chunk_of(l), in_chunk = l - chunk_begin_[j];
  return (in_chunk + 1) % interval_ == 0 || in_chunk == chunk_size_[j] - 1;
}

Transformer::LayerActivations& Transformer::layer_state(Slot& s, int l) {
  return interval_ ? work_[(l - chunk_begin_[chunk_of(l)]) % interval_] : s.layers[l];
}

Transformer::Kept& Transformer::output_kept(Slot& s, int l) {
  return !interval_ || keeps_output(l) ? s.layers[l].residual3
                                       : work_[(l - chunk_begin_[chunk_of(l)]) % interval_].residual3;
}

// Block l's input (l = s.last + 1: the chunk's output, the head's input) in f32.
const float* Transformer::block_input(Slot& s, int l, float* into) {
  if (l == s.first) return s.stage_input.data();
  Kept& previous = output_kept(s, l - 1);
  if (previous.dtype() == DType::f32) return previous.data<float>();
  kernels::convert(ctx_, view(into, previous.size()), previous.view());
  return into;
}

// What backward reads of block l's input (its first norm's): the kept values as they are, 16-bit
// in 16-bit mode (the norms' backward widens them as it reads).
Tensor Transformer::kept_block_input(Slot& s, int l) {
  const Shape rows{rows_, config_.channels};
  if (l == s.first) return s.stage_input.view(rows);
  return output_kept(s, l - 1).view(rows);
}

Tensor Transformer::on_device(const float* data, Shape shape) const { return view(data, shape, device()); }

Tensor Transformer::probabilities(LayerActivations& a) const {
  const Shape shape{B_, heads_local_, T_, T_};
  return recompute_attention_ ? shared_att_.view(shape) : a.att.view(shape);
}

Tensor Transformer::probabilities_low(LayerActivations& a) const {
  const Shape shape{B_, heads_local_, T_, T_};
  return recompute_attention_ ? shared_att_low_.view(shape) : a.att.view(shape);
}

// The attention core of block activations `a` (computed in w), its output kept in a.atty. The
// flash attention reads the kept q, k, v as they are (16-bit in a 16-bit model: no f32 copy) and
// writes a.atty itself — with context parallelism the blocks fold into the f32 w.atty, kept after.
void Transformer::attention_core(LayerActivations& a, LayerActivations& w) {
  const Shape y{B_, T_, C_local_};
  if (!flash_) {
    materialized_attention(a, w, w.atty.data<float>());
    return keep(w.atty, a.atty);
  }
  const Tensor input = a.qkv.view({B_, T_, qkv_local_});  // grouped heads as they are
  if (cp_.size == 1)
    return kernels::flash_attention_forward(ctx_, a.atty.view(y), a.lse.view(), input, heads_local_, kv_local_);
  ring_attention_forward(ctx_, cp_, w.atty.view(y), a.lse.view(), input, ring_buffers(input.dtype), heads_local_,
                         kv_local_);
  keep(w.atty, a.atty);
}

// The materialized core: out (B,T,C/p) f32, and the probabilities kept. bf16: bf16 products, the
// kernel keeps the probabilities. fp16 and fp32: f32 products on the stored values, then the
// probabilities kept (rounded) as every activation.
void Transformer::materialized_attention(LayerActivations& a, LayerActivations& w, float* out) {
  const Tensor y = on_device(out, {B_, T_, C_local_});
  const Shape qkv{B_, T_, 3 * C_local_};
  if (bf16_attention()) {
    kernels::attention_forward_bf16(ctx_, y, probabilities(w), probabilities_low(a), a.qkv.view(qkv), heads_local_);
    return;
  }
  // q, k, v as rotated (and, grouped, the key/value heads expanded); grouped bf16: the f32
  // products on the stored values, as fp16's.
  kernels::attention_forward(ctx_, y, probabilities(w), attention_input(w), heads_local_);
  if (recompute_attention_)  // not kept, but the values as if they were
    kernels::round_to(ctx_, probabilities(w), low_type());
  else
    keep(w.att, a.att);
}

// d_qkv_ from d_atty_: the flash attention from the kept log-sum-exps; the materialized one
// from the probabilities (recomputed first with selective recompute; d_qkv_ is their scratch).
// Then back through the key/value expansion and the rotation, where there are (qkv_gradient()).
void Transformer::attention_core_backward(LayerActivations& a, LayerActivations& w, const Tensor& dqkv_low) {
  const Shape qkv{B_, T_, 3 * C_local_};
  if (flash_) {  // from the kept q, k, v and y as they are
    const Tensor y = a.atty.view({B_, T_, C_local_});
    const Shape compact{B_, T_, qkv_local_};
    const Tensor input = a.qkv.view(compact);
    if (cp_.size > 1)
      ring_attention_backward(ctx_, cp_, d_qkv_.view(compact), d_atty_.view({B_, T_, C_local_}), input, y,
                              a.lse.view(), ring_buffers(input.dtype), heads_local_, kv_local_);
    else
      kernels::flash_attention_backward(ctx_, d_qkv_.view(compact), d_atty_.view(), input, y, a.lse.view(),
                                        heads_local_, kv_local_,
                                        qkv_gradient_writer() == QkvGradientWriter::attention ? dqkv_low : Tensor{});
  } else {
    if (recompute_attention_) materialized_attention(a, w, d_qkv_.data());
    if (bf16_attention())
      kernels::attention_backward_bf16(ctx_, d_qkv_.view(), d_att_.view(), d_atty_.view(), gemm_.dy_low, a.qkv.view(qkv),
                                       probabilities(w), probabilities_low(a), heads_local_);
    else
      kernels::attention_backward(ctx_, d_qkv_.view(), d_att_.view(), d_atty_.view(), attention_input(w),
                                  probabilities(w), heads_local_);
  }
  positions_backward(qkv_gradient_writer() == QkvGradientWriter::rotation ? dqkv_low : Tensor{});
}

// Back through the materialized attention's key/value expansion and the rotation: the qkv GEMM's dy.
void Transformer::positions_backward(const Tensor& dqkv_low) {
  const int BT = B_ * T_;
  if (expands_kv())
    kernels::reduce_kv(ctx_, d_qkv_compact_.view({BT, qkv_local_}), d_qkv_.view({BT, 3 * C_local_}), heads_local_,
                       kv_local_);
  rotate_positions(ctx_, parts_, view(qkv_gradient(), {B_, T_, qkv_local_}, device()), rope_positions_.view(),
                   heads_local_, kv_local_, true, dqkv_low.data ? dqkv_low.reshaped({B_, T_, qkv_local_}) : Tensor{});
}

// In fp32 work and kept are the same buffer: nothing to store.
void Transformer::keep(Kept& work, Kept& kept) {
  if (&work != &kept) kernels::store(ctx_, kept.view(), work.view());
}

void Transformer::widen(const Kept& kept, Kept& work) { kernels::convert(ctx_, work.view(), kept.view()); }

// What the GEMMs read: the kept 16-bit values in 16-bit mode, else the f32 ones.
Operand Transformer::operand(const Kept& work, const Kept& kept) const { return low() ? kept.view() : work.view(); }

Operand Transformer::weight(ParamTensor tensor, int64_t at, int rows, int cols) const {
  Tensor w = params_.view().elements(offsets_[tensor] + at, int64_t(rows) * cols);
  w.shape = Shape{rows, cols};
  return w;
}

Operand Transformer::block_weight(int l, ParamTensor tensor, int rows, int cols) const {
  Tensor w = parameter_memory(l, tensor).elements(0, int64_t(rows) * cols);
  w.shape = Shape{rows, cols};
  return w;
}

// Block l of this stage (global block first_layer + l; parameters indexed by l). `a` keeps the
// activations; in 16-bit mode the kernels compute in work32_ and keep() stores them rounded.
void Transformer::block_forward(LayerActivations& a, int l, const float* input, float* output, Kept& kept_output,
                                int next) {
  LayerActivations& w = low() ? work32_ : a;
  const int BT = B_ * T_, C = config_.channels, Cl = C_local_;
  const size_t c = C;
  const Shape rows{rows_, C};  // this rank's rows of (B·T, C): all of them without sequence parallelism
  use_block(l, next);
  const ParamViews p = block_params(l);
  // The norms write where their output is kept (16-bit mode: rounded, no f32 copy).
  norm_forward(a.ln1.view(rows), a.ln1_mean.view(), a.ln1_var.view(), on_device(input, rows), p.ln1w, p.ln1b);
  const Operand qkv_weight = block_weight(l, kQkvw, qkv_local_, C);
  if (qkv_written_kept()) {  // the flash attention reads q, k, v as the GEMM keeps them: no f32 copy on a device
    column_parallel_forward(ctx_, tp_, a.qkv.view(), a.ln1.view(), gathered_.view(), qkv_weight, bias(p.qkvb), BT, C,
                            qkv_local_);
  } else {  // f32 first: the rotary positions (q and k rotated in place), the materialized attention
    column_parallel_forward(ctx_, tp_, w.qkv.view(), a.ln1.view(), gathered_.view(), qkv_weight, bias(p.qkvb), BT, C,
                            qkv_local_);
    rotate_positions(ctx_, parts_, w.qkv.view({B_, T_, qkv_local_}), rope_positions_.view(), heads_local_, kv_local_,
                     false);
    keep(w.qkv, a.qkv);
  }
  attention_core(a, w);
  // The residual stream in f32, its 16-bit kept copies written by the residual connections.
  const Tensor kept_residual2 = low() ? a.residual2.view(rows) : Tensor{};
  row_parallel_forward(ctx_, tp_, w.residual2.data<float>(), kept_residual2, scratch_c_.data(), input,
                       operand(w.atty, a.atty), block_weight(l, kAttprojw, C, Cl), bias(p.attprojb), BT, Cl, C);
  norm_forward(a.ln2.view(rows), a.ln2_mean.view(), a.ln2_var.view(), w.residual2.view(rows), p.ln2w, p.ln2b);
  if (gelu_layer()) {  // the GEMM and its GELU written once, where they are kept
    column_parallel_gelu_forward(ctx_, tp_, {a.fch.view(), a.fch_gelu.view()}, a.ln2.view(),
                                 gathered_.view(), block_weight(l, kFcw, fc_local_, C), bias(p.fcb), BT, C, fc_local_);
  } else {
    column_parallel_forward(ctx_, tp_, w.fch.view(), a.ln2.view(), gathered_.view(),
                            block_weight(l, kFcw, fc_local_, C), bias(p.fcb), BT, C, fc_local_);
    keep(w.fch, a.fch);
    activation_forward(ctx_, parts_, w.fch_gelu.view({BT, mlp_local_}), w.fch.view({BT, fc_local_}));
    keep(w.fch_gelu, a.fch_gelu);
  }
  const bool output_16 = low() && kept_output.dtype() != DType::f32;
  row_parallel_forward(ctx_, tp_, output, output_16 ? kept_output.view(rows) : Tensor{}, scratch_c_.data(),
                       w.residual2.data<float>(), operand(w.fch_gelu, a.fch_gelu),
                       block_weight(l, kFcprojw, C, mlp_local_), bias(p.fcprojb), BT, mlp_local_, C);
  if (low() && !output_16)  // a chunk's last output, kept in f32 as 16-bit values
    kernels::round_to(ctx_, view(output, static_cast<size_t>(rows_) * c), low_type());
}

// Blocks first … last forward. Outputs go where they are kept (f32) or, in 16-bit mode, through
// the two residual-stream buffers while their rounded values are stored.
void Transformer::forward_blocks(Slot& s, int first, int last) {
  const float* input = block_input(s, first, stream_[0].data());
  for (int l = first; l <= last; ++l) {
    Kept& out = output_kept(s, l);
    float* output = out.dtype() == DType::f32 ? out.data<float>() : stream_[(l - first + 1) % 2].data();
    block_forward(layer_state(s, l), l, input, output, out, l < last ? l + 1 : -1);
    input = output;
  }
}

// The final LayerNorm on this rank's rows; with sequence parallelism its output is gathered for
// the classifier, which reads every row.
void Transformer::head_forward(Slot& s, bool with_loss, std::optional<float> backward_scale) {
  const int BT = B_ * T_, C = config_.channels;
  const int64_t mine = first_row_ * C, n = int64_t(rows_) * C;
  // The final LayerNorm writes this rank's rows where they are kept (16-bit mode: rounded).
  const Shape rows{rows_, C};
  const Tensor kept_rows = s.lnf.view().elements(mine, n);
  norm_forward(kept_rows.reshaped(rows), s.lnf_mean.view(), s.lnf_var.view(), s.layers.back().residual3.view(rows),
               p_.lnfw, p_.lnfb);
  if (tp_.splits_rows()) tp_.all_gather_rows(ctx_, s.lnf.view(), kept_rows);
  if (const int chunk = head_chunk(BT); chunk > 0) {  // the logits only chunk by chunk, with the loss
    const ClassifierGradient gradient{s.d_lnf.data(), head_gradients(), backward_scale.value_or(0.0f) / BT,
                                      dlogits_low_.view()};
    if (with_loss)
      chunked_classifier_forward(ctx_, tp_whole_, vocab_, s.losses.data(), s.log_normalizers.data(), loss_scratch_.data(),
                                 logits_chunk_.view(), s.lnf.view(), weight(head_tensor(), 0, vocab_.rows, C), s.targets.data(),
                                 BT, C, chunk, backward_scale ? &gradient : nullptr);
  } else {
    whole_classifier_forward(s, with_loss);
  }
  if (with_loss) kernels::sum_into(ctx_, s.loss_sum.view(), s.losses.view());
}

// The (B·T, Vp/p) logits, kept in the slot for backward, and from them the losses.
void Transformer::whole_classifier_forward(Slot& s, bool with_loss) {
  const int BT = B_ * T_, C = config_.channels;
  column_parallel_forward(ctx_, tp_whole_, s.logits.view(), s.lnf.view(), Tensor{},
                          weight(head_tensor(), 0, vocab_.rows, C), nullptr, BT, C, vocab_.rows);
  if (!with_loss) return;
  vocab_parallel_cross_entropy(ctx_, tp_whole_, vocab_, s.losses.data(), s.log_normalizers.data(),
                               loss_scratch_.data(), s.logits.data(), s.targets.data(), BT);
}

// Device work only, from the slot's tokens or received input to its output or loss sum.
void Transformer::forward_work(Slot& s, bool with_loss, std::optional<float> backward_scale) {
  if (embeds(s)) {
    begin_edge();
    vocab_parallel_embedding_forward(ctx_, tp_, vocab_, s.stage_input.data(), scratch_c_.data(), s.inputs.data(),
                                     weight(kWte, 0, vocab_.rows, config_.channels), local_positions(), B_, T_,
                                     config_.channels);
    // Kept as values of the storage type (in f32: it is also what a pipeline stage receives).
    kernels::round_to(ctx_, s.stage_input.view(), low_type());
    end_edge();
  }
  forward_blocks(s, s.first, s.last);
  if (!heads(s)) return;
  begin_edge();
  head_forward(s, with_loss, backward_scale);
  end_edge();
}

void Transformer::enqueue_forward(int slot, const int32_t* inputs, const int32_t* targets, int B, int T,
                           std::optional<float> backward_scale) {
  prepare(B, T);
  refresh_f32_reads();
  Slot& s = slots_.at(slot);
  const bool with_loss = heads(s) && targets != nullptr;
  if (embeds(s)) kernels::upload(ctx_, s.inputs.view(), inputs);
  if (with_loss) kernels::upload(ctx_, s.targets.view(), targets);
  // Host state, set outside the recorded work (a replay does not run the lambda).
  s.head_gradient = with_loss && head_chunk(B * T) > 0 ? backward_scale : std::nullopt;
  const Work kind = s.head_gradient ? Work::forward_for_backward : with_loss ? Work::forward_with_loss : Work::forward;
  run_recorded(kind, slot, s.head_gradient.value_or(0.0f), [&] { forward_work(s, with_loss, s.head_gradient); });
  fence_groups();
}

// The previous pass's fences waited for (under the watchdogs), this one's set: the host runs at
// most one pass ahead of the tensor group's all-reduces, the context ring and ZeRO-3's block
// gathers on a device.
// The gathers' fence first: a block's gather that never completes stalls the whole stream, and
// the first fence waited for names its group in the watchdog's message.
void Transformer::fence_groups() {
  gather_fence_ = gather_fence_of_ ? gather_fence_of_() : comm::Work{};
  tensor_fence_ = tp_.fence();
  context_fence_ = cp_.fence();
}

void Transformer::settle_communication() {
  gather_fence_.wait();
  tensor_fence_.wait();
  context_fence_.wait();
}

float Transformer::forward(int slot, const int32_t* inputs, const int32_t* targets, int B, int T) {
  enqueue_forward(slot, inputs, targets, B, T);
  if (!heads(slots_.at(slot)) || targets == nullptr) return 0.0f;
  settle_communication();
  double sum = 0.0;
  kernels::download(ctx_, &sum, slots_.at(slot).loss_sum.view());
  return static_cast<float>(sum / (B * T));
}

void Transformer::keep_losses_for(int micro_batches) {
  const size_t n = tp_.slice.last_stage ? static_cast<size_t>(micro_batches) : 0;
  if (kept_losses_.size() == n) return;
  kept_losses_ = Buffer<double>();  // freed before its replacement exists
  if (n > 0) kept_losses_ = Buffer<double>(n, kActs, backend_, kDevice);
}

void Transformer::keep_loss(int slot, int index) {
  REQUIRE(index >= 0 && static_cast<size_t>(index) < kept_losses_.size(),
          "keep_loss: micro-batch " << index << " with room for " << kept_losses_.size() << " (keep_losses_for)");
  kernels::copy(ctx_, view(kept_losses_.data() + index, 1, kept_losses_.device()), slots_.at(slot).loss_sum.view());
}

Tensor Transformer::kept_loss_sums(int count) {
  settle_communication();
  return view(kept_losses_.data(), static_cast<size_t>(count), kept_losses_.device());
}

void Transformer::set_graphs(bool on) {
  if (!on) drop_graphs();
  graphs_ = on;
}

void Transformer::drop_graphs() {
  for (auto& [what, recorded] : recorded_)
    if (recorded.graph != nullptr) backend_.destroy_graph(recorded.graph);
  recorded_.clear();
}

void Transformer::run_recorded(Work kind, int slot, float loss_scale, const std::function<void()>& work) {
  if (!graphs_ || !param_slots_.empty()) return work();  // slots: a replay would skip the gathers
  Recorded& recorded = recorded_[{kind, slot}];
  if (recorded.graph != nullptr && recorded.loss_scale != loss_scale) {
    backend_.destroy_graph(recorded.graph);
    recorded.graph = nullptr;
  }
  if (recorded.graph == nullptr) {
    if (!recorded.ran) {
      recorded.ran = true;
      return work();
    }
    capturing_ = true;
    try {
      recorded.graph = backend_.capture_graph(stream(), work);
    } catch (...) {
      capturing_ = false;
      throw;
    }
    capturing_ = false;
    recorded.loss_scale = loss_scale;
  }
  backend_.launch_graph(recorded.graph, stream());
  ++graph_replays_;
}

// 16-bit `into`: the input GEMM rounds dy into it as it reads it (no pass of its own). f32
// (fp32, or the stage's last output in 16-bit mode): a copy.
GemmMode Transformer::defer_gradient(const float* dy, Kept& into) {
  GemmMode mode = gemm_;
  if (into.dtype() != DType::f32) mode.dy_low = into.view();
  else kernels::copy(ctx_, into.view(), view(dy, into.size(), device()));
  return mode;
}

// The gradient of GPT-2's GELU input (B·T, 4C/p) in fc's operand type: d_fch_, f32 or 16-bit
// (the f32 values are not written: linear_gelu_backward).
Tensor Transformer::fc_input_gradient() { return d_fch_.view({B_ * T_, fc_local_}); }

// An f32 copy in 16-bit mode is narrowed in place (its last use): the values the input GEMM read.
Tensor Transformer::deferred_gradient(Kept& kept) {
  if (!low() || kept.dtype() != DType::f32) return kept.view();
  return kernels::narrow(ctx_, kept.view(), low_type());
}

Tensor Transformer::stream_gradient_low() const {
  const int C = config_.channels;
  return dy_low_.view().elements(first_row_ * C, int64_t(rows_) * C).reshaped({rows_, C});
}

// defer: each GEMM's weight gradient left to block_weight_gradients, its dy kept where
// backward_inputs says.
void Transformer::block_backward(LayerActivations& a, int l, const Tensor& input, float* dresidual, bool defer,
                                 int next, LowGradient low_gradient) {
  LayerActivations& w = low() ? work32_ : a;
  const int BT = B_ * T_, C = config_.channels, Cl = C_local_;
  const Shape rows{rows_, C};  // this rank's rows of (B·T, C)
  const Tensor d_stream = on_device(dresidual, rows);
  const Tensor d_ln = on_device(d_ln_.data() + first_row_ * C, rows);  // the column-parallel dx, this rank's rows
  const ParamViews g = block_gradients(l);
  use_block(l, next);
  const ParamViews p = block_params(l);
  if (!grad_slots_.empty()) {  // this micro-batch's alone, once the slot's last reader is done
    if (slot_reuse_) slot_reuse_(slot_of(l));
    kernels::clear(ctx_, grad_slots_[static_cast<size_t>(slot_of(l))].view());
  }
  if (low()) {  // the kept values the f32 kernels read (the GEMMs read the 16-bit ones)
    if (!gelu_layer()) widen(a.fch, w.fch);  // GELU's backward reads the kept values themselves
    if (!flash_ && !bf16_attention()) widen(a.qkv, w.qkv);  // the flash and bf16's attention read the 16 bits
    if (!flash_ && !recompute_attention_) widen(a.att, w.att);
  }
  // Deferred: no weight gradient here, and each GEMM's dy kept (defer_gradient). written: dy's
  // 16-bit values are in dy_low_ already (gradients_written_low).
  auto dw = [&](float* gradient) { return defer ? nullptr : gradient; };
  auto mode = [&](const float* dy, Kept& into, bool written = false) {
    GemmMode m = defer ? defer_gradient(dy, into) : gemm_;
    m.dy_low_written = written;
    return m;
  };
  const bool written = gradients_written_low(defer);
  if ((low_gradient.given || low_gradient.wanted) && !written)
    throw std::logic_error("Transformer::block_backward: 16-bit gradients from their producers without their route");
  const bool dqkv_written = written && qkv_gradient_writer() != QkvGradientWriter::none;
  // MLP branch: residual3 = residual2 + fcproj(act(fc(norm2(residual2))))
  if (gelu_layer()) {  // GELU's backward in fcproj's input-gradient GEMM, its result in fc's operand type
    const Tensor dpre = fc_input_gradient();
    row_parallel_gelu_backward(ctx_, mode(dresidual, a.residual3, low_gradient.given), tp_,
                               {dpre, on_device(bias(g.fcb), {fc_local_}), a.fch.view()},
                               dw(g.fcprojw), bias(g.fcprojb), dresidual, scratch_c_.data(),
                               operand(w.fch_gelu, a.fch_gelu), block_weight(l, kFcprojw, C, mlp_local_), BT,
                               mlp_local_, C);
    const float* dpre_f32 = low() ? nullptr : d_fch_.data<float>();
    GemmMode fc = mode(dpre_f32, a.fch);  // fp32: dpre is d_fch_ (deferred: copied into a.fch)
    if (low()) {  // deferred: dpre kept in a.fch, the mode's 16-bit dy, for the weight gradient
      if (defer) kernels::copy(ctx_, a.fch.view(), dpre);
      else fc.dy_low = dpre;
    }
    column_parallel_backward(ctx_, fc, tp_, d_ln_.data(), dw(g.fcw), nullptr, dpre_f32,
                             a.ln2.view(), gathered_.view(), block_weight(l, kFcw, fc_local_, C), BT, C,
                             fc_local_);
  } else {
    row_parallel_backward(ctx_, mode(dresidual, a.residual3, low_gradient.given), tp_, d_fch_gelu_.data(), dw(g.fcprojw),
                          bias(g.fcprojb), dresidual, scratch_c_.data(), operand(w.fch_gelu, a.fch_gelu),
                          block_weight(l, kFcprojw, C, mlp_local_), BT, mlp_local_, C);
    activation_backward(ctx_, parts_, d_fch_.view({BT, fc_local_}), w.fch.view({BT, fc_local_}),
                        d_fch_gelu_.view({BT, mlp_local_}));
    column_parallel_backward(ctx_, mode(d_fch_.data<float>(), a.fch), tp_, d_ln_.data(), dw(g.fcw), bias(g.fcb),
                             d_fch_.data<float>(), a.ln2.view(), gathered_.view(),
                             block_weight(l, kFcw, fc_local_, C), BT, C, fc_local_);
  }
  norm_backward(d_stream, g.ln2w, g.ln2b, d_ln, a.residual2.view(rows), p.ln2w,
                p.ln2b, a.ln2_mean.view(), a.ln2_var.view(), written ? stream_gradient_low() : Tensor{});
  // Attention branch: residual2 = input + attproj(attention(qkv(ln1(input))))
  row_parallel_backward(ctx_, mode(dresidual, a.residual2, written), tp_, d_atty_.data(), dw(g.attprojw),
                        bias(g.attprojb), dresidual, scratch_c_.data(), operand(w.atty, a.atty),
                        block_weight(l, kAttprojw, C, Cl), BT, Cl, C);
  attention_core_backward(a, w, dqkv_written ? dy_low_.view().elements(0, int64_t(BT) * qkv_local_) : Tensor{});
  column_parallel_backward(ctx_, mode(qkv_gradient(), a.qkv, dqkv_written), tp_, d_ln_.data(), dw(g.qkvw),
                           bias(g.qkvb), qkv_gradient(), a.ln1.view(), gathered_.view(),
                           block_weight(l, kQkvw, qkv_local_, C), BT, C, qkv_local_);
  norm_backward(d_stream, g.ln1w, g.ln1b, d_ln, input, p.ln1w,
                p.ln1b, a.ln1_mean.view(), a.ln1_var.view(), low_gradient.wanted ? stream_gradient_low() : Tensor{});
  if (!grad_slots_.empty() && kv_replicas(config_, tp_.slice.size) > 1) sum_replicated_kv_rows(g.qkvw);
}

void Transformer::norm_forward(const Tensor& out, const Tensor& mean, const Tensor& variance, const Tensor& inp,
                               const float* weight, const float* bias) {
  const int C = config_.channels;
  model::norm_forward(ctx_, parts_, out, mean, variance, inp, on_device(weight, {C}), on_device(bias, {C}));
}

// The norm's backward on this rank's rows: dinp +=, and its (C) weight gradients +=. With sequence
// parallelism each rank's rows give a part of those: summed over the tensor group in a scratch
// first, so that what accumulates (over micro-batches) is the whole.
void Transformer::norm_backward(const Tensor& dinp, float* dweight, float* dbias, const Tensor& dout, const Tensor& inp,
                                const float* weight, const float* bias, const Tensor& mean, const Tensor& variance,
                                const Tensor& dinp_low) {
  const int C = config_.channels;
  const Tensor gamma = on_device(weight, {C}), beta = on_device(bias, {C});
  if (!tp_.splits_rows())
    return model::norm_backward(ctx_, parts_, dinp, on_device(dweight, {C}), on_device(dbias, {C}), dout, inp, gamma,
                                beta, mean, variance, dinp_low);
  float* part = norm_partial_.data();  // (2C): dγ (and dβ) of this rank's rows
  const size_t n = static_cast<size_t>(parts_.norm_gradients()) * C;
  kernels::clear(ctx_, norm_partial_.view());
  model::norm_backward(ctx_, parts_, dinp, on_device(part, {C}), on_device(part + C, {C}), dout, inp, gamma, beta, mean,
                       variance, dinp_low);
  tp_.all_reduce_sum(part, n);
  kernels::add_inplace(ctx_, on_device(dweight, {C}), on_device(part, {C}));
  if (parts_.norm_gradients() == 2) kernels::add_inplace(ctx_, on_device(dbias, {C}), on_device(part + C, {C}));
}

// The four GEMMs' dW += dyᵀ·x from what block_backward(defer) kept; x are the kept inputs.
void Transformer::block_weight_gradients(LayerActivations& a, int l) {
  const int BT = B_ * T_, C = config_.channels, Cl = C_local_;
  use_block(l, -1);
  const ParamViews g = block_gradients(l);
  weight_gradient(ctx_, g.fcprojw, deferred_gradient(a.residual3), a.fch_gelu.view(),
                  block_weight(l, kFcprojw, C, mlp_local_), BT, mlp_local_, C);
  weight_gradient(ctx_, g.fcw, deferred_gradient(a.fch), a.ln2.view(),
                  block_weight(l, kFcw, fc_local_, C), BT, C, fc_local_);
  weight_gradient(ctx_, g.attprojw, deferred_gradient(a.residual2), a.atty.view(),
                  block_weight(l, kAttprojw, C, Cl), BT, Cl, C);
  weight_gradient(ctx_, g.qkvw, deferred_gradient(a.qkv), a.ln1.view(),
                  block_weight(l, kQkvw, qkv_local_, C), BT, C, qkv_local_);
}

void Transformer::head_backward(Slot& s, float loss_scale, float* dresidual, bool defer, bool leave_low) {
  const int BT = B_ * T_, C = config_.channels;
  // The final LayerNorm's output gradient: from the training forward, or computed here.
  Tensor d_lnf = d_ln_.view();
  if (s.head_gradient)
    d_lnf = s.d_lnf.view();
  else if (const int chunk = head_chunk(BT); chunk > 0)
    chunked_classifier_backward(ctx_, tp_whole_, vocab_, {d_ln_.data(), head_gradients(), loss_scale / BT, dlogits_low_.view()},
                                logits_chunk_.view(), s.lnf.view(), weight(head_tensor(), 0, vocab_.rows, C),
                                s.log_normalizers.data(),
                                s.targets.data(), BT, C, chunk);
  else
    whole_classifier_backward(s, loss_scale, defer);
  kernels::clear(ctx_, view(dresidual, d_residual_.size()));
  const Shape rows{rows_, C};  // d_lnf is whole on every rank: this rank's rows of it
  norm_backward(on_device(dresidual, rows), g_.lnfw, g_.lnfb, d_lnf.elements(first_row_ * C, int64_t(rows_) * C).reshaped(rows),
                s.layers.back().residual3.view(rows), p_.lnfw, p_.lnfb, s.lnf_mean.view(), s.lnf_var.view(),
                leave_low ? stream_gradient_low() : Tensor{});
}

// d_ln_ (B·T, C) and the head's dwte from the slot's kept logits, in place. defer: dwte left to
// weights_work, from the dlogits left in the logits' memory (s.head_dy). The chunked classifier
// computes its dwte chunk by chunk (its dlogits are not kept): never deferred.
void Transformer::whole_classifier_backward(Slot& s, float loss_scale, bool defer) {
  const int BT = B_ * T_, C = config_.channels;
  float* dlogits = s.logits.data();  // in place: the logits are not needed after this
  const Tensor logits = s.logits.view({BT, vocab_.rows});
  kernels::crossentropy_backward(ctx_, logits, logits, s.log_normalizers.view(), s.targets.view(), vocab_.begin,
                                 loss_scale / BT, vocab_.valid);
  GemmMode head = gemm_;  // 16-bit mode: dlogits narrowed in place, no (B,T,Vp/p) scratch
  if (low()) head.dy_low = kernels::narrow(ctx_, s.logits.view(), low_type());
  column_parallel_backward(ctx_, head, tp_whole_, d_ln_.data(), defer ? nullptr : head_gradients(), nullptr, dlogits,
                           s.lnf.view(), Tensor{}, weight(head_tensor(), 0, vocab_.rows, C), BT, C, vocab_.rows);
  if (defer) s.head_dy = low() ? head.dy_low : s.logits.view({BT, vocab_.rows});
}

void Transformer::check_head_gradient(const Slot& s, float loss_scale) const {
  if (s.head_gradient && *s.head_gradient != loss_scale)
    throw std::logic_error("Transformer::backward: loss scale " + std::to_string(loss_scale) + ", but the forward computed the "
                           "head's gradient for " + std::to_string(*s.head_gradient));
}

void Transformer::backward(int slot, float loss_scale, const std::function<void(int)>& on_final) {
  Slot& s = slots_.at(slot);
  check_head_gradient(s, loss_scale);
  if (on_final) backward_work(s, loss_scale, on_final, false);  // the hook launches work of its own
  else run_recorded(s.head_gradient ? Work::backward_from_head : Work::backward, slot, loss_scale,
                    [&] { backward_work(s, loss_scale, {}, false); });
  s.head_gradient.reset();  // used: the slot's next backward needs its own forward's
  fence_groups();
}

void Transformer::backward_inputs(int slot, float loss_scale) {
  if (interval_)
    throw std::logic_error("Transformer::backward_inputs: recompute every " + std::to_string(interval_) +
                           " blocks keeps no GEMM inputs for a deferred weight gradient");
  if (tp_.splits_rows())  // a row-parallel dy is (B·T, C), the kept activation it would go in this rank's rows
    throw std::logic_error("Transformer::backward_inputs: no deferred weight gradients with sequence parallelism");
  if (!grad_slots_.empty())  // the slot would be reused before the deferred pass filled it
    throw std::logic_error("Transformer::backward_inputs: no deferred weight gradients with gradient slots (ZeRO-2)");
  Slot& s = slots_.at(slot);
  check_head_gradient(s, loss_scale);
  run_recorded(s.head_gradient ? Work::backward_inputs_from_head : Work::backward_inputs, slot, loss_scale,
               [&] { backward_work(s, loss_scale, {}, true); });
  s.head_gradient.reset();
  fence_groups();
}

void Transformer::backward_weights(int slot, const std::function<void(int)>& on_final) {
  Slot& s = slots_.at(slot);
  if (on_final) weights_work(s, on_final);
  else run_recorded(Work::backward_weights, slot, 0.0f, [&] { weights_work(s, {}); });
}

// No communication: the weight gradients are local in both tensor-parallel layers. The whole
// classifier's head first, as backward() orders it.
void Transformer::weights_work(Slot& s, const std::function<void(int)>& on_final) {
  if (heads(s) && !tp_.slice.first_stage && head_chunk(B_ * T_) == 0) {
    begin_edge();
    weight_gradient(ctx_, head_gradients(), s.head_dy, s.lnf.view(), weight(head_tensor(), 0, vocab_.rows, config_.channels), B_ * T_,
                    config_.channels, vocab_.rows);
    end_edge();
  }
  for (int l = s.last; l >= s.first; --l) {
    block_weight_gradients(s.layers[l], l);
    if (on_final) on_final(l);
  }
  if (on_final && s.chunk == 0) on_final(-1);  // the embedding's and the final LayerNorm's: final since backward_inputs
}

void Transformer::backward_work(Slot& s, float loss_scale, const std::function<void(int)>& on_final, bool defer) {
  float* dresidual = d_residual_.data();  // on non-last stages: the received gradient
  const bool written = gradients_written_low(defer) && s.last >= s.first;
  bool dresidual_low = false;  // dy_low_ holds dresidual rounded (gradients_written_low)
  if (heads(s)) {
    begin_edge();
    // One stage holding both ends sums the embedding's dwte after the head's: deferring the
    // head's would change that order (and the bits).
    head_backward(s, loss_scale, dresidual, defer && !tp_.slice.first_stage, written);
    dresidual_low = written;
    end_edge();
  }
  // Segments of K blocks from the last: with recompute, the segment's forward runs again from
  // its kept input — the same kernels on the same data, so the activations (and the gradients)
  // are bitwise the originals — then its blocks' backward. Without, one segment of all the
  // chunk's blocks.
  const int K = interval_ ? interval_ : std::max(chunk_size_[s.chunk], 1);
  for (int last = s.last; last >= s.first;) {
    const int first = s.first + (last - s.first) / K * K;
    if (interval_) forward_blocks(s, first, last);
    // The block used after block `first`: with recompute the previous segment's first, whose
    // forward runs again next.
    const int after_first = first == s.first ? -1 : interval_ ? s.first + (first - 1 - s.first) / K * K : first - 1;
    for (int l = last; l >= first; --l) {
      const bool wanted = written && l > s.first;  // block l − 1's backward is next
      block_backward(layer_state(s, l), l, kept_block_input(s, l), dresidual, defer, l > first ? l - 1 : after_first,
                     {dresidual_low, wanted});
      dresidual_low = wanted;
      if (on_final) on_final(l);
    }
    last = first - 1;
  }
  if (embeds(s)) {
    begin_edge();
    vocab_parallel_embedding_backward(ctx_, tp_, vocab_, g_.wte, local_position_gradients(), dresidual,
                                      scratch_c_.data(), s.inputs.data(), B_, T_, config_.channels);
    add_position_gradients();
    end_edge();
  }
  if (on_final && s.chunk == 0) on_final(-1);  // chunk 0's backward is the stage's last (interleaved)
}

// A mark inside a capture would be recorded into the graph, and could not be read.
void Transformer::begin_edge() {
  if (!capturing_) edge_times_.begin();
}

void Transformer::end_edge() {
  if (!capturing_) edge_times_.end();
}

double Transformer::take_edge_seconds() { return edge_times_.take_seconds(); }

}  // namespace trident::model
