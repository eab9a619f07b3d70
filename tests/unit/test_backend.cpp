// The kernel backend seam: allocation of each MemoryKind through a backend, tracked by memory
// category as before; the memory operations (clear, copy, upload, download, sum) and the typed
// element-type operations (convert, store, round_to, narrow) against the CPU's own conversions;
// typed tensor views; the dispatch of a Context to its backend; and the choice of a backend by
// kernels.device (the CPU's always, CUDA's, with every kernel, only where there is a GPU).
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernel_check.hpp"
#include "kernels/backend.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/stream_intervals.hpp"
#include "tensor/buffer.hpp"

namespace kernels = trident::kernels;
using trident::Buffer;
using trident::DType;
using trident::MemoryCategory;
using trident::MemoryKind;
using trident::Shape;
using trident::Tensor;
using trident::TensorBuffer;
using kernels::low16;

using trident::testing::tracked;

BOOST_AUTO_TEST_SUITE(backend)

BOOST_AUTO_TEST_CASE(allocation_of_every_kind_is_tracked_and_zeroed) {
  kernels::Backend& cpu = kernels::cpu_backend();
  for (MemoryKind kind : {MemoryKind::host, MemoryKind::pinned_host, MemoryKind::device}) {
    const int64_t before = tracked(MemoryCategory::Workspace), peak_before = trident::memory_usage().total_peak;
    const int64_t device_before = trident::memory_usage().device_current;
    {
      Buffer<float> buffer(1000, MemoryCategory::Workspace, cpu, kind);
      BOOST_TEST(tracked(MemoryCategory::Workspace) == before + 4000);
      // Device memory apart (what a GPU's used memory holds of ours); host and pinned not.
      BOOST_TEST(trident::memory_usage().device_current == device_before + (kind == MemoryKind::device ? 4000 : 0));
      BOOST_TEST(trident::memory_usage().total_peak >= peak_before);
      BOOST_TEST(reinterpret_cast<uintptr_t>(buffer.data()) % 64 == 0u);
      size_t nonzero = 0;
      for (size_t i = 0; i < buffer.size(); ++i) nonzero += buffer[i] != 0.0f;
      BOOST_TEST(nonzero == 0u);
      BOOST_TEST(buffer.device().is_cpu());
      Buffer<float> moved = std::move(buffer);  // the accounting moves with the memory
      BOOST_TEST(tracked(MemoryCategory::Workspace) == before + 4000);
    }
    BOOST_TEST(tracked(MemoryCategory::Workspace) == before);
    BOOST_TEST(trident::memory_usage().device_current == device_before);
  }
}

BOOST_AUTO_TEST_CASE(tensor_buffer_counts_its_dtype_bytes) {
  const int64_t before = tracked(MemoryCategory::Activations);
  {
    TensorBuffer low(DType::bf16, Shape{10, 20}, MemoryCategory::Activations, kernels::cpu_backend(), MemoryKind::device);
    TensorBuffer f32(DType::f32, Shape{10, 20}, MemoryCategory::Activations);
    BOOST_TEST(tracked(MemoryCategory::Activations) == before + 200 * 2 + 200 * 4);
    const Tensor t = low.view();
    BOOST_TEST(t.numel() == 200u);
    BOOST_TEST(t.bytes() == 400u);
    BOOST_TEST(t.shape.rank == 2);
    BOOST_TEST(t.shape.dims[1] == 20);
    BOOST_TEST(low.data<low16>() == static_cast<low16*>(t.data));
    BOOST_CHECK_THROW(low.data<float>(), std::logic_error);  // bf16 is not read as f32
    BOOST_TEST(f32.data<float>() != nullptr);
  }
  BOOST_TEST(tracked(MemoryCategory::Activations) == before);
}

BOOST_AUTO_TEST_CASE(typed_views) {
  std::vector<float> values(12, 1.0f);
  const Tensor t = trident::view(values.data(), Shape{3, 4});
  BOOST_TEST((t.dtype == DType::f32));
  BOOST_TEST(t.numel() == 12u);
  BOOST_TEST(t.as<float>() == values.data());
  BOOST_CHECK_THROW(t.as<int32_t>(), std::logic_error);
  BOOST_CHECK_THROW(t.as<low16>(), std::logic_error);
  std::vector<low16> half(12);
  for (DType type : {DType::bf16, DType::fp16}) {
    const Tensor h = trident::view(half.data(), type, half.size());
    BOOST_TEST(h.holds<low16>());
    BOOST_TEST(h.bytes() == 24u);
    BOOST_CHECK_THROW(h.as<float>(), std::logic_error);
  }
  BOOST_TEST(Shape{}.numel() == 0);
  BOOST_CHECK_THROW((Shape{1, 2, 3, 4, 5}), std::logic_error);
}

