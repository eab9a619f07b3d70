// The parameters of a model: 17 tensors — GPT-2's 16 in llm.c's order, then the untied head — in
// one contiguous allocation, with the names, shapes and initialisation documented in
// docs/MODEL.md. A Llama model fills the same slots with its own tensors (RMSNorm weights where
// GPT-2 has LayerNorm's, its fused [q | k | v] of grouped-query attention, SwiGLU's [gate | up]
// and down projection) and leaves the slots it has no tensor for (wpe, the biases) empty: zero
// elements, in every layout.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/config.hpp"
#include "model/flat_ranges.hpp"

namespace trident::model {

constexpr int kNumParamTensors = 17;

struct ParamSpec {
  std::string name;              // "wte", "blocks.qkvw", ... (docs/MODEL.md)
  std::vector<int64_t> shape;    // including the leading layer dimension L for per-block tensors
  bool weight_decay = false;     // 2-D weight matrices (per block) and the embeddings
  bool sharded = false;          // split over the tensor group (else replicated on its ranks)
  // A GEMM's weight (wte: also the token lookup's table): read in the 16-bit storage type of a
  // bf16/fp16 model; the other tensors (biases, LayerNorm parameters, wpe) are read in f32.
  bool gemm_weight = false;
  int64_t count() const;
};

// Which part of the model this rank holds.
// Tensor parallelism (Megatron's split), rank of size: wte and head by vocabulary rows, qkvw/qkvb
// by heads (rows of q, and of k and v: of the key/value heads for grouped-query attention),
// fcw/fcb by rows (each of SwiGLU's gate and up by rows), attprojw and fcprojw by columns (their
// input); everything else whole on every rank of the tensor group.
// Pipeline parallelism: the blocks [first_layer, first_layer + num_layers); the first stage also
// holds wte and wpe, the last stage lnfw, lnfb and wte again (the tied head) or head; a tensor a stage
// does not hold has zero elements there. Interleaved: chunk j holds the model's blocks
// [chunk_first[j], chunk_first[j] + chunk_blocks[j]), stacked on the stage chunk after chunk in
// the model's order (first_layer is chunk_first[0], num_layers their sum); without, one chunk.
struct Partition {
  int rank = 0, size = 1;  // in the tensor group
  int first_layer = 0, num_layers = -1;  // -1: all blocks
  std::vector<int> chunk_first{}, chunk_blocks{};  // interleaved; empty: one chunk
  bool first_stage = true, last_stage = true;
  int layers(const GptConfig& config) const { return num_layers < 0 ? config.layers : num_layers; }
  int chunks() const { return chunk_first.empty() ? 1 : static_cast<int>(chunk_first.size()); }
  // The model's block index of this stage's block l.
  int global_block(int l) const {
    for (size_t j = 0; j < chunk_first.size(); ++j) {
      if (l < chunk_blocks[j]) return chunk_first[j] + l;
      l -= chunk_blocks[j];
    }
    return first_layer + l;
  }
};
// What tensor rank `tp_rank` of `tp_size` at pipeline stage `stage` holds, the stages holding
// stage_layers[s] blocks each, in order.
Partition stage_partition(const std::vector<int>& stage_layers, int stage, int tp_rank, int tp_size);
// Interleaved: stage `stage` of `stages`, the model's blocks split over stages·v virtual stages
// (virtual_layers[u] blocks for virtual stage u, in the model's order), its chunk j being virtual
// stage j·stages + stage.
Partition interleaved_partition(const std::vector<int>& virtual_layers, int stages, int stage, int tp_rank, int tp_size);

// In llm.c's file order: wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b,
// fcw, fcb, fcprojw, fcprojb, lnfw, lnfb, then head — the shapes of the slice this rank holds.
// Llama's names: wte, blocks.attn_norm (ln1w), blocks.wqkv, blocks.wo, blocks.mlp_norm (ln2w),
// blocks.w_gate_up, blocks.w_down, norm (lnfw), head; its empty slots keep GPT-2's names.
std::array<ParamSpec, kNumParamTensors> param_specs(const GptConfig& config,
                                                    const Partition& slice = {});
// Index in the whole tensor t (as in the serial model and the llm.c file) of element `local`
// of this rank's slice of it.
int64_t global_index(const GptConfig& config, const Partition& slice, int tensor, int64_t local);

// The ranges [begin, end) of this rank's slice of tensor `tensor` (local elements) that are copies
// of what another rank of the tensor group holds and owns: the k and v rows of a key/value head on
// each of its replicas but the first (fewer key/value heads than tensor ranks: kv_replicas);
// empty for every other tensor and rank. What the global norm and a checkpoint count once.
std::vector<std::pair<int64_t, int64_t>> replica_ranges(const GptConfig& config, const Partition& slice, int tensor);

// The tensors by their index in param_specs' order.
enum ParamTensor : int {
  kWte, kWpe, kLn1w, kLn1b, kQkvw, kQkvb, kAttprojw, kAttprojb,
  kLn2w, kLn2b, kFcw, kFcb, kFcprojw, kFcprojb, kLnfw, kLnfb, kHead
};
constexpr int kFirstBlockTensor = kLn1w, kLastBlockTensor = kFcprojb;
// A tensor with one part per block (its leading dimension L).
constexpr bool is_block_tensor(int t) { return t >= kFirstBlockTensor && t <= kLastBlockTensor; }
// Each tensor's first element in the flat buffer of this rank's slice.
std::array<int64_t, kNumParamTensors> param_offsets(const GptConfig& config, const Partition& slice = {});

// Pointers to each tensor inside one flat buffer (parameters, or gradients of the same layout).
struct ParamViews {
  float* wte;       // (Vp, C)
  float* wpe;       // (maxT, C)
  float* ln1w;      // (L, C)
  float* ln1b;      // (L, C)
  float* qkvw;      // (L, 3C, C)
  float* qkvb;      // (L, 3C)
  float* attprojw;  // (L, C, C)
  float* attprojb;  // (L, C)
  float* ln2w;      // (L, C)
  float* ln2b;      // (L, C)
  float* fcw;       // (L, 4C, C)
  float* fcb;       // (L, 4C)
  float* fcprojw;   // (L, C, 4C)
  float* fcprojb;   // (L, C)
  float* lnfw;      // (C)
  float* lnfb;      // (C)
  float* head;      // (Vp, C) the untied head (llama); empty where tied
};
ParamViews param_views(const GptConfig& config, float* base, const Partition& slice = {});
// Tensor t's pointer in `views` (kWte … kHead).
float* tensor_view(const ParamViews& views, int t);
float*& tensor_view(ParamViews& views, int t);
// The tensors that are not GEMM weights, one after another from `base` (f32_read_count(config,
// slice) floats), the GEMM weights' pointers null: the f32 values a bf16/fp16 model reads.
ParamViews f32_read_views(const GptConfig& config, float* base, const Partition& slice = {});
int64_t f32_read_count(const GptConfig& config, const Partition& slice = {});
// ZeRO-2's gradient memory (model/transformer.hpp, set_gradient_slots): the tensors outside the
// blocks (embeddings, final norm, head) one after another from `base`, the block tensors null;
// and one block's tensors (each a per-block tensor's count / layers) one after another, the
// others null.
ParamViews outside_block_views(const GptConfig& config, float* base, const Partition& slice = {});
int64_t outside_block_count(const GptConfig& config, const Partition& slice = {});
ParamViews one_block_views(const GptConfig& config, float* base, const Partition& slice = {});
int64_t one_block_count(const GptConfig& config, const Partition& slice = {});
// Each tensor's first element in those two layouts; -1 for the tensors a layout leaves out.
std::array<int64_t, kNumParamTensors> outside_block_offsets(const GptConfig& config, const Partition& slice = {});
std::array<int64_t, kNumParamTensors> one_block_offsets(const GptConfig& config, const Partition& slice = {});
// ZeRO-3's f32 reads of a 16-bit model (model/transformer.hpp, parameter slots): those of the
// tensors outside the blocks, and one block's, each laid out as f32_read_views does.
ParamViews outside_f32_read_views(const GptConfig& config, float* base, const Partition& slice = {});
int64_t outside_f32_read_count(const GptConfig& config, const Partition& slice = {});
ParamViews one_block_f32_read_views(const GptConfig& config, float* base, const Partition& slice = {});
int64_t one_block_f32_read_count(const GptConfig& config, const Partition& slice = {});
int64_t num_parameters(const GptConfig& config, const Partition& slice = {});
// One block's parameters on a rank of `tensor` tensor-parallel ranks: one_block_count of that slice.
int64_t block_parameters(const GptConfig& config, int tensor);

// GPT-2 initialisation: weights N(0, 0.02), the residual output projections (attprojw,
// fcprojw) N(0, 0.02/√(2L)), LayerNorm weights 1, biases 0. Every element is a function of
// (seed, tensor, index) alone — a counter-based generator — so any shard of any layout
// initialises to the same values as the serial model. Tensor t (in file order), element i:
// stddev · normal_at(seed, t, i) (core/random.hpp).
void init_params(const GptConfig& config, float* params, uint64_t seed,
                 const Partition& slice = {});
// The same values of the ranges of the flat slice only, range after range into out
// (total_count(ranges) floats): what a ZeRO-3 replica initialises of the parameters it owns.
void init_param_ranges(const GptConfig& config, const FlatRanges& ranges, float* out, uint64_t seed,
                       const Partition& slice = {});
// This rank's slice (num_parameters(config, slice)) of a whole parameter buffer.
void extract_slice(const GptConfig& config, const float* whole, float* local, const Partition& slice);

}  // namespace trident::model
