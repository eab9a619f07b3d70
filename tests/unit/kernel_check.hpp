// Helpers of the kernel tests: random data, a double-precision comparison, and a central
// finite-difference check of an analytic gradient.
#pragma once

#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensor/buffer.hpp"
#include "tensor/tensor.hpp"

namespace trident::testing {

// Bytes of `category` this process holds now (the tracked memory the memory model counts).
inline int64_t tracked(MemoryCategory category) { return memory_usage().current[static_cast<int>(category)]; }

// A host vector as the tensor a kernel takes: its elements, or seen as `shape` (what the kernel
// reads its sizes from). 16-bit values name their dtype.
template <class T>
Tensor as_tensor(const std::vector<T>& v) {
  return view(v.data(), v.size());
}
template <class T>
Tensor as_tensor(const std::vector<T>& v, Shape shape) {
  return view(v.data(), v.size()).reshaped(shape);
}
inline Tensor as_tensor(const std::vector<uint16_t>& v, DType dtype, Shape shape) {
  return view(v.data(), dtype, v.size()).reshaped(shape);
}

inline std::vector<float> random_vector(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// An AdamW problem of n parameters from seeds seed … seed + 3: parameters and gradients of order
// 1, the moments of order 0.1 (the second one non-negative, as a second moment is).
struct AdamWState {
  std::vector<float> params, grads, m, v;
};
inline AdamWState random_adamw_state(size_t n, unsigned seed) {
  AdamWState s{random_vector(n, seed), random_vector(n, seed + 1), random_vector(n, seed + 2, 0.1f),
               random_vector(n, seed + 3, 0.1f)};
  for (float& x : s.v) x = std::fabs(x);
  return s;
}

// max |a − b| / (|b| + atol) over all entries must stay below rtol.
inline void expect_close(const std::vector<float>& actual, const std::vector<double>& expected,
                         double rtol, double atol, const std::string& what) {
  BOOST_REQUIRE_EQUAL(actual.size(), expected.size());
  double worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double err = std::fabs(actual[i] - expected[i]) / (std::fabs(expected[i]) + atol);
    if (err > worst) worst = err, worst_at = i;
  }
  BOOST_TEST(worst <= rtol, what << ": worst relative error " << worst << " at " << worst_at
                                 << " (" << actual[worst_at] << " vs " << expected[worst_at] << ")");
}

// Central differences of loss() w.r.t. x at up to `samples` evenly spread entries, against the
// analytic gradient. loss() must read x and return a double.
inline void check_gradient(std::vector<float>& x, const std::vector<float>& analytic,
                           const std::function<double()>& loss, const std::string& what,
                           float h = 1e-2f, double rtol = 2e-2, double atol = 1e-3,
                           size_t samples = 64) {
  BOOST_REQUIRE_EQUAL(x.size(), analytic.size());
  BOOST_REQUIRE_MESSAGE(!x.empty(), what << ": no values to check");
  const size_t stride = std::max<size_t>(1, x.size() / samples);
  double worst = 0.0;
  size_t worst_at = 0;
  double worst_fd = 0.0;
  for (size_t i = 0; i < x.size(); i += stride) {
    const float saved = x[i];
    x[i] = saved + h;
    const double plus = loss();
    x[i] = saved - h;
    const double minus = loss();
    x[i] = saved;
    const double fd = (plus - minus) / (2.0 * h);
    const double err = std::fabs(fd - analytic[i]) / (std::fabs(fd) + atol);
    if (err > worst) worst = err, worst_at = i, worst_fd = fd;
  }
  BOOST_TEST(worst <= rtol, what << ": worst relative error " << worst << " at " << worst_at
                                 << " (analytic " << analytic[worst_at] << ", finite difference "
                                 << worst_fd << ")");
}

// Σ w_i · y_i in double: a scalar loss whose gradient w.r.t. y is w.
inline double weighted_sum(const std::vector<float>& y, const std::vector<float>& w) {
  double sum = 0.0;
  for (size_t i = 0; i < y.size(); ++i) sum += static_cast<double>(y[i]) * w[i];
  return sum;
}

// LayerNorm of rows (N, C) in double: (x − mean) / √(variance + 1e-5) · w + b.
inline std::vector<double> layernorm_reference(const std::vector<float>& x, const std::vector<float>& w,
                                               const std::vector<float>& b, int N, int C) {
  std::vector<double> expected(static_cast<size_t>(N) * C);
  for (int n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    v /= C;
    for (int c = 0; c < C; ++c) expected[n * C + c] = (x[n * C + c] - m) / std::sqrt(v + 1e-5) * w[c] + b[c];
  }
  return expected;
}

}  // namespace trident::testing