BOOST_AUTO_TEST_CASE(clear_copy_upload_download_and_sum) {
  kernels::Context ctx;
  const auto host = trident::testing::random_vector(1001, 3);
  Buffer<float> a(host.size(), MemoryCategory::Workspace, kernels::cpu_backend(), MemoryKind::device);
  Buffer<float> b(host.size(), MemoryCategory::Workspace, kernels::cpu_backend(), MemoryKind::device);
  kernels::upload(ctx, a.view(), host.data());
  BOOST_TEST(std::memcmp(a.data(), host.data(), host.size() * sizeof(float)) == 0);
  kernels::copy(ctx, b.view(), a.view());
  std::vector<float> back(host.size());
  kernels::download(ctx, back.data(), b.view());
  BOOST_TEST(back == host);
  double expected = 0.0;  // in index order, in double: the loss of a micro-batch
  for (float x : host) expected += x;
  BOOST_TEST(kernels::sum(ctx, a.view()) == expected);
  kernels::clear(ctx, a.view());
  BOOST_TEST(kernels::sum(ctx, a.view()) == 0.0);
  BOOST_TEST(a[500] == 0.0f);
  Buffer<int32_t> tokens(6, MemoryCategory::Activations);
  const int32_t ids[6] = {1, 2, 3, 255, 0, 7};
  kernels::upload(ctx, tokens.view(), ids);
  BOOST_TEST((tokens.view().dtype == DType::i32));
  BOOST_TEST(tokens[3] == 255);
  Buffer<float> shorter(10, MemoryCategory::Workspace);
  BOOST_CHECK_THROW(kernels::copy(ctx, shorter.view(), a.view()), std::logic_error);
}

// The typed operations are the CPU's 16-bit conversions, bit for bit.
BOOST_AUTO_TEST_CASE(typed_conversions_equal_the_cpu_conversions) {
  kernels::Context ctx;
  const size_t n = 70000;  // more than one narrowing block
  const auto values = trident::testing::random_vector(n, 4, 100.0f);
  for (auto [type, precision] : {std::pair{DType::bf16, kernels::Precision::bf16}, std::pair{DType::fp16, kernels::Precision::fp16}}) {
    std::vector<low16> expected(n), got(n);
    kernels::cpu::to_low(ctx, precision, expected.data(), values.data(), n);
    kernels::convert(ctx, trident::view(got.data(), type, n), trident::view(values.data(), n));
    BOOST_TEST(got == expected);
    std::vector<float> widened(n), widened_expected(n);
    kernels::cpu::from_low(ctx, precision, widened_expected.data(), expected.data(), n);
    kernels::convert(ctx, trident::view(widened.data(), n), trident::view(got.data(), type, n));
    BOOST_TEST(std::memcmp(widened.data(), widened_expected.data(), n * sizeof(float)) == 0);

    std::vector<float> stored = values, rounded = values;
    std::vector<low16> kept(n);
    kernels::store(ctx, trident::view(kept.data(), type, n), trident::view(stored.data(), n));
    BOOST_TEST(kept == expected);
    BOOST_TEST(std::memcmp(stored.data(), widened_expected.data(), n * sizeof(float)) == 0);
    kernels::round_to(ctx, trident::view(rounded.data(), n), type);
    BOOST_TEST(std::memcmp(rounded.data(), widened_expected.data(), n * sizeof(float)) == 0);

    std::vector<float> in_place = values;
    const Tensor narrowed = kernels::narrow(ctx, trident::view(in_place.data(), n), type);
    BOOST_TEST((narrowed.dtype == type));
    BOOST_TEST(narrowed.data == static_cast<void*>(in_place.data()));
    BOOST_TEST(std::memcmp(narrowed.data, expected.data(), n * sizeof(low16)) == 0);
  }
  std::vector<float> unchanged = values;  // f32 is its own storage type
  kernels::round_to(ctx, trident::view(unchanged.data(), n), DType::f32);
  BOOST_TEST(unchanged == values);
}

