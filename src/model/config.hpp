// The shape of a GPT-2 model, and the padding rule of its vocabulary.
#pragma once

#include <cstdint>
#include <string>

namespace trident::model {

struct GptConfig {
  int max_seq_len = 0;   // rows of the position table wpe
  int vocab = 0;         // V: valid tokens
  int padded_vocab = 0;  // Vp >= V: rows of wte; padded rows never receive a token or a loss
  int layers = 0;
  int heads = 0;
  int channels = 0;
};

// Vp for a model made from a deck: V rounded up to a multiple of 128 (llm.c's rule: GEMM-
// friendly and the same as llm.c's GPT-2 files: 50257 -> 50304).
int padded_vocab_for(int vocab);

// Most parameters a configuration may describe (2^48: 1 PiB of fp32), so that every count and
// byte size of it fits int64 with room to spare.
constexpr int64_t kMaxParameters = int64_t(1) << 48;

// "" when the configuration can be a model: every size at least 1, padded_vocab >= vocab,
// channels a multiple of heads, and at most kMaxParameters parameters (counted without
// overflow); else what is wrong, naming the sizes. For shapes read from files, which may lie.
std::string config_problem(const GptConfig& config);

// Training FLOPs of one token, counted as implemented: 6 per weight of every matmul (forward,
// and two backward products), including the LM head (Vp·C); plus the attention products, full
// T×T (q kᵀ and P v: 2·2·T·C forward per layer, ×3 for backward) = 12·L·T·C.
double training_flops_per_token(const GptConfig& config, int seq_len);

}  // namespace trident::model
