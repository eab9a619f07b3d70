// The step model: FLOPs, bytes and α-β per level for one layout (docs/PLANNER.md).
#include "plan/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "kernels/common/rows.hpp"
#include "model/block_parts.hpp"
#include "model/params.hpp"
#include "pipeline/schedule.hpp"
#include "plan/gemm_model.hpp"
#include "tensor/buffer.hpp"

namespace trident::plan {
namespace {

constexpr double kEmbeddingGradientBytes = 4;  // the tied embedding's gradient is summed in f32
// AdamW per parameter of the shard: read the master (an fp32 model's parameters), g, m, v, write
// them back but g (and the 16-bit parameters), and the gradient norm's read: 36 bytes, rounded up.
constexpr double kOptimizerBytesPerParameter = 36;

bool low(const std::string& precision) { return precision == "bf16" || precision == "fp16"; }
// Bytes of a value as the model stores it (a parameter, what a ZeRO all-gather moves; a kept
// activation): 16-bit in bf16/fp16.
double stored_bytes(const Layout& l) { return low(l.precision) ? 2 : 4; }
// Bytes per value of an element-wise pass (Workload::elementwise_value_bytes_low16).
double elementwise_bytes(const Workload& w, const Layout& l) {
  return low(l.precision) ? w.elementwise_value_bytes_low16 : 4;
}

// Interleaved: blocks per virtual stage (l.stage_layers names them, or the even split); else empty.
std::vector<int> chunk_layers(const Workload& w, const Layout& l) {
  if (l.virtual_stages == 1) return {};
  return pipeline::stage_layer_counts(w.config.layers, l.pipeline * l.virtual_stages,
                                      std::vector<long>(l.stage_layers.begin(), l.stage_layers.end()));
}

// Blocks per stage (interleaved: its chunks').
std::vector<int> stage_layers(const Workload& w, const Layout& l) {
  const std::vector<int> chunks = chunk_layers(w, l);
  if (!chunks.empty()) return pipeline::stage_totals(chunks, l.pipeline);
  return pipeline::stage_layer_counts(w.config.layers, l.pipeline,
                                      std::vector<long>(l.stage_layers.begin(), l.stage_layers.end()));
}

// dp: the rank in the stage's gradient group (context rank + context · replica).
int rank_of(const Layout& l, int tp, int dp, int pp) { return tp + l.tensor * (dp + l.gradient_group() * pp); }

// The group of `kind` on stage `pp` that spans the widest level: with tensor groups not filling
// whole nodes (tensor 6 on nodes of 8), some groups cross a node boundary and set the pace.
GroupShape widest_group(const Layout& l, int pp, bool tensor, const Hardware& hw) {
  GroupShape widest;
  const int groups = tensor ? l.gradient_group() : l.tensor, members = tensor ? l.tensor : l.gradient_group();
  std::vector<int> ranks(members);
  for (int g = 0; g < groups; ++g) {
    for (int m = 0; m < members; ++m) ranks[m] = tensor ? rank_of(l, m, g, pp) : rank_of(l, g, m, pp);
    const GroupShape shape = group_shape(ranks, hw);
    if (g == 0 || shape.span > widest.span) widest = shape;
    if (widest.span == Level::CrossRack) break;  // none is wider
  }
  return widest;
}

// One point-to-point message between two ranks: α + S/β of the level they share.
double p2p_seconds(double bytes, int a, int b, const Hardware& hw, std::array<double, 3>& level_bytes) {
  const GroupShape g = group_shape({a, b}, hw);
  level_bytes[static_cast<int>(g.span)] += bytes;
  const Link& link = hw.links[static_cast<int>(g.span)];
  return link.latency_s + bytes / link.bandwidth_bytes_per_s;
}

// Trident's selective recompute, the attention probabilities alone: counted where it is used, its
// q·kᵀ again (attention_seconds) and its softmax (the element-wise values).
bool trident_selective(const Workload& w, const Layout& l) { return l.recompute == "selective" && !w.torchtitan_recompute; }

// What recompute runs again of a block's forward in a micro-batch, as shares of it (averaged over
// the blocks where only some are recomputed): of each weight GEMM (block_weight_gemms' order), of
// the attention products, of the element-wise passes and of the tensor-parallel collectives.
struct Recomputed {
  std::array<double, 4> gemm{};
  double attention = 0, elementwise = 0, collectives = 0;
};

Recomputed recomputed(const Workload& w, const Layout& l) {
  Recomputed r;
  auto all = [&](double share) {
    r.gemm.fill(share);
    r.attention = r.elementwise = r.collectives = share;
  };
  if (l.recompute == "full" || (l.recompute == "every_k" && !w.torchtitan_recompute)) all(1);
  else if (l.recompute == "every_k") all(1.0 / std::max(1, l.recompute_interval));  // one block in K
  else if (l.recompute == "selective" && w.torchtitan_recompute) {
    // TorchTitan's block runs its matmuls as wq, wk, wv, wo, w1, w3, w2 and recomputes every
    // second: wk (of the [q | k | v] rows), wo and w3 (half of [gate | up]); the attention's output
    // is kept. Of the sequence-parallel collectives (2 all-gathers, 2 reduce-scatters) the
    // all-gathers run again; without sequence parallelism the all-reduce after wo.
    const double kv = model::kv_heads(w.config), heads = w.config.heads;
    r.gemm = {kv / (heads + 2 * kv), 1, 0.5, 0};
    r.elementwise = 1;
    r.collectives = 0.5;
  }
  return r;
}

// One block's forward weight GEMMs on a tensor rank for a micro-batch of `tokens` on this rank:
// [q | k | v], the attention's output, the MLP's input ([gate | up]) and output, each with this
// rank's rows or columns. With attention_seconds' q·kᵀ and P·v (every query of the rank against
// the sequence's T keys): 2·weights + 4·T·C FLOPs per token, over t (Narayanan et al. 2021, eq. 2;
// tests/unit/test_plan.cpp holds the sum to it). With fewer key/value heads than tensor ranks
// each rank computes its head's k and v rows again.
std::vector<GemmShape> block_weight_gemms(const Workload& w, const Layout& l, double tokens) {
  const model::GptConfig& c = w.config;
  const double C = c.channels, t = l.tensor;
  return {{1, tokens, double(model::qkv_rows_local(c, l.tensor)), C},
          {1, tokens, C, C / t},
          {1, tokens, double(model::fc_rows(c)) / t, C},
          {1, tokens, C, double(model::mlp_hidden(c)) / t}};
}

// The share of a block's forward FLOPs that recompute runs again (weight GEMMs and attention
// products, per token on one rank's whole width).
double recomputed_forward_share(const Workload& w, const Layout& l) {
  const Recomputed again = recomputed(w, l);
  Layout whole = l;
  whole.tensor = 1;
  const std::vector<GemmShape> gemms = block_weight_gemms(w, whole, 1);
  const double attention = 4.0 * w.seq_len * w.config.channels;
  double all = attention, redone = again.attention * attention;
  for (size_t i = 0; i < gemms.size(); ++i) all += gemms[i].flops(), redone += again.gemm[i] * gemms[i].flops();
  return redone / all;
}

// The attention products of one block on a micro-batch: q·kᵀ (Tq, T, hs) and P·v (Tq, hs, T)
// per local head, Tq = T / context queries per sequence. passes: 1 forward, 2 backward (dP,
// dV, dQ, dK: four products of the same size; the flash attention's more,
// attention_backward_passes), 0.5 for selective recompute's q·kᵀ.
double attention_seconds(const Workload& w, const Layout& l, const Hardware& hw, double passes) {
  const double T = w.seq_len, Tq = T / l.context, hs = model::head_size(w.config);
  const double batch = double(l.micro_batch) * w.config.heads / l.tensor;
  const GemmShape scores{batch, Tq, T, hs}, values{batch, Tq, hs, T};
  // The flash attention keeps the scores in on-chip memory: its products are bound by the
  // arithmetic alone (no T×T operand travels); the materialized one writes and reads them.
  if (w.flash_attention)
    return passes * (scores.flops() + values.flops()) / (hw.peak(l.precision) * hw.gemm_fraction);
  return passes * (gemm_seconds(scores, l.precision, hw) + gemm_seconds(values, l.precision, hw));
}

// The attention's backward in passes of its forward's two products (Workload::
// trident_flash_backward): the flash attention recomputes the scores, five products (S, dV, dP,
// dQ, dK) where one kernel does it all (our CPU's), seven where a queries' kernel (S, dP, dQ) and
// a keys' kernel (S, dP, dV, dK) split it (our CUDA kernels; a profile with compute units is a
// GPU's). On a GPU a 16-bit model's whole sequences go to cuDNN's fused attention
// (Workload::library_attention), counted as others' FlashAttention-2; ring blocks stay ours.
// GPT-2's GELU in its GEMMs' epilogues (Workload::gelu_epilogues): Trident's CUDA kernels for a
// 16-bit model (a profile with compute units is a GPU's).
bool gelu_in_epilogues(const Workload& w, const Layout& l, const Hardware& hw) {
  return w.gelu_epilogues && !w.bias_gelu_pass && hw.compute_units > 0 && low(l.precision) &&
         model::block_parts(w.config).activation == model::ActivationPart::gelu;
}

// Bytes a logit of the loss's row passes over the (tokens, V/t) logits (kernels' crossentropy_*,
// model/classifier.cpp): the row maxima and the sums of exponentials read the f32 logits (4 + 4),
// the gradient reads them and writes dlogits in the GEMMs' type (4 + 2 in 16 bits; 4 + 4 in f32,
// in place); the whole logits (classifier_chunk = 0) in 16 bits are written in f32 in place first
// and narrowed after, a pass of its own (4 + 4, then 4 + 2). The chunked classifier on one rank's
// whole vocabulary is one operation that reads each row once where the row stays on chip — a
// GPU block's shared memory (the profile's shared_memory_kb, as the kernel decides), a
// CPU core's cache — and writes dlogits: 4 + 2 (16 bits) or 4 + 4.
double loss_bytes(const Workload& w, const Layout& l, const Hardware& hw) {
  const double dlogits = low(l.precision) ? 2 : 4;
  const bool on_chip = hw.compute_units == 0 || kernels::loss_row_fits(w.config.vocab, hw.shared_memory_bytes);
  if (w.classifier_chunk > 0 && l.tensor == 1 && on_chip) return 4 + dlogits;
  if (!low(l.precision)) return 4 + 4 + 4 + 4;
  return w.classifier_chunk > 0 ? 4 + 4 + 4 + 2 : 4 + 4 + 4 + 4 + 4 + 2;
}

// cuDNN's fused attention runs Trident's flash attention (Workload::library_attention): on a GPU,
// a 16-bit model's whole sequences.
bool cudnn_attention(const Workload& w, const Layout& l, const Hardware& hw) {
  return w.flash_attention && w.trident_flash_backward && w.library_attention && hw.compute_units > 0 &&
         low(l.precision) && l.context == 1;
}

double attention_backward_passes(const Workload& w, const Layout& l, const Hardware& hw) {
  if (!w.flash_attention || !w.trident_flash_backward) return 2;
  if (hw.compute_units == 0) return 2.5;
  if (cudnn_attention(w, l, hw)) return 2;
  return 3.5;
}

// The GEMM time of one micro-batch's forward and backward (recompute included): of one block,
// and of the head on the last stage (gemm_model.hpp: each product by its shape). The same on
// every stage, so estimate_step times them once.
struct GemmSeconds {
  double block = 0, head = 0;
};

GemmSeconds micro_batch_gemm_seconds(const Workload& w, const Layout& l, const Hardware& hw) {
  const double tokens = double(l.micro_batch) * w.seq_len / l.context;
  GemmSeconds g;
  const Recomputed again = recomputed(w, l);
  const std::vector<GemmShape> forwards = block_weight_gemms(w, l, tokens);
  for (size_t i = 0; i < forwards.size(); ++i) {
    const std::vector<GemmShape> three = with_gradients(forwards[i]);
    g.block += gemm_seconds(three[0], l.precision, hw) * (1 + again.gemm[i]) + gemm_seconds(three[1], l.precision, hw) +
               gemm_seconds(three[2], l.precision, hw);
  }
  const double attention = 1 + attention_backward_passes(w, l, hw) + again.attention + (trident_selective(w, l) ? 0.5 : 0);
  g.block += attention_seconds(w, l, hw, attention);
  // The head: logits (tokens, V/t) = x · wᵀ, and its two gradients.
  for (const GemmShape& h : with_gradients({1, tokens, double(w.config.padded_vocab) / l.tensor, double(w.config.channels)}))
    g.head += gemm_seconds(h, l.precision, hw);
  return g;
}

// A micro-batch's tensor-parallel communication on a stage of `layers` blocks, in all-reduces of
// its (b, T, C) activation (model/tensor_parallel.hpp). Without sequence parallelism: 2 per
// block forward, 2 backward, 2 more when recomputed; the embedding's and the head's input
// gradient's. With it, as all-gathers (AG) and reduce-scatters (RS), each half an all-reduce on
// a ring: forward 2 AG + 2 RS, backward 2 AG of dy + 2 RS of dx + 2 AG of the LayerNorm outputs
// again (3 all-reduces' worth; 2 where the gathered input is kept, Workload::
// sequence_parallel_regathers), recompute 2; the embedding's RS and its gradient's AG, the
// head's AG of its LayerNorm output and its dH all-reduce. The block's and the head's AGs move
// half the bytes where they carry stored 16-bit values in f32 messages' place (Workload::
// sequence_parallel_gathers_stored).
double tensor_all_reduces(const Workload& w, const Layout& l, int layers, bool first, bool last) {
  const double again = recomputed(w, l).collectives;
  if (!l.splits_rows()) return layers * 2 * (2 + again) + (first ? 1 : 0) + (last ? 1 : 0);
  const double gather = w.sequence_parallel_gathers_stored && low(l.precision) ? 0.5 : 1.0;  // an AG's bytes
  const double gathers = 2 + 2 + (w.sequence_parallel_regathers ? 2 : 0) + 2 * again;     // a block's AGs
  const double scatters = 2 + 2 + 2 * again;                                               // and RSs
  return layers * (gathers * gather + scatters) / 2 + (first ? 1 : 0) + (last ? 0.5 * gather + 1 : 0);
}

// Of those, what parallel.tp_comm_overlap cannot hide (Workload::tp_overlap_backward_scatters):
// the backward's 2 RS of dx a block, one all-reduce's worth, where they are not overlapped.
double tensor_unoverlapped_all_reduces(const Workload& w, const Layout& l, int layers) {
  return l.splits_rows() && !w.tp_overlap_backward_scatters ? layers : 0;
}

// One block's ring attention on a micro-batch (model/context_parallel.hpp), the part its work
// does not hide: each of the c − 1 forward steps sends the held (k, v) — tokens·2·kv·hs values of
// the rank's key/value heads (all of its heads but for grouped-query attention), in the stored
// type — to the next context rank while the step's two unmasked n×n blocks (4·n²·C/t FLOPs each,
// per sequence, n = T/(2c)) are computed; backward the same with 2.5 times the blocks' work, and
// c sends of the f32 (dk, dv) accumulators after each step's work (not hidden). Recompute runs the
// forward's again.
double context_seconds(const Workload& w, const Layout& l, const Hardware& hw, int stage, double tokens) {
  const double C = w.config.channels, n = double(w.seq_len) / (2 * l.context), c = l.context;
  const int here = rank_of(l, 0, 0, stage), next = rank_of(l, 0, 1, stage);
  std::array<double, 3> bytes{};
  const double columns = double(model::qkv_rows_local(w.config, l.tensor)) - C / l.tensor;  // the (k, v) of qkv
  const double keys = p2p_seconds(tokens * columns * stored_bytes(l), here, next, hw, bytes);
  const double gradients = p2p_seconds(tokens * columns * 4, here, next, hw, bytes);
  const double blocks = 2 * l.micro_batch * 4 * n * n * C / l.tensor / (hw.peak(l.precision) * hw.gemm_fraction);
  const double forward = (c - 1) * std::max(0.0, keys - blocks);
  const double backward = (c - 1) * std::max(0.0, keys - 2.5 * blocks) + c * gradients;
  return forward * (1 + recomputed(w, l).attention) + backward;
}

// The part of a micro-batch's time a stage adds to the fill and drain. ZB-H1 (pipeline/
// schedule.hpp): (f + b − w)/(f + b + w), with a block's forward f = 24C² + 4TC per token (the
// GEMMs and the attention products), its weight gradients w = 24C² (the GEMMs' forward again)
// and its input gradient b = 2f − w (plus selective recompute's q·kᵀ); w ≤ min(f, b), where
// bubble_fraction's closed form is exact.
double fill_share(const Workload& w, const Layout& l) {
  if (l.schedule != pipeline::Schedule::ZeroBubbleH1) return 1.0;
  const double C = w.config.channels, T = w.seq_len;
  const double weights = 2 * model::block_gemm_weights(w.config), f = weights + 4 * T * C;
  const double b = 2 * f - weights + (trident_selective(w, l) ? 2 * T * C : 0);
  return (f + b - weights) / (f + b + weights);
}

// What the estimate reads of each stage more than once, from the search's cache: the parameters
// of each stage's slice of the model and of one block (a tensor rank's), and each stage's widest
// tensor and data group (placing every group of a large layout on the nodes was half the search).
struct StageFacts {
  std::vector<int64_t> parameters;
  int64_t block = 0;
  std::vector<GroupShape> tensor_group, data_group;  // each stage's widest
};
StageFacts stage_facts(const Workload& w, const Layout& l, const Hardware& hw, const MemoryInputs& in, EstimateCache& cache) {
  StageFacts facts;
  for (int stage = 0; stage < l.pipeline; ++stage) {
    facts.parameters.push_back(cache.slice(in, model::stage_partition(in.stage_layers, stage, 0, l.tensor)).parameters);
    for (const bool tensor : {true, false}) {
      const EstimateCache::GroupKey key{tensor, l.tensor, l.gradient_group(), stage, hw.devices_per_node, hw.nodes_per_rack};
      const GroupShape& g = cache.widest_group(key, [&] { return widest_group(l, stage, tensor, hw); });
      (tensor ? facts.tensor_group : facts.data_group).push_back(g);
    }
  }
  facts.block = model::block_parameters(w.config, l.tensor);
  return facts;
}

// ZeRO-2 and 3's communication within one micro-batch on a stage (its time t so far), the part
// the work does not hide, plus the interference on the part it does. 2: the stage's block
// gradients reduce-scattered block by block behind the micro-batch's backward (the last never
// hides) — a bucket per block, the tensors outside the blocks after the step (data_parallel).
// 3 with FSDP's prefetch (Workload::fsdp_prefetch): each block's parameters all-gathered behind
// the previous block's forward (the first block's not hidden), gathered again with its gradients
// reduce-scattered behind its neighbour's backward; the embedding's and head's gathered and
// scattered once, not hidden. 3 as Trident runs it (dp/parameter_shards.hpp): ZeRO-2's
// reduce-scatters, and a block gathered when its pass begins, exposed, unless one of the two
// slots still holds it — in 1F1B's steady state a stage's last two blocks between its forward
// and its backward, and its first two between a backward and the next forward: 2·(L − min(L, 2))
// gathers a micro-batch (GPipe's consecutive forwards gather a little more); the tensors outside
// the blocks once a step (data_parallel).
// Gathers move the parameters' storage type, reduce-scatters the gradients' wire type; each is
// half a ring all-reduce of its bytes. `level_bytes` accumulates the micro-batch's bytes sent.
double sharded_seconds(const Workload& w, const Layout& l, const Hardware& hw, int stage, int layers,
                       const StageFacts& facts, const StageTime& t, std::array<double, 3>* level_bytes) {
  const GroupShape& group = facts.data_group[stage];
  const double stored = stored_bytes(l);
  const auto gather = [&](double n) { return all_reduce_seconds(n * stored, group, hw, l.hierarchical) / 2; };
  const auto scatter = [&](double n) { return all_reduce_seconds(n * l.gradient_bytes, group, hw, l.hierarchical) / 2; };
  // Half an all-reduce's bytes of `n` values of `bytes` each.
  const auto count = [&](double n, double bytes) {
    if (level_bytes) all_reduce_seconds(n * bytes / 2, group, hw, l.hierarchical, level_bytes);
  };
  const double work = t.compute_s + t.elementwise_s + t.tensor_s;
  const double forward = work / (3 + recomputed_forward_share(w, l)), backward = work - forward;  // of the stage's blocks
  const double n = double(facts.parameters[stage]), block = double(facts.block);
  double exposed = 0, hidden = 0;
  if (l.zero == 2 || !w.fsdp_prefetch) {
    // Each block's reduce-scatter (a bucket per block) after its backward, beside the next
    // block's; the last one's exposed. The rest goes once a step (data_parallel).
    const double blocks = layers * block;
    const double comm = scatter(blocks);
    exposed = layers ? std::max(comm - backward, comm / layers) : 0;
    hidden = comm - exposed;
    count(blocks, l.gradient_bytes);
    if (l.zero == 3) {  // Trident's gathers, none hidden
      const double gathers = 2.0 * (layers - std::min(layers, 2));
      exposed += gathers * gather(block);
      count(gathers * block, stored);
    }
  } else {
    const double rest = n - block * layers;
    count(2 * layers * block + rest, stored);
    count(layers * block + rest, l.gradient_bytes);
    const double ahead = gather(block), behind = gather(block) + scatter(block);
    const double f = layers ? forward / layers : 0, b = layers ? backward / layers : 0;
    exposed = ahead + layers * (std::max(0.0, ahead - f) + std::max(0.0, behind - b)) + gather(rest) + scatter(rest);
    hidden = layers * (std::min(ahead, f) + std::min(behind, b));
  }
  return exposed + hw.comm_interference * hidden;
}

// One micro-batch's forward and backward on `stage`, by part.
StageTime stage_time(const Workload& w, const Layout& l, const Hardware& hw, int stage, int layers,
                     const GemmSeconds& gemm, const StageFacts& facts, StepEstimate& e) {
  // A micro-batch's tokens on this rank: its sequences' (its chunks' with context parallelism).
  const double tokens = double(l.micro_batch) * w.seq_len / l.context, C = w.config.channels, T = w.seq_len;
  const double heads_local = double(w.config.heads) / l.tensor;
  const bool first = stage == 0, last = stage == l.pipeline - 1;
  StageTime t;
  t.compute_s = layers * gemm.block + (last ? gemm.head : 0);
  // Element-wise passes (the norms, residual adds, the MLP's activation, softmax), values read +
  // written per block forward; backward about twice that; the norms and adds are split over tp
  // only with sequence parallelism. The activation reads its input and writes its output (GELU:
  // 2 × 4C values per token; SwiGLU reads gate and up and writes their product: 3F). The softmax
  // reads and writes the T×T scores of each head — unless the flash attention keeps them in a
  // GPU's on-chip memory, where they are part of its kernel (attention_seconds). On a CPU profile
  // (no compute units) the flash kernel's exponentials and rescaling over its score tiles stay
  // here: work per score at the rate --calibrate measured for everything outside the GEMMs.
  // Where the GELU is in the GEMMs' epilogues (gelu_in_epilogues) it is no pass: what stays is the
  // 16-bit pre-activation written beside the GEMM's output (again when recomputed), read by
  // backward's DGELU, and dpre read once for the bias gradient — 2 bytes a value each.
  const bool epilogues = gelu_in_epilogues(w, l, hw);
  const double rows_share = l.splits_rows() ? 1.0 / l.tensor : 1.0;
  const double mlp_values = epilogues ? 0 : (model::is_llama(w.config) ? 3.0 : 2.0) * double(model::mlp_hidden(w.config));
  const double scores = w.flash_attention && hw.compute_units > 0 ? 0 : 2 * tokens * heads_local * T;
  double forward_values = 10 * tokens * C * rows_share + mlp_values * tokens / l.tensor + scores;
  // Dropout: read, write and a 1-byte mask (half a 16-bit value) of the attention probabilities
  // and of the two block outputs.
  if (w.dropout) forward_values += 1.25 * scores + 5 * tokens * C * rows_share;
  const double again = recomputed(w, l).elementwise;
  double values = layers * forward_values * (3 + again);  // forward, backward (2), again
  if (trident_selective(w, l)) values += layers * scores;
  t.elementwise_s = values * elementwise_bytes(w, l) / hw.memory_bandwidth;
  if (epilogues)
    t.elementwise_s += layers * (3 + again) * double(model::mlp_hidden(w.config)) * tokens / l.tensor * 2 / hw.memory_bandwidth;
  // cuDNN's attention backward reads dy and writes dq, dk, dv in 16 bits, where ours read the f32
  // dy and write the f32 gradients beside their 16-bit copy: two passes of its own, dy rounded (4
  // bytes read, 2 written a value of the (tokens, C/t) output) and the gradients widened (2 read,
  // 4 written a value of the (tokens, 3C/t) input) — kernels/cuda/cudnn_attention.cpp.
  if (cudnn_attention(w, l, hw)) t.elementwise_s += layers * tokens * C / l.tensor * (6 + 3 * 6) / hw.memory_bandwidth;
  if (last && w.loss_passes) t.elementwise_s += loss_bytes(w, l, hw) * tokens * double(w.config.padded_vocab) / l.tensor / hw.memory_bandwidth;
  const double activation = tokens * C * w.activation_message_bytes;  // (b, T, C), one message
  double one_all_reduce = 0;  // in all-reduces of (b, T, C): a ring's all-gather or reduce-scatter is half of one
  if (l.tensor > 1) {
    one_all_reduce = all_reduce_seconds(activation, facts.tensor_group[stage], hw, l.hierarchical, &e.tensor_bytes);
    t.tensor_s = tensor_all_reduces(w, l, layers, first, last) * one_all_reduce;
  }
  // tp_comm_overlap: each collective a ring of t steps beside its GEMM's blocks; the first
  // block's transfer (1/t) is never hidden, the rest as far as the GEMMs' time reaches; what the
  // implementation does not overlap stays whole. The GEMMs beside the hidden part run slower by
  // the profile's interference (the units the communication kernels hold, Hardware::comm_interference).
  if (l.tp_comm_overlap && l.splits_rows()) {
    const double fixed = tensor_unoverlapped_all_reduces(w, l, layers) * one_all_reduce;
    const double whole = t.tensor_s - fixed;
    const double exposed = std::max(whole / l.tensor, whole - t.compute_s * (1 - 1.0 / l.tensor));
    t.compute_s += hw.comm_interference * (whole - exposed);
    t.tensor_s = fixed + exposed;
  }
  double message = activation * rows_share;  // what crosses a stage boundary, from each tensor rank
  double gather_s = 0;                        // per message received: the scatter/gather's all-gather
  if (w.pipeline_scatter_gather && l.tensor > 1 && !l.splits_rows()) {
    gather_s = all_reduce_seconds(message, facts.tensor_group[stage], hw, l.hierarchical) / 2;
    message /= l.tensor;
  }
  if (l.context > 1) t.context_s = layers * context_seconds(w, l, hw, stage, tokens);
  if (l.zero >= 2 && l.gradient_group() > 1)
    t.sharded_s = sharded_seconds(w, l, hw, stage, layers, facts, t, nullptr);
  const int here = rank_of(l, 0, 0, stage), step = l.tensor * l.gradient_group();
  if (l.virtual_stages > 1) {  // each chunk's activation on and gradient back; the ring closes at the ends
    const int next = rank_of(l, 0, 0, (stage + 1) % l.pipeline), previous = rank_of(l, 0, 0, (stage + l.pipeline - 1) % l.pipeline);
    std::array<double, 3> bytes{};
    const double one = p2p_seconds(message, here, next, hw, bytes) + p2p_seconds(message, here, previous, hw, bytes) +
                       2 * gather_s;
    const double messages = l.virtual_stages - (first || last ? 0.5 : 0.0);  // u = 0 receives none, the last sends none
    t.p2p_s += one * messages;
    for (int level = 0; level < 3; ++level) e.pipeline_bytes[level] += bytes[level] * messages;
    return t;
  }
  if (!last) t.p2p_s += p2p_seconds(message, here, here + step, hw, e.pipeline_bytes) + gather_s;   // activation on
  if (!first) t.p2p_s += p2p_seconds(message, here, here - step, hw, e.pipeline_bytes) + gather_s;  // gradient back
  return t;
}

// The gradient reduction of each stage and the part overlap cannot hide: with overlap (never
// under ZeRO-1), buckets go out while backward runs, so at most the last micro-batch's
// backward hides it, and the last bucket never hides.
void data_parallel(const Workload& w, const Layout& l, const Hardware& hw, const std::vector<int>& layers,
                   const StageFacts& facts, StepEstimate& e) {
  if (l.gradient_group() == 1) return;
  for (int stage = 0; stage < l.pipeline; ++stage) {
    // After the step: without ZeRO one all-reduce of the gradients as they travel
    // (comm.grad_dtype); ZeRO-1 a reduce-scatter of them and an all-gather of the updated
    // parameters in their storage type, each half an all-reduce of its bytes on a ring; ZeRO-2
    // the all-gather and the reduce-scatter of the tensors outside the blocks (it reduced the
    // blocks within each micro-batch, sharded_seconds); ZeRO-3
    // nothing (each block is gathered when it is used).
    const double n = double(facts.parameters[stage]), bytes = n * l.gradient_bytes;
    const GroupShape& group = facts.data_group[stage];
    std::array<double, 3> reduced{}, gathered{}, sent{};
    const double reduce = all_reduce_seconds(bytes, group, hw, l.hierarchical, &reduced);
    const double gather = all_reduce_seconds(n * stored_bytes(l), group, hw, l.hierarchical, &gathered);
    const double reduce_share = l.zero == 0 ? 1 : l.zero == 1 ? 0.5 : 0, gather_share = l.zero == 1 || l.zero == 2 ? 0.5 : 0;
    // ZeRO-2 (and Trident's ZeRO-3): the tensors outside the blocks reduce-scattered once, after
    // the step's backward; Trident's ZeRO-3 gathers them once after the update.
    std::array<double, 3> rest_reduced{}, rest_gathered{};
    const double rest = n - double(facts.block) * layers[stage];
    const bool rest_once = l.zero == 2 || (l.zero == 3 && !w.fsdp_prefetch);
    const double rest_reduce =
        rest_once ? all_reduce_seconds(rest * l.gradient_bytes, group, hw, l.hierarchical, &rest_reduced) / 2 : 0;
    const double rest_gather = l.zero == 3 && rest_once
                                   ? all_reduce_seconds(rest * stored_bytes(l), group, hw, l.hierarchical, &rest_gathered) / 2
                                   : 0;
    const double seconds = reduce_share * reduce + gather_share * gather + rest_reduce + rest_gather;
    for (int level = 0; level < 3; ++level)
      sent[level] = reduce_share * reduced[level] + gather_share * gathered[level] + rest_reduced[level] / 2 +
                    rest_gathered[level] / 2;
    if (stage == 0 && l.zero >= 2) {  // and each micro-batch's gathers and reduce-scatters
      std::array<double, 3> sharded{};
      sharded_seconds(w, l, hw, 0, layers[0], facts, e.stages[0], &sharded);
      for (int level = 0; level < 3; ++level) sent[level] += e.micro_batches * sharded[level];
    }
    if (stage == 0) e.data_bytes = sent;
    // With overlap the buckets' all-reduces (ZeRO-1: reduce-scatters) run beside backward, all
    // but the last one hidden where backward is long enough; ZeRO's gather follows the update.
    const double reducing = reduce_share * reduce;
    double exposed_reduce = reducing;
    if (l.overlap && l.zero <= 1) {
      const double buckets = std::max(1.0, std::ceil(bytes / (l.bucket_mb * 1048576.0)));
      const double backward = e.stages[stage].total() * 2 / 3;
      exposed_reduce = std::max(reducing - backward, reducing / buckets);
      exposed_reduce += hw.comm_interference * (reducing - exposed_reduce);  // the backward slowed beside the hidden part
    }
    const double exposed = exposed_reduce + gather_share * gather + rest_reduce + rest_gather;
    e.data_s = std::max(e.data_s, seconds);
    e.data_exposed_s = std::max(e.data_exposed_s, exposed);
  }
}

void flops_and_rates(const Workload& w, const Layout& l, const Hardware& hw, StepEstimate& e) {
  const double tokens = double(w.global_batch) * w.seq_len, C = w.config.channels, L = w.config.layers;
  e.model_flops = tokens * model::training_flops_per_token(w.config, w.seq_len);
  e.hardware_flops = e.model_flops;
  // Recomputed: its share of a block's forward, 2·weights + 4·T·C FLOPs a token.
  e.hardware_flops += tokens * L * recomputed_forward_share(w, l) * (2 * model::block_gemm_weights(w.config) + 4 * w.seq_len * C);
  if (trident_selective(w, l)) e.hardware_flops += tokens * L * 2 * w.seq_len * C;
  e.tokens_per_s = tokens / e.step_s;
  e.tflops_per_device = e.model_flops / e.step_s / l.devices() / 1e12;
  e.hardware_tflops_per_device = e.hardware_flops / e.step_s / l.devices() / 1e12;
  e.mfu = e.tflops_per_device * 1e12 / hw.peak(l.precision);
}

std::string gb(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
  return text;
}

// The communicators of the busiest rank (comm::JobGroups): the world's, and each group of more
// than one rank — tensor, context, pipeline, data (× context), and the embedding's (the first
// and last stage, where the busiest rank of a pipeline is).
int communicators(const Layout& l) {
  return (l.devices() > 1) + (l.tensor > 1) + (l.context > 1) + 2 * (l.pipeline > 1) + (l.gradient_group() > 1);
}

// On a GPU profile (one with compute units) every buffer is its own cudaMalloc, which the driver
// maps in pages of kDeviceGranularityBytes (2 MiB): at most one page less a byte of slack each.
double allocation_slack_bytes(const MemoryEstimate& m, const Hardware& hw) {
  return hw.compute_units > 0 ? double(m.buffers) * double(kDeviceGranularityBytes) : 0;
}

void check_memory(const Layout& l, const Hardware& hw, StepEstimate& e) {
  e.communicators = communicators(l);
  e.allocation_slack_bytes = allocation_slack_bytes(e.memory, hw);
  e.runtime_bytes = hw.reserved_bytes + e.communicators * hw.nccl_bytes_per_group + e.allocation_slack_bytes;
  e.headroom_bytes = hw.memory_bytes - double(e.memory_total) - e.runtime_bytes;
  if (e.headroom_bytes >= 0) return;
  e.feasible = false;
  std::vector<std::pair<int64_t, int>> order;
  for (int c = 0; c < kCategories; ++c) order.push_back({e.memory.bytes[c], c});
  std::sort(order.rbegin(), order.rend());
  e.reason = "memory: the busiest rank needs " + gb(double(e.memory_total) + e.runtime_bytes) + ", " +
             gb(-e.headroom_bytes) + " more than the device's " + gb(hw.memory_bytes) + " (";
  for (int i = 0; i < 3 && order[i].first > 0; ++i)
    e.reason += std::string(i ? ", " : "") + memory_category_name(static_cast<MemoryCategory>(order[i].second)) +
                " " + gb(double(order[i].first));
  if (e.runtime_bytes > 0)
    e.reason += ", the runtime, " + std::to_string(e.communicators) + " NCCL communicators and " +
                std::to_string(e.memory.buffers) + " buffers' page rounding " + gb(e.runtime_bytes);
  e.reason += ")";
}

}  // namespace

GroupShape group_shape(const std::vector<int>& given, const Hardware& hw) {
  // The distinct nodes and racks of the group, counted along its ranks in order — the layouts'
  // groups come in order, so the search (every group of every layout it tries) allocates nothing
  // here; a group out of order is sorted first.
  std::vector<int> sorted;
  if (!std::is_sorted(given.begin(), given.end())) {
    sorted = given;
    std::sort(sorted.begin(), sorted.end());
  }
  const std::vector<int>& ranks = sorted.empty() ? given : sorted;
  int64_t nodes = 0, racks = 0;
  int last_node = -1, last_rack = -1;
  for (int r : ranks) {
    const int node = r / hw.devices_per_node, rack = node / hw.nodes_per_rack;
    nodes += node != last_node, racks += rack != last_rack;
    last_node = node, last_rack = rack;
  }
  GroupShape g;
  g.span = racks > 1 ? Level::CrossRack : nodes > 1 ? Level::Rack : Level::Node;
  g.per_node = static_cast<int>((int64_t(ranks.size()) + nodes - 1) / nodes);
  g.racks = static_cast<int>(racks);
  g.nodes_per_rack = static_cast<int>((nodes + racks - 1) / racks);
  return g;
}

double all_reduce_seconds(double bytes, const GroupShape& g, const Hardware& hw, bool hierarchical,
                          std::array<double, 3>* level_bytes) {
  // A ring over n ranks: 2(n−1) steps of α, and 2(n−1)/n·S over the link, per rank.
  auto ring = [&](int n, double size, Level level) {
    if (n < 2) return 0.0;
    const Link& link = hw.links[static_cast<int>(level)];
    if (level_bytes) (*level_bytes)[static_cast<int>(level)] += 2.0 * (n - 1) / n * size;
    return 2.0 * (n - 1) * link.latency_s + 2.0 * (n - 1) / n * size / link.bandwidth_bytes_per_s;
  };
  const int n = g.per_node * g.nodes_per_rack * g.racks;
  if (!hierarchical || g.span == Level::Node || g.per_node == n) return ring(n, bytes, g.span);
  const double slice = bytes / g.per_node;  // each node member carries 1/k across nodes
  return ring(g.per_node, bytes, Level::Node) + ring(g.nodes_per_rack, slice, Level::Rack) +
         ring(g.racks, slice, Level::CrossRack);
}

MemoryInputs memory_inputs(const Workload& w, const Layout& l) {
  MemoryInputs in;
  in.config = w.config;
  in.tensor = l.tensor;
  in.pipeline = l.pipeline;
  in.data = l.gradient_group();  // ZeRO's shards
  in.context = l.context;
  in.stage_layers = stage_layers(w, l);
  in.micro_batch = l.micro_batch;
  in.seq_len = w.seq_len;
  in.sequence_parallel = l.splits_rows();
  in.tp_comm_overlap = l.splits_rows() && l.tp_comm_overlap;
  in.micro_batches = static_cast<int>(w.global_batch / (int64_t(l.micro_batch) * l.data));
  in.schedule = l.schedule;
  in.virtual_stages = l.virtual_stages;
  in.chunk_layers = chunk_layers(w, l);
  in.recompute = l.recompute;
  in.recompute_interval = l.recompute == "full" ? 1 : l.recompute_interval;
  in.torchtitan_recompute = w.torchtitan_recompute;
  in.fsdp = w.fsdp_prefetch;
  in.flash_attention = w.flash_attention;
  in.classifier_chunk = w.classifier_chunk;
  in.zero = l.gradient_group() > 1 ? l.zero : 0;
  in.grad_bytes = static_cast<int64_t>(l.gradient_bytes);
  in.bucket_mb = l.bucket_mb;
  in.precision = l.precision;
  in.low16_widened = l.low16_widened;
  in.cpu_kernels = l.cpu_kernels;
  in.cuda_kernels = !l.cpu_kernels && w.trident_kernels;
  in.gelu_epilogues = w.gelu_epilogues;
  in.cpu_threads = l.cpu_threads;
  return in;
}

Implementation parse_implementation(const std::string& name) {
  if (name == "trident") return Implementation::trident;
  if (name == "megatron") return Implementation::megatron;
  if (name == "torchtitan") return Implementation::torchtitan;
  throw std::invalid_argument("unknown implementation '" + name + "'");
}

const char* implementation_name(Implementation who) {
  return who == Implementation::megatron ? "megatron" : who == Implementation::torchtitan ? "torchtitan" : "trident";
}

void model_implementation(Workload& w, Implementation who) {
  const bool megatron = who == Implementation::megatron, titan = who == Implementation::torchtitan;
  w.dropout = megatron;                                         // its attention and hidden dropout (0.1 / 0.1)
  w.activation_message_bytes = megatron || titan ? 2 : 4;       // 16-bit activations on the wire
  w.elementwise_value_bytes_low16 = megatron || titan ? 2 : 4;  // fused 16-bit element-wise kernels (TorchTitan's compiled)
  w.pipeline_scatter_gather = megatron;                         // its pipeline messages split over the tensor ranks
  w.torchtitan_recompute = titan;                               // its per-layer and per-op activation checkpointing
  w.fsdp_prefetch = megatron || titan;                          // ZeRO-3's gathers behind the compute
  w.sequence_parallel_regathers = !titan;                       // DTensor keeps the gathered input
  w.tp_overlap_backward_scatters = !titan;                      // async TP fuses one matmul's reduce-scatter
  w.sequence_parallel_gathers_stored = !megatron && !titan;     // Trident's f32 messages, 16-bit gathers
  w.trident_flash_backward = !megatron && !titan;              // their FlashAttention-2, as fitted
  w.bias_gelu_pass = megatron || titan;                         // a bias-GELU kernel of its own (--bias-gelu-fusion)
  w.loss_passes = !megatron && !titan;                          // theirs inside gemm_fraction, as it was fitted
  w.trident_kernels = !megatron && !titan;                      // our CUDA kernels' workspaces in the memory model
}

std::string layout_problem(const Workload& w, const Layout& l) {
  const std::string t = std::to_string(l.tensor);
  if (w.config.heads % l.tensor) return "model.heads " + std::to_string(w.config.heads) + " is not divisible by tensor " + t;
  const int kv = model::kv_heads(w.config);
  if (kv % l.tensor && l.tensor % kv)
    return "model.kv_heads " + std::to_string(kv) + " and tensor " + t + " do not divide one another";
  if (model::mlp_hidden(w.config) % l.tensor)
    return "the MLP's width " + std::to_string(model::mlp_hidden(w.config)) + " is not divisible by tensor " + t;
  if (w.config.layers < l.pipeline)
    return "model.layers " + std::to_string(w.config.layers) + " is fewer than pipeline " + std::to_string(l.pipeline);
  if (w.global_batch % (int64_t(l.micro_batch) * l.data))
    return "global batch " + std::to_string(w.global_batch) + " is not divisible by micro-batch " +
           std::to_string(l.micro_batch) + " x data " + std::to_string(l.data);
  const int64_t m = w.global_batch / (int64_t(l.micro_batch) * l.data);
  if (l.schedule != pipeline::Schedule::GPipe && l.pipeline > 1 && m < l.pipeline)
    return pipeline::schedule_name(l.schedule) + " needs at least " + std::to_string(l.pipeline) + " micro-batches per replica, the batch gives " +
           std::to_string(m);
  if (pipeline::splits_backward(l.schedule) && l.recomputes_blocks())
    return pipeline::schedule_name(l.schedule) + " keeps every block's GEMM inputs, recompute " + l.recompute + " does not";
  if (pipeline::splits_backward(l.schedule) && l.zero >= 2)
    return "ZeRO-" + std::to_string(l.zero) + " reuses a block's gradient buffer before " +
           pipeline::schedule_name(l.schedule) + "'s deferred weight gradients fill it";
  if (l.virtual_stages > 1) {
    const std::string v = std::to_string(l.virtual_stages);
    if (l.schedule != pipeline::Schedule::OneFOneB) return v + " virtual stages need the 1f1b schedule";
    if (l.pipeline < 2) return v + " virtual stages need a pipeline";
    if (w.config.layers < l.pipeline * l.virtual_stages)
      return "model.layers " + std::to_string(w.config.layers) + " are fewer than " + std::to_string(l.pipeline) +
             " x " + v + " chunks";
    if (m % l.pipeline) return "interleaving needs the micro-batches (" + std::to_string(m) + ") a multiple of pipeline";
  }
  if (l.context > 1) {
    if (!w.flash_attention) return "context parallelism needs the flash attention";
    if (w.seq_len % (2 * l.context))
      return "sequence " + std::to_string(w.seq_len) + " is not divisible by 2 x context " + std::to_string(l.context);
  }
  if (l.tp_comm_overlap && !l.splits_rows())
    return "the tensor-parallel overlap needs sequence parallelism over tensor > 1";
  if (l.splits_rows()) {
    if ((int64_t(l.micro_batch) * w.seq_len / l.context) % l.tensor)
      return "sequence parallelism needs micro-batch x seq_len divisible by tensor " + t;
    if (pipeline::splits_backward(l.schedule))
      return "sequence parallelism keeps no whole output gradients for " + pipeline::schedule_name(l.schedule);
  }
  if (!l.stage_layers.empty() && int(l.stage_layers.size()) != l.pipeline * l.virtual_stages)
    return "stage_layers names " + std::to_string(l.stage_layers.size()) + " stages, pipeline is " +
           std::to_string(l.pipeline) + (l.virtual_stages > 1 ? " x " + std::to_string(l.virtual_stages) : "");
  return "";
}

StepEstimate estimate_step(const Workload& w, const Layout& l, const Hardware& hw, EstimateCache* cache) {
  StepEstimate e;
  const MemoryInputs in = memory_inputs(w, l);
  EstimateCache own;
  EstimateCache& kept = cache ? *cache : own;
  e.memory = estimate_busiest(in, &e.memory_total, &kept);
  const StageFacts facts = stage_facts(w, l, hw, in, kept);
  check_memory(l, hw, e);
  e.micro_batches = in.micro_batches;
  const GemmSeconds gemm = micro_batch_gemm_seconds(w, l, hw);
  double slowest = 0, sum = 0;
  for (int stage = 0; stage < l.pipeline; ++stage) {
    e.stages.push_back(stage_time(w, l, hw, stage, in.stage_layers[stage], gemm, facts, e));
    slowest = std::max(slowest, e.stages.back().total());
    sum += e.stages.back().total();
  }
  for (double& b : e.pipeline_bytes) b *= e.micro_batches / double(l.pipeline);  // per rank, mean over stages
  for (double& b : e.tensor_bytes) b *= e.micro_batches / double(l.pipeline);
  // Micro-batches stream through the stages: the slowest sets the pace, each other stage adds
  // its share of the fill and drain once — a micro-batch's time under GPipe and 1F1B (p − 1 of
  // them when the stages are equal: the bubble), less under ZB-H1, whose W's fill the rest.
  // Interleaved, v chunks per stage: the fill and drain pass a chunk, a v-th of a stage's time.
  e.pipeline_s = e.micro_batches * slowest + (sum - slowest) * fill_share(w, l) / l.virtual_stages;
  e.bubble_s = e.pipeline_s - e.micro_batches * slowest;
  data_parallel(w, l, hw, in.stage_layers, facts, e);
  if (l.pipeline > 1 && model::tied_head(w.config)) {
    // The tied embedding: its gradient, reduced on each stage, summed between the first and the
    // last — with ZeRO the part each replica owns (dp::GradientReducer::sum_tied).
    const double elements = double(w.config.padded_vocab) / l.tensor * w.config.channels;
    const double bytes = (l.zero ? std::ceil(elements / l.gradient_group()) : elements) * kEmbeddingGradientBytes;
    const int a = rank_of(l, 0, 0, 0), b = rank_of(l, 0, 0, l.pipeline - 1);
    e.embedding_s = all_reduce_seconds(bytes, group_shape({a, b}, hw), hw, false);
  }
  double local = 0;
  for (int stage = 0; stage < l.pipeline; ++stage) {
    const double n = double(facts.parameters[stage]);
    local = std::max(local, in.zero ? std::ceil(n / l.gradient_group()) : n);
  }
  e.optimizer_s = local * kOptimizerBytesPerParameter / hw.memory_bandwidth;
  e.step_s = e.pipeline_s + e.data_exposed_s + e.embedding_s + e.optimizer_s;
  flops_and_rates(w, l, hw, e);
  return e;
}

}  // namespace trident::plan