// A 16-bit output from the linear layer is its f32 output rounded (store's rounding), bit for bit,
// with and without bias, in bf16 and fp16; in a type other than the operands' it is refused. The
// CPU keeps the f32 sums in a tracked workspace of its own, grown to the largest need and kept
// (what the memory model counts): the caller allocates none.
BOOST_AUTO_TEST_CASE(a_16_bit_linear_output_is_the_f32_one_rounded) {
  const int M = 37, K = 24, N = 40;
  const size_t n = size_t(M) * N;
  const auto x32 = trident::testing::random_vector(size_t(M) * K, 35), w32 = trident::testing::random_vector(size_t(N) * K, 36, 0.3f);
  const auto bias = trident::testing::random_vector(N, 37);
  kernels::Context ctx;
  for (DType type : {DType::bf16, DType::fp16}) {
    std::vector<low16> x_low(x32.size()), w_low(w32.size()), expected(n), y_low(n);
    kernels::convert(ctx, trident::view(x_low.data(), type, x_low.size()), trident::testing::as_tensor(x32));
    kernels::convert(ctx, trident::view(w_low.data(), type, w_low.size()), trident::testing::as_tensor(w32));
    const Tensor x = trident::testing::as_tensor(x_low, type, {M, K}), w = trident::testing::as_tensor(w_low, type, {N, K});
    const Tensor y = trident::testing::as_tensor(y_low, type, {M, N});
    for (bool with_bias : {true, false}) {
      BOOST_TEST_CONTEXT(trident::dtype_name(type) << (with_bias ? " with bias" : "")) {
        const Tensor b = with_bias ? trident::testing::as_tensor(bias) : Tensor{};
        std::vector<float> y32(n);
        kernels::linear_forward(ctx, trident::view(y32.data(), n).reshaped({M, N}), x, w, b);
        kernels::convert(ctx, trident::testing::as_tensor(expected, type, {M, N}), trident::view(y32.data(), n));
        kernels::linear_forward(ctx, y, x, w, b);
        BOOST_TEST(y_low == expected);
        BOOST_TEST(tracked(MemoryCategory::Workspace) >= int64_t(n * sizeof(float)));
      }
    }
    const DType other = type == DType::bf16 ? DType::fp16 : DType::bf16;
    BOOST_CHECK_THROW(kernels::linear_forward(ctx, trident::testing::as_tensor(y_low, other, {M, N}), x, w, Tensor{}),
                      std::logic_error);
  }
  // The workspace is kept at the largest need so far, and a larger output grows it to exactly its
  // sums (freed first: the peak is the need). Portable arithmetic: no widening workspace beside it;
  // the first output larger than any other test's.
  kernels::Context portable;
  portable.arithmetic = kernels::Arithmetic::portable;
  const int rows = 1 << 15, more = rows + 64;
  std::vector<low16> x_big(size_t(more) * K), y_big(size_t(more) * N), w_big(w32.size());
  auto grow = [&](int m) {
    const int64_t before = tracked(MemoryCategory::Workspace);
    kernels::linear_forward(portable, trident::view(y_big.data(), DType::bf16, size_t(m) * N).reshaped({m, N}),
                            trident::view(x_big.data(), DType::bf16, size_t(m) * K).reshaped({m, K}),
                            trident::testing::as_tensor(w_big, DType::bf16, {N, K}), Tensor{});
    return tracked(MemoryCategory::Workspace) - before;
  };
  grow(rows);
  BOOST_TEST(grow(more) == int64_t(64) * N * int64_t(sizeof(float)));
  BOOST_TEST(grow(rows) == 0);
  BOOST_TEST(kernels::cpu_backend().runs_cpu_kernels());
}

