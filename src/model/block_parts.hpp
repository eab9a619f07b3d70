// The parts a transformer block is composed of, chosen once from the configuration: its norm, its
// positional scheme, its MLP's activation, whether its linear layers carry biases. Each part's
// maths — forward and backward, on the kernels — is here and nowhere else; the runtime that runs
// the blocks (model/transformer.hpp: activation slots, recompute, 16-bit storage, tensor,
// sequence and context parallelism, pipeline chunks) and the one-token decoder
// (model/kv_cache.hpp) call these and never ask which architecture they run. An architecture is
// one row of block_parts()' table; a third one is a row, and a new kind of part a case of its
// own in block_parts.cpp.
//
//   architecture   norm                 positions                    MLP                         biases
//   gpt2           LayerNorm(γ, β)      learned table wpe, added     gelu(x·W_fcᵀ)·W_projᵀ       yes
//                                       to the token embedding
//   llama          RMSNorm(γ)           rotary, on q and k in        (silu(gate)·up)·W_downᵀ     no
//                                       every block                  (SwiGLU)
// The attention (multi-head, or grouped-query where kv_heads < heads) and the head (tied to the
// token embedding or its own) are sizes of the configuration (model/config.hpp), not parts.
#pragma once

#include "kernels/kernels.hpp"
#include "model/config.hpp"

namespace trident::model {

enum class NormPart { layer, rms };
enum class PositionPart { learned, rotary };
enum class ActivationPart { gelu, swiglu };

struct BlockParts {
  NormPart norm = NormPart::layer;
  PositionPart positions = PositionPart::learned;
  ActivationPart activation = ActivationPart::gelu;
  bool biases = true;                  // every linear layer's, and LayerNorm's β
  float norm_eps = 1e-5f;
  kernels::RopeFrequencies rope{};     // rotary
  // The (C) weight-gradient tensors of one norm: γ and β, or γ alone.
  int norm_gradients() const { return norm == NormPart::layer ? 2 : 1; }
  bool learned_positions() const { return positions == PositionPart::learned; }
};

BlockParts block_parts(const GptConfig& config);

// out (N, C) = the norm of inp (N, C) with weight γ (C) (and β: bias, LayerNorm's); first and
// second (N) keep its statistics for backward: LayerNorm's mean and 1/σ, RMSNorm's 1/rms in first.
void norm_forward(kernels::Context& ctx, const BlockParts& parts, const Tensor& out, const Tensor& first,
                  const Tensor& second, const Tensor& inp, const Tensor& weight, const Tensor& bias);
// dinp (N, C) +=, dweight (C) +=, dbias (C) += (LayerNorm's) from dout and what forward kept;
// dinp_low (or empty): dinp's values after the sum rounded to the 16-bit type of a 16-bit model's
// kept input (kernels::layernorm_backward).
void norm_backward(kernels::Context& ctx, const BlockParts& parts, const Tensor& dinp, const Tensor& dweight,
                   const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                   const Tensor& first, const Tensor& second, const Tensor& dinp_low = Tensor{});

// The MLP's activation: hidden (N, H) = act(fch), fch (N, W) the input GEMM's output — GELU's
// W = H, SwiGLU's W = 2H ([gate | up] per row); backward: dfch (N, W) = from dhidden (N, H).
void activation_forward(kernels::Context& ctx, const BlockParts& parts, const Tensor& hidden, const Tensor& fch);
void activation_backward(kernels::Context& ctx, const BlockParts& parts, const Tensor& dfch, const Tensor& fch,
                         const Tensor& dhidden);

// Rotary positions: q's and k's heads of qkv (B, T, (q_heads + 2·kv_heads)·hs) rotated in place,
// row t at positions[t] (i32, T); inverse: back, on the gradient. Learned positions: nothing
// (they are added to the embedding). copy (or empty; rotary positions alone): qkv after the
// rotation rounded to its 16-bit type (kernels::rope's).
void rotate_positions(kernels::Context& ctx, const BlockParts& parts, const Tensor& qkv, const Tensor& positions,
                      int q_heads, int kv_heads, bool inverse, const Tensor& copy = Tensor{});

}  // namespace trident::model
