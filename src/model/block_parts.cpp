// Each part of a block, forward and backward, on the kernels.
#include "model/block_parts.hpp"

#include <stdexcept>

namespace trident::model {

BlockParts block_parts(const GptConfig& config) {
  BlockParts parts;
  if (is_llama(config)) {
    parts.norm = NormPart::rms;
    parts.positions = PositionPart::rotary;
    parts.activation = ActivationPart::swiglu;
    parts.biases = false;
    parts.norm_eps = config.norm_eps;
    parts.rope = rope_frequencies(config);
  }
  return parts;
}

void norm_forward(kernels::Context& ctx, const BlockParts& parts, const Tensor& out, const Tensor& first,
                  const Tensor& second, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  switch (parts.norm) {
    case NormPart::layer: return kernels::layernorm_forward(ctx, out, first, second, inp, weight, bias);
    case NormPart::rms: return kernels::rmsnorm_forward(ctx, out, first, inp, weight, parts.norm_eps);
  }
}

void norm_backward(kernels::Context& ctx, const BlockParts& parts, const Tensor& dinp, const Tensor& dweight,
                   const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                   const Tensor& first, const Tensor& second, const Tensor& dinp_low) {
  switch (parts.norm) {
    case NormPart::layer:
      return kernels::layernorm_backward(ctx, dinp, dweight, dbias, dout, inp, weight, bias, first, second, dinp_low);
    case NormPart::rms: return kernels::rmsnorm_backward(ctx, dinp, dweight, dout, inp, weight, first, dinp_low);
  }
}

void activation_forward(kernels::Context& ctx, const BlockParts& parts, const Tensor& hidden, const Tensor& fch) {
  switch (parts.activation) {
    case ActivationPart::gelu: return kernels::gelu_forward(ctx, hidden, fch);
    case ActivationPart::swiglu: return kernels::swiglu_forward(ctx, hidden, fch);
  }
}

void activation_backward(kernels::Context& ctx, const BlockParts& parts, const Tensor& dfch, const Tensor& fch,
                         const Tensor& dhidden) {
  switch (parts.activation) {
    case ActivationPart::gelu: return kernels::gelu_backward(ctx, dfch, fch, dhidden);
    case ActivationPart::swiglu: return kernels::swiglu_backward(ctx, dfch, fch, dhidden);
  }
}

void rotate_positions(kernels::Context& ctx, const BlockParts& parts, const Tensor& qkv, const Tensor& positions,
                      int q_heads, int kv_heads, bool inverse, const Tensor& copy) {
  if (parts.positions == PositionPart::rotary)
    return kernels::rope(ctx, qkv, positions, q_heads, kv_heads, parts.rope, inverse, copy);
  if (copy.data != nullptr) throw std::logic_error("rotate_positions: a copy asked of learned positions (no rotation)");
}

}  // namespace trident::model