// dy's 16-bit values written by its producer: the GEMMs from them (dy empty) and bias_gradient
// from the f32 dy give linear_backward's dx, dw and dbias from dy rounded there, bit for bit.
BOOST_AUTO_TEST_CASE(a_gradient_rounded_by_its_producer_gives_the_same_gradients) {
  const int M = 37, K = 24, N = 40;
  const size_t n = size_t(M) * N;
  const auto x32 = trident::testing::random_vector(size_t(M) * K, 38), w32 = trident::testing::random_vector(size_t(N) * K, 39, 0.3f);
  const auto dy = trident::testing::random_vector(n, 40);
  kernels::Context ctx;
  for (DType type : {DType::bf16, DType::fp16}) {
    BOOST_TEST_CONTEXT(trident::dtype_name(type)) {
      std::vector<low16> x_low(x32.size()), w_low(w32.size()), scratch(n), written(n);
      kernels::convert(ctx, trident::view(x_low.data(), type, x_low.size()), trident::testing::as_tensor(x32));
      kernels::convert(ctx, trident::view(w_low.data(), type, w_low.size()), trident::testing::as_tensor(w32));
      const Tensor x = trident::testing::as_tensor(x_low, type, {M, K}), w = trident::testing::as_tensor(w_low, type, {N, K});
      const Tensor g = trident::testing::as_tensor(dy, {M, N});
      std::vector<float> dx(size_t(M) * K), dw(size_t(N) * K, 0.5f), db(N, 0.25f), dx2 = dx, dw2 = dw, db2 = db;
      kernels::linear_backward(ctx, trident::testing::as_tensor(dx, {M, K}), trident::testing::as_tensor(dw, {N, K}),
                               trident::testing::as_tensor(db), g, trident::testing::as_tensor(scratch, type, {M, N}), x, w);
      kernels::convert(ctx, trident::testing::as_tensor(written, type, {M, N}), g);  // the producer's rounding
      kernels::linear_backward(ctx, trident::testing::as_tensor(dx2, {M, K}), trident::testing::as_tensor(dw2, {N, K}),
                               Tensor{}, Tensor{}, trident::testing::as_tensor(written, type, {M, N}), x, w);
      kernels::bias_gradient(ctx, trident::testing::as_tensor(db2), g);
      BOOST_TEST(dx2 == dx, boost::test_tools::per_element());
      BOOST_TEST(dw2 == dw, boost::test_tools::per_element());
      BOOST_TEST(db2 == db, boost::test_tools::per_element());
    }
  }
  std::vector<float> db(N + 1);
  BOOST_CHECK_THROW(kernels::bias_gradient(ctx, trident::testing::as_tensor(db), trident::testing::as_tensor(dy, {M, N})),
                    std::logic_error);
}

