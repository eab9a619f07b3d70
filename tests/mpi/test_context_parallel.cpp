// Ring attention (model/context_parallel.hpp) over the world as the context group (c = 1, 2, 4,
// 8 under mpirun -np 1 … 8): each rank's two chunks of the sequence (r and 2c−1−r) through the
// ring, against the one-rank flash attention of the whole sequence — the output rows, the
// log-sum-exps and every gradient within fp32 rounding — at chunks shorter than a tile and
// across the 128-row tiles, with two sequences per micro-batch; multi-head and grouped-query
// attention (2 key/value heads of 4, whose (k, v) travel as they are: 2·KV·hs columns).
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu.hpp"
#include "kernels/kernels.hpp"
#include "model/context_parallel.hpp"
#include "mpi_fixture.hpp"

using namespace trident;
using testing::everywhere;
using testing::random_values;

namespace {

// This rank's chunks of (B, T, width) values (model::take_chunks).
std::vector<float> local_rows(const std::vector<float>& whole, const model::ContextGroup& group, int B, int T,
                              int width) {
  std::vector<float> out(whole.size() / group.size);
  model::take_chunks(group, whole.data(), out.data(), B, T, width);
  return out;
}

double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(context_parallel)

BOOST_AUTO_TEST_CASE(ring_attention_equals_the_whole_sequence) {
  comm::Communicator& world = testing::world();
  model::ContextGroup group{&world, world.rank(), world.size(), Stream{}};
  const int c = group.size;
  for (const auto& [n, KV] : std::vector<std::pair<int, int>>{{3, 4}, {130, 4}, {3, 2}, {130, 1}}) {
    const int B = 2, C = 32, NH = 4, T = 2 * c * n, Tl = 2 * n, kv_width = 2 * KV * (C / NH), W = C + kv_width;
    const std::vector<float> qkv = random_values(size_t(B) * T * W, 5), dout = random_values(size_t(B) * T * C, 6);
    kernels::Context ctx;
    // The whole sequence on this rank alone: the reference.
    std::vector<float> out(size_t(B) * T * C), lse(size_t(B) * NH * T), dqkv(qkv.size());
    const Tensor whole_qkv = view(qkv.data(), Shape{B, T, W}), whole_out = view(out.data(), Shape{B, T, C});
    kernels::flash_attention_forward(ctx, whole_out, view(lse.data(), lse.size()), whole_qkv, NH, KV);
    kernels::flash_attention_backward(ctx, view(dqkv.data(), Shape{B, T, W}), view(dout.data(), Shape{B, T, C}),
                                      whole_qkv, whole_out, view(lse.data(), lse.size()), NH, KV);
    // (B, NH, T) statistics as (B·NH, T) rows of one value each: the chunks of each row.
    const std::vector<float> want_out = local_rows(out, group, B, T, C);
    const std::vector<float> want_lse = local_rows(lse, group, B * NH, T, 1);
    const std::vector<float> want_dqkv = local_rows(dqkv, group, B, T, W);
    // This rank's chunks through the ring.
    std::vector<float> my_qkv = local_rows(qkv, group, B, T, W), my_dout = local_rows(dout, group, B, T, C);
    std::vector<float> my_out(want_out.size()), my_lse(want_lse.size()), my_dqkv(my_qkv.size());
    std::vector<std::vector<float>> scratch(4, std::vector<float>(size_t(B) * Tl * kv_width));
    model::RingBuffers buffers;
    for (int i = 0; i < 2; ++i) {
      buffers.kv[i] = view(scratch[i].data(), Shape{B, Tl, kv_width});
      buffers.dkv[i] = view(scratch[2 + i].data(), Shape{B, Tl, kv_width});
    }
    const Tensor q = view(my_qkv.data(), Shape{B, Tl, W}), o = view(my_out.data(), Shape{B, Tl, C});
    const Tensor l = view(my_lse.data(), my_lse.size());
    model::ring_attention_forward(ctx, group, o, l, q, buffers, NH, KV);
    model::ring_attention_backward(ctx, group, view(my_dqkv.data(), Shape{B, Tl, W}),
                                   view(my_dout.data(), Shape{B, Tl, C}), q, o, l, buffers, NH, KV);
    const double out_error = worst_difference(my_out, want_out), lse_error = worst_difference(my_lse, want_lse);
    const double dqkv_error = worst_difference(my_dqkv, want_dqkv);
    BOOST_TEST_MESSAGE("c=" << c << " n=" << n << " KV=" << KV << ": out " << out_error << ", lse " << lse_error << ", dqkv "
                            << dqkv_error);
    BOOST_TEST(everywhere(out_error <= 1e-5 && lse_error <= 1e-5 && dqkv_error <= 1e-5),
               "c=" << c << " n=" << n << " KV=" << KV << ": out " << out_error << ", lse " << lse_error << ", dqkv " << dqkv_error);
  }
}

BOOST_AUTO_TEST_SUITE_END()
