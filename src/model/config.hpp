// The shape of a model — GPT-2 or the Llama family (model.arch) — and the padding rule of its
// vocabulary. docs/MODEL.md states both architectures.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/rope_frequencies.hpp"

namespace trident::model {

// gpt2: LayerNorm, learned positions, GELU MLP (4C), biases, tied embeddings.
// llama: RMSNorm, rotary positions, SwiGLU MLP (F), grouped-query attention, no biases, and
//        by default an untied head.
enum class Arch { gpt2, llama };

struct GptConfig {
  int max_seq_len = 0;   // context length: rows of the position table wpe (gpt2)
  int vocab = 0;         // V: valid tokens
  int padded_vocab = 0;  // Vp >= V: rows of wte; padded rows never receive a token or a loss
  int layers = 0;
  int heads = 0;
  int channels = 0;
  Arch arch = Arch::gpt2;
  int kv_heads = 0;            // llama: key/value heads (a divisor of heads); gpt2: heads
  int ffn_hidden = 0;          // llama: SwiGLU's width F; gpt2: 4C
  float rope_theta = 10000.0f;  // llama
  // llama: Llama 3.1's scaling of the rotary frequencies (kernels/common/llama_math.hpp); factor 1: none.
  float rope_factor = 1.0f, rope_low_freq_factor = 1.0f, rope_high_freq_factor = 4.0f, rope_original_context = 8192.0f;
  float norm_eps = 1e-5f;       // llama's RMSNorm (GPT-2's LayerNorm: 1e-5, fixed)
  bool tie_embeddings = true;   // the head is wte (gpt2: always)
};

// Derived sizes, per architecture.
inline bool is_llama(const GptConfig& c) { return c.arch == Arch::llama; }
inline int head_size(const GptConfig& c) { return c.channels / c.heads; }
inline int kv_heads(const GptConfig& c) { return is_llama(c) && c.kv_heads > 0 ? c.kv_heads : c.heads; }
inline int64_t kv_channels(const GptConfig& c) { return int64_t(kv_heads(c)) * head_size(c); }
inline int64_t mlp_hidden(const GptConfig& c) { return is_llama(c) ? c.ffn_hidden : 4 * int64_t(c.channels); }
// Rows of the fused projections: [q | k | v] and the MLP's input ([gate | up] for SwiGLU).
inline int64_t qkv_rows(const GptConfig& c) { return c.channels + 2 * kv_channels(c); }
inline int64_t fc_rows(const GptConfig& c) { return is_llama(c) ? 2 * mlp_hidden(c) : mlp_hidden(c); }
// Tensor parallelism over p ranks splits the key/value heads (KV/p each) where KV >= p; with
// fewer (llama's grouped-query attention, p a multiple of KV) each rank holds the one key/value
// head its query heads read, the same head on kv_replicas = p/KV consecutive ranks.
inline int kv_replicas(const GptConfig& c, int p) { return p > kv_heads(c) ? p / kv_heads(c) : 1; }
inline int kv_heads_local(const GptConfig& c, int p) { return p > kv_heads(c) ? 1 : kv_heads(c) / p; }
// The first key/value head rank r of p holds: its kv_heads_local, or its replicated one.
inline int first_kv_head(const GptConfig& c, int p, int r) {
  return kv_replicas(c, p) > 1 ? r / kv_replicas(c, p) : r * kv_heads_local(c, p);
}
// A rank's rows of the fused projection: its C/p of q and its key/value heads' of k and of v.
inline int64_t qkv_rows_local(const GptConfig& c, int p) {
  return c.channels / p + 2 * int64_t(kv_heads_local(c, p)) * head_size(c);
}
inline bool tied_head(const GptConfig& c) { return !is_llama(c) || c.tie_embeddings; }
inline bool rope_scaled(const GptConfig& c) { return c.rope_factor != 1.0f; }
inline kernels::RopeFrequencies rope_frequencies(const GptConfig& c) {
  return {c.rope_theta, c.rope_factor, c.rope_low_freq_factor, c.rope_high_freq_factor, c.rope_original_context};
}
// Weights of one block's four GEMMs (qkv, the attention output, the MLP's): GPT-2's 12C²; llama's
// (C + 2·kv)·C + C² + 3·F·C.
inline double block_gemm_weights(const GptConfig& c) {
  const double C = c.channels, F = static_cast<double>(mlp_hidden(c));
  return static_cast<double>(qkv_rows(c)) * C + C * C + (is_llama(c) ? 3 : 2) * F * C;
}
const char* arch_name(Arch arch);
// Llama's rule for SwiGLU's width (Meta's reference code): 2/3 of 4C, times `multiplier`, rounded
// up to a multiple of `multiple_of`.
int llama_ffn_hidden(int channels, double multiplier, int multiple_of);

// Vp for a model made from a deck: V rounded up to a multiple of 128 (llm.c's rule: GEMM-
// friendly and the same as llm.c's GPT-2 files: 50257 -> 50304).
int padded_vocab_for(int vocab);

// Most parameters a configuration may describe (2^48: 1 PiB of fp32), so that every count and
// byte size of it fits int64 with room to spare.
constexpr int64_t kMaxParameters = int64_t(1) << 48;

// "" when the configuration can be a model: every size at least 1, padded_vocab >= vocab,
// channels a multiple of heads (an even head size for llama, heads a multiple of kv_heads), and
// at most kMaxParameters parameters (counted without overflow); else what is wrong, naming the
// sizes. For shapes read from files, which may lie.
std::string config_problem(const GptConfig& config);

// Training FLOPs of one token, counted as implemented: 6 per weight of every matmul (forward,
// and two backward products) — qkv (C + 2·kv_channels rows: GQA's smaller k and v counted as
// they are), the attention output, the MLP's (4C·C twice for gpt2; 3·F·C for SwiGLU), the LM
// head (Vp·C); plus the attention products, full T×T (q kᵀ and P v: 2·2·T·C forward per layer,
// ×3 for backward) = 12·L·T·C.
double training_flops_per_token(const GptConfig& config, int seq_len);

}  // namespace trident::model