// The GELU layer in one operation is its parts as the model ran them apart, bit for bit: the
// GEMM, pre kept (the sums rounded with it), GELU of those values, act kept — in f32 (the GEMM
// writes pre), bf16 and fp16, with and without bias (the guard backend's, in training: e2e/device_guard).
// GELU's backward from the kept 16-bit values equals it from their f32 widening.
BOOST_AUTO_TEST_CASE(the_gelu_layer_is_its_parts) {
  const int M = 37, K = 24, N = 40;
  const size_t n = size_t(M) * N;
  const auto x32 = trident::testing::random_vector(size_t(M) * K, 31), w32 = trident::testing::random_vector(size_t(N) * K, 32, 0.3f);
  const auto bias = trident::testing::random_vector(N, 33), dout = trident::testing::random_vector(n, 34);
  {
    kernels::Context ctx;
    for (DType type : {DType::f32, DType::bf16, DType::fp16}) {
      const bool low = type != DType::f32;
      std::vector<low16> x_low(x32.size()), w_low(w32.size());
      Tensor x = trident::testing::as_tensor(x32, {M, K}), w = trident::testing::as_tensor(w32, {N, K});
      if (low) {
        kernels::convert(ctx, trident::view(x_low.data(), type, x_low.size()), x);
        kernels::convert(ctx, trident::view(w_low.data(), type, w_low.size()), w);
        x = trident::testing::as_tensor(x_low, type, {M, K}), w = trident::testing::as_tensor(w_low, type, {N, K});
      }
      for (bool with_bias : {true, false}) {
        BOOST_TEST_CONTEXT(trident::dtype_name(type) << (with_bias ? " with bias" : "")) {
          const Tensor b = with_bias ? trident::testing::as_tensor(bias) : Tensor{};
          // Apart: y = x wᵀ + b, kept; GELU of what was kept, kept.
          std::vector<float> y(n), gelu(n);
          std::vector<uint32_t> pre_expected(n), act_expected(n), pre(n), act(n);  // room for either width
          auto as = [&](std::vector<uint32_t>& v) {
            return low ? trident::view(reinterpret_cast<low16*>(v.data()), type, n).reshaped({M, N})
                       : trident::view(reinterpret_cast<float*>(v.data()), n).reshaped({M, N});
          };
          const Tensor y_t = trident::view(y.data(), n).reshaped({M, N}), gelu_t = trident::view(gelu.data(), n);
          kernels::linear_forward(ctx, y_t, x, w, b);
          if (low) kernels::store(ctx, as(pre_expected), y_t);
          else std::memcpy(pre_expected.data(), y.data(), n * sizeof(float));
          kernels::gelu_forward(ctx, gelu_t, y_t);
          if (low) kernels::store(ctx, as(act_expected), gelu_t);
          else std::memcpy(act_expected.data(), gelu.data(), n * sizeof(float));
          // Together.
          kernels::linear_gelu_forward(ctx, as(pre), as(act), x, w, b);
          const size_t bytes = n * (low ? 2 : 4);
          BOOST_TEST(std::memcmp(pre.data(), pre_expected.data(), bytes) == 0);
          BOOST_TEST(std::memcmp(act.data(), act_expected.data(), bytes) == 0);
          if (!low) continue;
          std::vector<float> widened(n), from_f32(n), from_kept(n);
          kernels::convert(ctx, trident::view(widened.data(), n), as(pre));
          kernels::gelu_backward(ctx, trident::view(from_f32.data(), n), trident::view(widened.data(), n),
                                 trident::testing::as_tensor(dout));
          kernels::gelu_backward(ctx, trident::view(from_kept.data(), n), as(pre), trident::testing::as_tensor(dout));
          BOOST_TEST(std::memcmp(from_kept.data(), from_f32.data(), n * sizeof(float)) == 0);
        }
      }
    }
  }
}

// Its backward in one operation is its parts as the model ran them apart, bit for bit: the output
// layer's input gradient (linear_backward's dx, from dy's 16-bit values in a 16-bit model), GELU'
// of the kept pre, the input layer's bias gradient summed from those f32 values (added to what
// it held), and dpre kept in pre's type. M = 70 rows: more than one chunk of the widening pass
// would be too (its chunks are 2048 values: 70 · 40 = 2800). pre's memory as an output: refused.
BOOST_AUTO_TEST_CASE(the_gelu_layer_backward_is_its_parts) {
  const int M = 70, K = 40, N = 24;  // pre, dpre (M, K); dy (M, N); w (N, K)
  const size_t n = size_t(M) * K;
  const auto pre32 = trident::testing::random_vector(n, 41), w32 = trident::testing::random_vector(size_t(N) * K, 42, 0.3f);
  const auto dy32 = trident::testing::random_vector(size_t(M) * N, 43), held = trident::testing::random_vector(K, 44);
  kernels::Context ctx;
  for (DType type : {DType::f32, DType::bf16, DType::fp16}) {
    BOOST_TEST_CONTEXT(trident::dtype_name(type)) {
      const bool low = type != DType::f32;
      // Each operand in the layer's type (16-bit: rounded, kept as uint32 words for room).
      auto typed = [&](const std::vector<float>& values, std::vector<uint32_t>& room, Shape shape) {
        room.assign(values.size(), 0);
        if (!low) {
          std::memcpy(room.data(), values.data(), values.size() * sizeof(float));
          return trident::view(reinterpret_cast<float*>(room.data()), values.size()).reshaped(shape);
        }
        const Tensor t = trident::view(reinterpret_cast<low16*>(room.data()), type, values.size()).reshaped(shape);
        kernels::convert(ctx, t, trident::testing::as_tensor(values));
        return t;
      };
      std::vector<uint32_t> pre_room, w_room, dy_room, dpre_room, expected_room;
      const Tensor pre = typed(pre32, pre_room, {M, K}), w = typed(w32, w_room, {N, K}), dy = typed(dy32, dy_room, {M, N});
      // Apart.
      std::vector<float> dx(n), dgelu(n), db_expected = held;
      const Tensor dx_t = trident::view(dx.data(), n).reshaped({M, K}), dgelu_t = trident::view(dgelu.data(), n);
      kernels::linear_backward(ctx, dx_t, Tensor{}, Tensor{}, low ? Tensor{} : dy, low ? dy : Tensor{}, pre, w);
      kernels::gelu_backward(ctx, dgelu_t, pre, dx_t);
      for (int k = 0; k < K; ++k) {
        float sum = 0.0f;
        for (int m = 0; m < M; ++m) sum += dgelu[size_t(m) * K + k];
        db_expected[k] += sum;
      }
      const Tensor expected = typed(std::vector<float>(n), expected_room, {M, K});
      kernels::store(ctx, expected, dgelu_t);
      // Together.
      std::vector<float> db = held;
      const Tensor dpre = typed(std::vector<float>(n), dpre_room, {M, K});
      kernels::linear_gelu_backward(ctx, dpre, trident::testing::as_tensor(db), dy, pre, w);
      BOOST_TEST(std::memcmp(dpre.data, expected.data, n * (low ? 2 : 4)) == 0);
      BOOST_TEST(db == db_expected, boost::test_tools::per_element());
      // Without a bias gradient the same dpre.
      std::vector<uint32_t> again_room;
      const Tensor again = typed(std::vector<float>(n), again_room, {M, K});
      kernels::linear_gelu_backward(ctx, again, Tensor{}, dy, pre, w);
      BOOST_TEST(std::memcmp(again.data, expected.data, n * (low ? 2 : 4)) == 0);
      // dpre may not be pre's memory (the GEMM writes it before GELU' reads pre).
      BOOST_CHECK_THROW(kernels::linear_gelu_backward(ctx, pre, Tensor{}, dy, pre, w), std::logic_error);
    }
  }
}

