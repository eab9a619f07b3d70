// The row-parallel layer's backward under sequence parallelism (model/tensor_parallel.hpp) over
// the world as the tensor group (p = 1 … 8 under mpirun -np), in 16 bits: dY's rows written
// rounded by their producer (GemmMode::dy_low_written — each rank's rows of the (M, N) 16-bit
// buffer, as the norms' backward leaves them) and gathered in 16 bits, against the f32 rows
// gathered and rounded there. The GEMMs read the same values: dx, dW (and the GELU layer's dpre
// and its bias gradient) bit for bit; the bias gradient, summed per rank and all-reduced, within
// f32 rounding of the sum over the gathered rows. With and without the ring overlap.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.hpp"
#include "model/tensor_parallel.hpp"
#include "mpi_fixture.hpp"

using namespace trident;
using testing::everywhere;
using testing::random_values;

namespace {

// n values rounded to bf16, as the model stores its operands.
std::vector<kernels::low16> bf16_of(const std::vector<float>& values) {
  kernels::Context ctx;
  std::vector<kernels::low16> out(values.size());
  kernels::convert(ctx, view(out.data(), DType::bf16, out.size()), view(const_cast<float*>(values.data()), values.size()));
  return out;
}

Tensor bf16_view(std::vector<kernels::low16>& v, Shape shape) { return view(v.data(), DType::bf16, shape.numel()).reshaped(shape); }

double worst_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / (std::fabs(double(b[i])) + 1e-6));
  return worst;
}

// One row-parallel backward's results on this rank.
struct Gradients {
  std::vector<float> dx, dw, db, dpre_bits, dbias_in;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(tensor_parallel)

BOOST_AUTO_TEST_CASE(row_parallel_backward_gathers_written_16_bit_rows) {
  comm::Communicator& world = testing::world();
  const int p = world.size(), r = world.rank();
  const int m = 5, M = m * p, K = 24, N = 40;  // K: this rank's columns of the layer's input
  const std::vector<float> dy_all = random_values(size_t(M) * N, 11);  // the same on every rank
  std::vector<float> mine(dy_all.begin() + int64_t(r) * m * N, dy_all.begin() + int64_t(r + 1) * m * N);
  std::vector<kernels::low16> x = bf16_of(random_values(size_t(M) * K, 12 + r)), w = bf16_of(random_values(size_t(N) * K, 30 + r));
  std::vector<kernels::low16> pre = bf16_of(random_values(size_t(M) * K, 50 + r));
  kernels::Context ctx;
  for (const bool overlap : {false, true}) {
    model::TensorGroup group;
    group.slice.rank = r, group.slice.size = p;
    group.collectives = p > 1 ? &world : nullptr;
    group.sequence_parallel = true, group.overlap = overlap;
    // gelu: the MLP output layer with GELU's backward fused (dpre in bf16, its bias gradient).
    auto run = [&](bool written, bool gelu) {
      Gradients g{std::vector<float>(size_t(M) * K), std::vector<float>(size_t(N) * K, 0.5f), std::vector<float>(N, 0.25f),
                  {}, std::vector<float>(K, 0.125f)};
      std::vector<kernels::low16> dy_low(size_t(M) * N, 0xFFFF), dpre(size_t(M) * K);
      std::vector<float> gathered(size_t(M) * N);
      if (written) {  // this rank's rows, where the norm's backward writes them
        const std::vector<kernels::low16> rows = bf16_of(mine);
        std::copy(rows.begin(), rows.end(), dy_low.begin() + int64_t(r) * m * N);
      }
      model::GemmMode mode{kernels::Precision::bf16, bf16_view(dy_low, {M, N}), written};
      const Tensor xs = bf16_view(x, {M, K}), ws = bf16_view(w, {N, K});
      if (gelu) {
        const model::GeluGradient out{bf16_view(dpre, {M, K}), view(g.dbias_in.data(), size_t(K)), bf16_view(pre, {M, K})};
        model::row_parallel_gelu_backward(ctx, mode, group, out, g.dw.data(), g.db.data(), mine.data(), gathered.data(),
                                          xs, ws, M, K, N);
        g.dpre_bits.assign(dpre.begin(), dpre.end());
      } else {
        model::row_parallel_backward(ctx, mode, group, g.dx.data(), g.dw.data(), g.db.data(), mine.data(),
                                     gathered.data(), xs, ws, M, K, N);
      }
      return g;
    };
    for (const bool gelu : {false, true}) {
      BOOST_TEST_CONTEXT("p " << p << (overlap ? ", overlapped" : "") << (gelu ? ", GELU layer" : "")) {
        const Gradients a = run(false, gelu), b = run(true, gelu);
        BOOST_TEST(everywhere(b.dx == a.dx && b.dw == a.dw && b.dpre_bits == a.dpre_bits && b.dbias_in == a.dbias_in));
        const double db = worst_relative(b.db, a.db);
        BOOST_TEST(everywhere(db < 1e-5), "bias gradient off by " << db << " (relative)");
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
