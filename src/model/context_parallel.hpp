// Context parallelism's attention: ring attention (Liu et al. 2023) over a context group of c
// ranks, with the load-balanced causal split of Megatron-Core and the Llama 3 run.
//
// The sequence of T positions is cut into 2c chunks of n = T/(2c); context rank r holds chunks
// r and 2c−1−r (its local chunks 0 and 1, Tl = 2n rows of each sequence), so that every rank
// has the same causal work: an early chunk that sees little and a late one that sees much.
//
// Forward (on each rank, over c steps; q is its own, k and v travel):
//   step s holds the packed (k, v) of rank src = r − s (mod c), (B, Tl, 2·Ckv), while it sends
//   them on to r + 1 and receives rank r − s − 1's from r − 1 (s < c − 1), and folds each block
//   of its query chunk i against the held key chunk j by the softmax statistics
//   (kernels::flash_attention_block_forward): j before i: every key; j = i: causal; j after i:
//   nothing. Each step outside the first is two unmasked blocks of n × n for every rank.
//   Out (B, Tl, C) and each query's log-sum-exp (B, NH, Tl) are what the flash attention keeps.
// Backward (c steps again): the same (k, v) travel the same way with an accumulator of their
//   gradients (dk, dv) (B, Tl, 2·Ckv) beside them; at step s rank r adds its queries' part to the
//   held block's accumulator and sends it on to r + 1, receiving rank r − s − 1's from r − 1.
//   After step c − 1 a rank holds rank r + 1's block, whose accumulator has had every rank's
//   part: the last send delivers each block's gradients to its owner. dq sums locally.
// Ckv = KV·hs, the key/value heads' channels: C for GPT-2, less for grouped-query attention, whose
// key/value heads travel as they are (Llama 3 70B: 8 of 64 heads, an eighth of the bytes).
// Communication per rank and layer: forward c − 1 sends of (B, Tl, 2·Ckv), backward c − 1 of those
// and c of the accumulators, each beside the blocks' work of its step (the receive is waited
// for at the end of the step: on a device by the compute stream, the host enqueuing on, and
// under the watchdog at the pass's fence). Not bitwise the one-rank flash attention: the softmax is folded
// in another order (fp32 rounding).
#pragma once

#include "comm/communicator.hpp"
#include "kernels/kernels.hpp"
#include "tensor/tensor.hpp"

namespace trident::model {

struct ContextGroup {
  comm::Communicator* ring = nullptr;  // the context group's; null when size == 1
  int rank = 0, size = 1;
  Stream stream;  // where the buffers live and the kernels run
  // The sequence chunk (of 2·size) that rank `r`'s local chunk 0 or 1 holds.
  int chunk(int r, int local) const { return local == 0 ? r : 2 * size - 1 - r; }
  // On a device, the Work that completes after everything enqueued on the stream so far — the
  // ring's messages, which the stream waits for — under the ring's watchdog; else none.
  comm::Work fence() const { return ring && !stream.device.is_cpu() ? ring->fence(stream) : comm::Work{}; }
};

// The (k, v) travelling buffers: two (B, Tl, 2·Ckv) for forward; backward two more for the
// accumulators.
struct RingBuffers {
  Tensor kv[2];
  Tensor dkv[2];
};

// This rank's rows of (B, T, width) row-major values of whole sequences: its two chunks of
// each, (B, T/c, width) — the tokens, targets and positions a context rank works on.
template <class V>
void take_chunks(const ContextGroup& group, const V* whole, V* mine, int B, int T, int width = 1) {
  const int n = T / (2 * group.size);
  for (int b = 0; b < B; ++b)
    for (int local = 0; local < 2; ++local) {
      const V* from = whole + (static_cast<size_t>(b) * T + static_cast<size_t>(group.chunk(group.rank, local)) * n) * width;
      V* to = mine + (static_cast<size_t>(b) * 2 + local) * n * width;
      for (size_t i = 0; i < static_cast<size_t>(n) * width; ++i) to[i] = from[i];
    }
}

// out (B, Tl, C) =, lse (B, NH, Tl) = from this rank's qkv (B, Tl, C + 2·Ckv), NH query and KV
// key/value heads.
void ring_attention_forward(kernels::Context& ctx, const ContextGroup& group, const Tensor& out, const Tensor& lse,
                            const Tensor& qkv, const RingBuffers& buffers, int NH, int KV);
// dqkv (of qkv's shape) = from dout (B, Tl, C) and what forward kept: qkv, out and lse.
void ring_attention_backward(kernels::Context& ctx, const ContextGroup& group, const Tensor& dqkv, const Tensor& dout,
                             const Tensor& qkv, const Tensor& out, const Tensor& lse, const RingBuffers& buffers,
                             int NH, int KV);

}  // namespace trident::model