// A backend lacking an operation is not called into: the call says which backend lacks what.
BOOST_AUTO_TEST_CASE(a_context_runs_on_its_backend) {
  using Table = trident::kernels::KernelTable;
  struct EmptyBackend : trident::kernels::Backend {
    trident::Device device() const override { return {}; }
    void* allocate(size_t bytes, MemoryKind kind) override { return trident::host_allocator().allocate(bytes, kind); }
    void release(void* p, size_t bytes, MemoryKind kind) override { trident::host_allocator().release(p, bytes, kind); }
    const char* name() const override { return "empty"; }
    const Table& kernels() const override { return table; }
    std::string unavailable_reason() const override { return "it has no kernels"; }
    Table table;
  } empty;
  kernels::Context ctx;
  ctx.backend = &empty;
  std::vector<float> x(4, 1.0f);
  try {
    kernels::clear(ctx, trident::view(x.data(), x.size()));
    BOOST_FAIL("a backend without clear ran it");
  } catch (const std::logic_error& e) {
    BOOST_TEST(std::string(e.what()) == "the empty kernel backend has no clear");
  }
  BOOST_TEST(x[0] == 1.0f);
  BOOST_TEST(&kernels::backend_of(ctx) == &empty);
  BOOST_TEST(&kernels::backend_of(kernels::Context{}) == &kernels::cpu_backend());
  BOOST_TEST(empty.kernels().present() == 0);
}

BOOST_AUTO_TEST_CASE(device_selection) {
  BOOST_TEST(kernels::find_backend("cpu") == &kernels::cpu_backend());
  BOOST_TEST(kernels::backend_unavailable("cpu") == "");
  const kernels::KernelTable& cpu = kernels::cpu_backend().kernels();
  BOOST_TEST(cpu.present() == kernels::KernelTable::total());  // every operation
  BOOST_TEST(kernels::find_backend("tpu") == nullptr);
  BOOST_TEST(kernels::backend_unavailable("tpu") != "");
  // CUDA: every operation in its table; selectable by its kernels exactly where CUDA sees a GPU
  // (the job refuses it still, for the parts of the trainer that are not device-ready:
  // tests/e2e/deck_errors.sh).
  const std::string why = kernels::backend_unavailable("cuda");
  kernels::Backend* cuda = kernels::find_backend("cuda");
#if TRIDENT_CUDA
  BOOST_REQUIRE(cuda != nullptr);
  BOOST_TEST(cuda->kernels().present() == kernels::KernelTable::total());
  BOOST_TEST((why.empty() || why.find("this machine has no GPU visible to CUDA") != std::string::npos), why);
#else
  BOOST_TEST(why != "");
  BOOST_TEST(cuda == nullptr);
  BOOST_TEST(why.find("built without CUDA") != std::string::npos, why);
#endif
}

