// Ring attention over the context group (the math and communication are stated in the header).
#include "model/context_parallel.hpp"

#include <vector>

namespace trident::model {
namespace {

using kernels::AttentionBlock;

// The blocks of this rank's query chunks against `source`'s key chunks that causality keeps:
// a key chunk before the query chunk whole, the same chunk causal, a later one not at all.
std::vector<AttentionBlock> blocks_against(const ContextGroup& group, int source, int rows) {
  std::vector<AttentionBlock> out;
  for (int q = 0; q < 2; ++q)
    for (int k = 0; k < 2; ++k) {
      const int query_chunk = group.chunk(group.rank, q), key_chunk = group.chunk(source, k);
      if (key_chunk <= query_chunk) out.push_back(AttentionBlock{q, k, rows, key_chunk == query_chunk});
    }
  return out;
}

// One step's message around the ring: `out` to rank r + 1, `in` from rank r − 1, both at once
// (Communicator::send_recv). Its Work left to the stream: the message is in and the sent buffer
// free before what comes next reads or writes them — on the host the wait; on a device stream
// the compute stream waits, the host goes on enqueuing (the pass's fence brings it under the
// watchdog, Transformer::settle_communication).
comm::Work pass_on(const ContextGroup& group, const Tensor& out, const Tensor& in, int tag) {
  const int next = (group.rank + 1) % group.size, previous = (group.rank + group.size - 1) % group.size;
  return group.ring->send_recv(out.data, in.data, out.numel(), out.dtype, next, previous, tag, group.stream);
}

int rows_per_chunk(const Tensor& qkv) { return static_cast<int>(qkv.shape.dims[1] / 2); }

// The columns of the query heads in qkv (B, Tl, C + 2·Ckv), and of the key and value heads (2·Ckv)
// after them: what travels.
int query_columns(const Tensor& out) { return static_cast<int>(out.shape.dims[2]); }
int key_value_columns(const Tensor& qkv, const Tensor& out) {
  return static_cast<int>(qkv.shape.dims[2]) - query_columns(out);
}

// (k, v) of this rank's own rows, packed out of its qkv: what travels.
void pack_keys(kernels::Context& ctx, const Tensor& kv, const Tensor& qkv, const Tensor& out) {
  kernels::copy_columns(ctx, kv, 0, qkv, query_columns(out), key_value_columns(qkv, out), false);
}

}  // namespace

void ring_attention_forward(kernels::Context& ctx, const ContextGroup& group, const Tensor& out, const Tensor& lse,
                            const Tensor& qkv, const RingBuffers& buffers, int NH, int KV) {
  const int c = group.size, n = rows_per_chunk(qkv);
  pack_keys(ctx, buffers.kv[0], qkv, out);
  bool started[2] = {false, false};  // a query chunk's first block writes out and lse
  for (int step = 0, held = 0; step < c; ++step, held = 1 - held) {
    comm::Work keys;
    if (step < c - 1) keys = pass_on(group, buffers.kv[held], buffers.kv[1 - held], 2 * step);
    for (AttentionBlock block : blocks_against(group, (group.rank - step + c) % c, n)) {
      block.first = !started[block.q_chunk];
      started[block.q_chunk] = true;
      kernels::flash_attention_block_forward(ctx, out, lse, qkv, buffers.kv[held], NH, KV, block);
    }
    keys.leave_to_stream();
  }
}

void ring_attention_backward(kernels::Context& ctx, const ContextGroup& group, const Tensor& dqkv, const Tensor& dout,
                             const Tensor& qkv, const Tensor& out, const Tensor& lse, const RingBuffers& buffers,
                             int NH, int KV) {
  const int c = group.size, n = rows_per_chunk(qkv);
  kernels::clear(ctx, dqkv);  // dq sums over the steps; dk, dv arrive with the owner's accumulator
  pack_keys(ctx, buffers.kv[0], qkv, out);
  kernels::clear(ctx, buffers.dkv[0]);
  int held = 0;
  for (int step = 0; step < c; ++step) {
    comm::Work keys;
    if (step < c - 1) keys = pass_on(group, buffers.kv[held], buffers.kv[1 - held], 2 * step);
    for (const AttentionBlock& block : blocks_against(group, (group.rank - step + c) % c, n))
      kernels::flash_attention_block_backward(ctx, dqkv, buffers.dkv[held], dout, qkv, buffers.kv[held], out, lse, NH,
                                              KV, block);
    keys.leave_to_stream();
    if (c == 1) break;  // the own block's gradients are complete where they are
    pass_on(group, buffers.dkv[held], buffers.dkv[1 - held], 2 * step + 1).leave_to_stream();
    held = 1 - held;  // the block received, and its accumulator (after the last step: the own block's, complete)
  }
  kernels::copy_columns(ctx, dqkv, query_columns(out), buffers.dkv[held], 0, key_value_columns(qkv, out), false);
}

}  // namespace trident::model