// kernels.device = guard: its device memory is usable by its kernels (the same results as the
// CPU's), and host code touching it outside a kernel, or a kernel handed host memory, stops the
// process with the guard's report (exit 70), not a crash; host and pinned memory stay ordinary.
namespace {

// The exit status of `touch` run in a child process, with its stderr in `report`.
int exit_status_of(void (*touch)(), std::string& report) {
  int pipe_fds[2];
  BOOST_REQUIRE(pipe(pipe_fds) == 0);
  const pid_t child = fork();
  if (child == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    touch();
    _exit(0);
  }
  close(pipe_fds[1]);
  char text[512];
  const ssize_t n = read(pipe_fds[0], text, sizeof text);
  close(pipe_fds[0]);
  report.assign(text, n > 0 ? static_cast<size_t>(n) : 0);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void write_device_memory_from_host() {
  kernels::Backend& guard = *kernels::find_backend("guard");
  Buffer<float> values(64, MemoryCategory::Activations, guard, MemoryKind::device);
  values.data()[3] = 1.0f;  // host code, outside a kernel
}

void give_a_kernel_host_memory() {
  kernels::Backend& guard = *kernels::find_backend("guard");
  kernels::Context ctx{&guard, {}};
  std::vector<float> host(64, 1.0f);
  kernels::sum(ctx, trident::view(host.data(), host.size()));  // a GPU kernel could not read it
}

void read_device_memory_through_the_backend() {
  kernels::Backend& guard = *kernels::find_backend("guard");
  Buffer<float> values(64, MemoryCategory::Activations, guard, MemoryKind::device);
  kernels::Context ctx{&guard, {}};
  std::vector<float> host(64, 2.0f);
  kernels::upload(ctx, values.view(), host.data());
  if (kernels::sum(ctx, values.view()) != 128.0) _exit(1);
  kernels::download(ctx, host.data(), values.view());
  Buffer<float> pinned(64, MemoryCategory::Checkpoint, guard, MemoryKind::pinned_host);
  pinned.data()[0] = host[0];  // host memory of the guard: ordinary
}

void upload_inside_a_capture() {
  kernels::Backend& guard = *kernels::find_backend("guard");
  Buffer<float> values(64, MemoryCategory::Activations, guard, MemoryKind::device);
  kernels::Context ctx{&guard, {}};
  std::vector<float> host(64, 1.0f);
  guard.capture_graph(trident::Stream{}, [&] { kernels::upload(ctx, values.view(), host.data()); });
}

void host_read_inside_a_capture() {
  kernels::Backend& guard = *kernels::find_backend("guard");
  Buffer<float> values(64, MemoryCategory::Activations, guard, MemoryKind::device);
  kernels::Context ctx{&guard, {}};
  guard.capture_graph(trident::Stream{}, [&] { kernels::sum(ctx, values.view()); });
}

}  // namespace

// cuda.graphs on the guard: a capture records the kernels without running them, each launch
// runs them again with the recorded arguments; a host transfer or a host read inside a capture is
// reported as CUDA's capture would fail on it. The CPU backend records no graphs.
BOOST_AUTO_TEST_CASE(guard_records_and_replays_graphs) {
  kernels::Backend& guard = *kernels::find_backend("guard");
  BOOST_TEST(guard.graphs_unavailable() == "");
  kernels::Context ctx{&guard, {}};
  Buffer<float> acc(64, MemoryCategory::Activations, guard, MemoryKind::device);
  Buffer<float> x(64, MemoryCategory::Activations, guard, MemoryKind::device);
  Buffer<double> total(1, MemoryCategory::Activations, guard, MemoryKind::device);
  std::vector<float> host(64);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.25f * static_cast<float>(i);
  kernels::upload(ctx, x.view(), host.data());
  void* graph = guard.capture_graph(trident::Stream{}, [&] {
    kernels::add_inplace(ctx, acc.view(), x.view());
    kernels::sum_into(ctx, total.view(), acc.view());
  });
  BOOST_TEST(kernels::sum(ctx, acc.view()) == 0.0);  // recorded, not run
  guard.launch_graph(graph, trident::Stream{});
  guard.launch_graph(graph, trident::Stream{});
  double sum = 0;
  kernels::download(ctx, &sum, total.view());
  BOOST_TEST(sum == 2 * kernels::sum(ctx, x.view()));
  BOOST_TEST(sum == kernels::sum(ctx, acc.view()));
  guard.destroy_graph(graph);
  std::string report;
  BOOST_TEST(exit_status_of(&upload_inside_a_capture, report) == 70);
  BOOST_TEST(report.find("kernel upload inside a captured graph") != std::string::npos, report);
  BOOST_TEST(exit_status_of(&host_read_inside_a_capture, report) == 70);
  BOOST_TEST(report.find("kernel sum inside a captured graph") != std::string::npos, report);
  kernels::Backend& cpu = kernels::cpu_backend();
  BOOST_TEST(cpu.graphs_unavailable() != "");
  BOOST_CHECK_THROW(cpu.capture_graph(trident::Stream{}, [] {}), std::logic_error);
}

// Marks on the host's streams are the host clock: the seconds between two span what ran between
// them (a sleep here), on the CPU and on the guard alike.
BOOST_AUTO_TEST_CASE(stream_marks_time_the_work_between_them) {
  for (kernels::Backend* backend : {&kernels::cpu_backend(), kernels::find_backend("guard")}) {
    const kernels::Backend::Mark from = backend->mark(trident::Stream{});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const kernels::Backend::Mark to = backend->mark(trident::Stream{});
    const double seconds = backend->seconds_between(from, to);
    BOOST_TEST(seconds >= 0.019, backend->name() << ": " << seconds);
    BOOST_TEST(seconds < 2.0, backend->name() << ": " << seconds);
  }
}

// Intervals of a host stream are the host clock's: they sum what ran inside them (not between),
// are taken once, and must nest properly.
BOOST_AUTO_TEST_CASE(stream_intervals_sum_what_ran_inside_them) {
  kernels::StreamIntervals intervals(kernels::Context{});
  for (int ms : {12, 6}) {
    intervals.begin();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    intervals.end();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // outside: not counted
  }
  const double seconds = intervals.take_seconds();
  BOOST_TEST(seconds >= 0.018, seconds);
  BOOST_TEST(seconds < 0.048, seconds);  // the 60 ms outside would exceed it
  BOOST_TEST(intervals.take_seconds() == 0.0);
  BOOST_CHECK_THROW(intervals.end(), std::logic_error);
  intervals.begin();
  BOOST_CHECK_THROW(intervals.begin(), std::logic_error);
}

// sum_into leaves the CPU's sum (index order, double) on the device, bit for bit.
BOOST_AUTO_TEST_CASE(sum_into_is_the_sum) {
  kernels::Context ctx;
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1.0f / static_cast<float>(i + 3);
  double total = 0;
  kernels::sum_into(ctx, trident::view(&total, 1), trident::view(values.data(), values.size()));
  BOOST_TEST(total == kernels::sum(ctx, trident::view(values.data(), values.size())));
  BOOST_CHECK_THROW(kernels::sum_into(ctx, trident::view(values.data(), 1), trident::view(values.data(), 4)),
                    std::logic_error);
}

BOOST_AUTO_TEST_CASE(guard_backend_faults_host_access_to_device_memory) {
  kernels::Backend* guard = kernels::find_backend("guard");
  BOOST_REQUIRE(guard != nullptr);
  BOOST_TEST(kernels::backend_unavailable("guard") == "");
  BOOST_TEST(guard->kernels().present() == kernels::KernelTable::total());
  BOOST_TEST(!guard->device().is_cpu());
  std::string report;
  BOOST_TEST(exit_status_of(&read_device_memory_through_the_backend, report) == 0, report);
  BOOST_TEST(exit_status_of(&write_device_memory_from_host, report) == 70);
  BOOST_TEST(report.find("kernels.device = guard: host code touched device memory") != std::string::npos, report);
  BOOST_TEST(exit_status_of(&give_a_kernel_host_memory, report) == 70);
  BOOST_TEST(report.find("kernels.device = guard: kernel sum got host memory") != std::string::npos, report);
}

BOOST_AUTO_TEST_SUITE_END()
