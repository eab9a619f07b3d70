// GEMMs through cuBLASLt: f32 operands in f32 (CUBLAS_COMPUTE_32F: TF32 off, so the fp32 path
// agrees with the CPU's oneDNN to f32 rounding), bf16 / fp16 operands with f32 accumulation and
// f32 results. Per shape, layout, alignment and type, the matmul descriptor, the three layouts and
// the algorithm cuBLASLt's heuristic picks are created once and cached (an unordered_map keyed by
// that tuple); the workspace is one per stream.
//
// Row-major to column-major: cuBLASLt is column-major, so the row-major c (M, N) = a · b is run as
// cᵀ (N, M) = bᵀ (N, K) · aᵀ (K, M): a row-major operand is its own transpose in column-major,
// an operand stored transposed (unit row stride) is read with op = T. The (batch, heads) grid
// maps onto cuBLASLt's strided batch where one stride describes it (one of the two is 1, or the
// batch stride is heads × the head stride for all three operands); otherwise one call per batch
// entry over the heads (attention's heads inside the fused qkv activation).
#include <cublasLt.h>

#include <array>
#include <cstdio>
#include <map>
#include <set>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "kernels/backend.hpp"
#include "kernels/common/extents.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"
#include "tensor/buffer.hpp"

namespace trident::kernels::cuda {
Backend& backend();  // kernels/cuda/backend.cu
namespace {

constexpr size_t kWorkspaceBytes = kCudaGemmWorkspaceBytes;

cudaDataType_t cuda_type(OperandType type) {
  return type == OperandType::bf16 ? CUDA_R_16BF : type == OperandType::f16 ? CUDA_R_16F : CUDA_R_32F;
}

void check_blas(cublasStatus_t status, const char* what, const Gemm& g) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt: ") + what + " failed (status " + std::to_string(status) +
                             ") for the " + describe(g));
}

// An operand X, logically (rows, cols) row-major with strides s, described as Xᵀ in column-major:
// the op cuBLASLt applies to the stored layout (layout_rows, layout_cols, ld).
struct Operand {
  cublasOperation_t op;
  uint64_t layout_rows, layout_cols;
  int64_t ld;
};

bool describes(int64_t rows, int64_t cols, const Strides& s, Operand& out) {
  if (s.col == 1 && (s.row >= cols || rows == 1)) {
    out = {CUBLAS_OP_N, static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), s.row > cols ? s.row : cols};
    return true;
  }
  if (s.row == 1 && (s.col >= rows || cols == 1)) {
    out = {CUBLAS_OP_T, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), s.col > rows ? s.col : rows};
    return true;
  }
  return false;
}

// One cuBLASLt call's batching: `count` matrices `stride` elements apart in each operand, and
// `calls` such calls `call_stride` apart (the batch entries that one stride cannot reach).
struct Batching {
  int count = 1, calls = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t call_a = 0, call_b = 0, call_c = 0;
};

Batching batching(const Gemm& g) {
  Batching plan;
  const bool folds = g.a.batch == g.heads * g.a.head && g.b.batch == g.heads * g.b.head &&
                     g.c.batch == g.heads * g.c.head;
  if (g.heads == 1) {
    plan.count = g.batch, plan.stride_a = g.a.batch, plan.stride_b = g.b.batch, plan.stride_c = g.c.batch;
  } else if (g.batch == 1 || folds) {
    plan.count = g.batch * g.heads, plan.stride_a = g.a.head, plan.stride_b = g.b.head, plan.stride_c = g.c.head;
  } else {
    plan.count = g.heads, plan.stride_a = g.a.head, plan.stride_b = g.b.head, plan.stride_c = g.c.head;
    plan.calls = g.batch, plan.call_a = g.a.batch, plan.call_b = g.b.batch, plan.call_c = g.c.batch;
  }
  return plan;
}

// The alignment in bytes (a power of two, at most 256) that every matrix of an operand has: its
// base address and its batch strides.
uint32_t alignment(uintptr_t base, int64_t stride_bytes, int64_t call_bytes) {
  const uint64_t bits = base | static_cast<uint64_t>(stride_bytes) | static_cast<uint64_t>(call_bytes) | 256u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// The cache key: shape, strides, flags, type and the four alignments.
using Key = std::array<int64_t, 24>;
struct KeyHash {  // FNV-1a over the key's numbers (also EpilogueKey's)
  template <size_t N>
  size_t operator()(const std::array<int64_t, N>& key) const {
    size_t h = 1469598103934665603ull;
    for (int64_t v : key) h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
};

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Batching batches;
};

struct Alignments {
  uint32_t a, b, c, bias;  // bias: 256 where the GEMM has none
};

cublasLtHandle_t handle() {
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t created = nullptr;
    if (cublasLtCreate(&created) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cuBLASLt: cublasLtCreate failed");
    return created;
  }();
  return h;
}

cublasLtMatrixLayout_t make_layout(const Gemm& g, cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld,
                                   int count, int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  check_blas(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld), "cublasLtMatrixLayoutCreate", g);
  if (count > 1) {
    check_blas(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
               "set the batch count", g);
    check_blas(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                sizeof stride),
               "set the batch stride", g);
  }
  return layout;
}

// cuBLASLt's best algorithm for op on these layouts (c also D's), at most our workspace, the
// operands at these alignments in bytes (cuBLASLt's A, B, C: our b, a, c). Returns the heuristic's
// status; found is false where it offers none.
cublasStatus_t best_algorithm(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                              cublasLtMatrixLayout_t c, uint32_t align_a, uint32_t align_b, uint32_t align_c,
                              cublasLtMatmulAlgo_t& algo, bool& found) {
  cublasLtMatmulPreference_t preference = nullptr;
  cublasStatus_t status = cublasLtMatmulPreferenceCreate(&preference);
  found = false;
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  const uint64_t workspace = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                       sizeof workspace);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c);
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  status = cublasLtMatmulAlgoGetHeuristic(handle(), op, a, b, c, c, preference, 1, &result, &count);
  cublasLtMatmulPreferenceDestroy(preference);
  found = status == CUBLAS_STATUS_SUCCESS && count > 0;
  if (found) algo = result.algo;
  return status;
}

Plan create(const Gemm& g, const Alignments& align) {
  // cuBLASLt's "A" is our b read as bᵀ (N, K); its "B" is our a read as aᵀ (K, M); D is cᵀ (N, M).
  Operand first{}, second{};
  if (!describes(g.K, g.N, g.b, first) || !describes(g.M, g.K, g.a, second) || g.c.col != 1 || g.c.row < g.N)
    throw std::logic_error("kernels::cuda: a GEMM operand without a unit row or column stride: " + describe(g));
  Plan plan;
  plan.batches = batching(g);
  const cudaDataType_t operands = cuda_type(g.operands);
  check_blas(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", g);
  check_blas(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &first.op, sizeof first.op),
             "set op(A)", g);
  check_blas(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &second.op, sizeof second.op),
             "set op(B)", g);
  if (g.bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    check_blas(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
               "set the bias epilogue", g);
    // The heuristic reads the bias pointer's value for the alignment its algorithm may assume
    // (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER), never its data: a stand-in address of the
    // bias's alignment, so that a bias only 16 bytes aligned (a tensor rank's slice of a flat
    // parameter buffer) gets no algorithm that assumes more. run_gemm sets the real one.
    const void* stand_in = reinterpret_cast<const void*>(static_cast<uintptr_t>(align.bias));
    check_blas(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &stand_in, sizeof stand_in),
               "set the bias pointer's alignment", g);
  }
  const Batching& bt = plan.batches;
  plan.a = make_layout(g, operands, first.layout_rows, first.layout_cols, first.ld, bt.count, bt.stride_b);
  plan.b = make_layout(g, operands, second.layout_rows, second.layout_cols, second.ld, bt.count, bt.stride_a);
  plan.c = make_layout(g, CUDA_R_32F, g.N, g.M, g.c.row, bt.count, bt.stride_c);

  bool found = false;
  const cublasStatus_t status =
      best_algorithm(plan.op, plan.a, plan.b, plan.c, align.b, align.a, align.c, plan.algo, found);
  if (!found)
    throw std::runtime_error("cuBLASLt has no algorithm (status " + std::to_string(status) + ") for the " +
                             describe(g) + ", alignments a " + std::to_string(align.a) + " b " +
                             std::to_string(align.b) + " c " + std::to_string(align.c) + " bytes");
  return plan;
}

Alignments alignments_of(const Gemm& g, const void* a, const void* b, const void* c, const float* bias) {
  const Batching bt = batching(g);
  const int64_t e = static_cast<int64_t>(operand_bytes(g.operands));
  return {alignment(reinterpret_cast<uintptr_t>(a), bt.stride_a * e, bt.call_a * e),
          alignment(reinterpret_cast<uintptr_t>(b), bt.stride_b * e, bt.call_b * e),
          alignment(reinterpret_cast<uintptr_t>(c), bt.stride_c * 4, bt.call_c * 4),
          alignment(reinterpret_cast<uintptr_t>(bias), 0, 0)};
}

Key key_of(const Gemm& g, const Alignments& align) {
  return {g.batch, g.heads, g.M, g.N, g.K, g.a.batch, g.a.head, g.a.row, g.a.col, g.b.batch, g.b.head, g.b.row,
          g.b.col, g.c.batch, g.c.head, g.c.row, g.c.col, g.accumulate, g.bias, static_cast<int64_t>(g.operands),
          align.a, align.b, align.c, align.bias};
}

std::mutex g_mutex;  // the plan cache and the workspaces

// The plan of this GEMM at these alignments (created on first use). Call with g_mutex held.
const Plan& plan_for(const Gemm& g, const Alignments& align) {
  static std::unordered_map<Key, Plan, KeyHash> cache;
  const Key key = key_of(g, align);
  auto found = cache.find(key);
  if (found == cache.end()) found = cache.emplace(key, create(g, align)).first;
  return found->second;
}

// The plan of g at these alignments, or none for a bias GEMM whose bias epilogue cuBLASLt does not
// offer there (the refusal remembered and said once): the caller then adds the bias after a plain
// GEMM, as for a bias it cannot vectorize. Call with g_mutex held.
const Plan* plan_or_refusal(const Gemm& g, const Alignments& align) {
  if (!g.bias) return &plan_for(g, align);
  static std::set<Key> refused;
  const Key key = key_of(g, align);
  if (refused.count(key)) return nullptr;
  try {
    return &plan_for(g, align);
  } catch (const std::runtime_error& error) {
    refused.insert(key);
    std::fprintf(stderr, "kernels::cuda: %s; its bias is added after the product instead\n", error.what());
    return nullptr;
  }
}

// The workspace of a stream: cuBLASLt calls on one stream run in order, so one per stream.
void* workspace_of(cudaStream_t stream) {
  static std::map<cudaStream_t, Buffer<unsigned char>> workspaces;
  auto found = workspaces.find(stream);
  if (found == workspaces.end())
    found = workspaces.emplace(stream, Buffer<unsigned char>(kWorkspaceBytes, MemoryCategory::Workspace,
                                                             cuda::backend(), MemoryKind::device))
                .first;
  if (found->second.data() == nullptr) throw std::runtime_error("cuBLASLt: no device memory for its workspace");
  return found->second.data();
}

bool empty(const Gemm& g) { return g.M == 0 || g.N == 0 || g.batch == 0 || g.heads == 0; }

// c (M, N) += bias[n], rows ldc apart: the bias of a GEMM whose bias the epilogue may not take.
__global__ void add_bias_kernel(float* c, const float* bias, int M, int N, int64_t ldc) {
  FOR_EACH_ELEMENT(i, static_cast<size_t>(M) * N) c[i / N * ldc + i % N] += bias[i % N];
}

}  // namespace

void prepare_gemm(const Gemm& g) {
  if (empty(g) || g.K == 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  // Buffers of cudaMalloc are 256-byte aligned: the alignments of operands at the start of one.
  plan_for(g, alignments_of(g, nullptr, nullptr, nullptr, nullptr));
}

void run_gemm(Context& ctx, const Gemm& g, float* c, const void* a, const void* b, const float* bias) {
  if (empty(g)) return;
  if (g.K == 0) {  // no products: c keeps its values (+=) or would be all bias
    if (g.accumulate) return;
    throw std::logic_error("kernels::cuda: a GEMM with K = 0 that overwrites its result: " + describe(g));
  }
  cudaStream_t stream = stream_of(ctx);
  // The epilogue gets only 16-byte aligned vectors (what vectorized loads may assume), and only
  // where cuBLASLt offers an algorithm for the bias's alignment (create); another bias is added
  // after the product, the same f32 addition.
  std::unique_lock<std::mutex> lock(g_mutex);
  const Plan* found = g.bias && reinterpret_cast<uintptr_t>(bias) % 16 != 0
                          ? nullptr
                          : plan_or_refusal(g, alignments_of(g, a, b, c, bias));
  if (found == nullptr) {
    lock.unlock();  // the plain GEMM takes it again
    Gemm plain = g;
    plain.bias = false;
    run_gemm(ctx, plain, c, a, b);
    add_bias_kernel<<<blocks_for(static_cast<size_t>(g.M) * g.N), kThreads, 0, stream>>>(c, bias, g.M, g.N, g.c.row);
    return check_launch("add_bias");
  }
  const Plan& plan = *found;
  void* workspace = workspace_of(stream);
  if (g.bias)  // the plan's descriptor carries the bias pointer: set under the lock, read at the call
    check_blas(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
               "set the bias pointer", g);
  const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
  const size_t e = operand_bytes(g.operands);
  const Batching& bt = plan.batches;
  for (int call = 0; call < bt.calls; ++call) {
    const char* a_call = static_cast<const char*>(a) + call * bt.call_a * e;
    const char* b_call = static_cast<const char*>(b) + call * bt.call_b * e;
    float* c_call = c + call * bt.call_c;
    check_blas(cublasLtMatmul(handle(), plan.op, &alpha, b_call, plan.a, a_call, plan.b, &beta, c_call, plan.c, c_call,
                              plan.c, &plan.algo, workspace, kWorkspaceBytes, stream),
               "cublasLtMatmul", g);
  }
}

void strided_matmul(Context& ctx, float* c, const Strides& c_strides, const float* a, const Strides& a_strides,
                    const float* b, const Strides& b_strides, int batch, int heads, int M, int N, int K,
                    bool accumulate) {
  run_gemm(ctx, {batch, heads, M, N, K, a_strides, b_strides, c_strides, accumulate, false, OperandType::f32}, c, a,
           b);
}

void batched_matmul(Context& ctx, float* c, const float* a, const float* b, int batch, int M, int N, int K,
                    bool transpose_a, bool transpose_b, bool accumulate) {
  cuda::strided_matmul(ctx, c, dense(M, N, false), a, dense(M, K, transpose_a), b, dense(K, N, transpose_b), batch, 1,
                       M, N, K, accumulate);
}

void strided_matmul_bf16(Context& ctx, float* c, const Strides& c_strides, const bf16* a, const Strides& a_strides,
                         const bf16* b, const Strides& b_strides, int batch, int heads, int M, int N, int K,
                         bool accumulate) {
  run_gemm(ctx, {batch, heads, M, N, K, a_strides, b_strides, c_strides, accumulate, false, OperandType::bf16}, c, a,
           b);
}

void batched_matmul_bf16(Context& ctx, float* c, const bf16* a, const bf16* b, int batch, int M, int N, int K,
                         bool transpose_a, bool transpose_b, bool accumulate) {
  cuda::strided_matmul_bf16(ctx, c, dense(M, N, false), a, dense(M, K, transpose_a), b, dense(K, N, transpose_b),
                            batch, 1, M, N, K, accumulate);
}

namespace {

OperandType operand_type(DType dtype) {
  return dtype == DType::bf16 ? OperandType::bf16 : dtype == DType::fp16 ? OperandType::f16 : OperandType::f32;
}
OperandType operand_type(Precision precision) { return operand_type(storage_dtype(precision)); }

void require_same_type(const Tensor& x, const Tensor& w) {
  if (x.dtype != w.dtype)
    throw std::logic_error(std::string("linear layer on operands of two types: ") + dtype_name(x.dtype) + " and " +
                           dtype_name(w.dtype));
}

}  // namespace

// M, K from x (M, K), N from w (N, K).

void bias_gradient(Context& ctx, float* dbias, const float* dy, int M, int N) { column_sums_add(ctx, dbias, dy, M, N); }

void linear_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dbias, const Tensor& dy,
                     const Tensor& dy_low, const Tensor& x, const Tensor& w) {
  require_same_type(x, w);
  const int M = static_cast<int>(matrix_rows(x)), K = static_cast<int>(matrix_cols(x));
  const int N = static_cast<int>(matrix_rows(w));
  const OperandType type = operand_type(x.dtype);
  float* db = optional_data<float>(dbias);
  const void* dy_operand = dy.data;
  if (type != OperandType::f32) {
    if (dy.data != nullptr && dy_low.data != dy.data)
      to_low(ctx, precision_of(x.dtype), dy_low.as<low16>(), dy.as<float>(), static_cast<size_t>(M) * N);
    else if (db != nullptr)
      throw std::logic_error("linear_backward: a bias gradient needs the f32 output gradient, not one narrowed in place");
    dy_operand = dy_low.data;
  }
  if (dx.data) run_gemm(ctx, linear_input_gradient_gemm(M, K, N, type), dx.as<float>(), dy_operand, w.data);
  if (dw.data) run_gemm(ctx, linear_weight_gradient_gemm(M, K, N, type), dw.as<float>(), dy_operand, x.data);
  if (db) column_sums_add(ctx, db, dy.as<float>(), M, N);
}

// ---- 16-bit outputs from the GEMM's epilogue: the linear layer's (BIAS), the GELU layer's
// (GELU_AUX(_BIAS) forward, DGELU backward) ---------------------------------------------------
namespace {

// One shape's fused GEMM: D (M, N) in a 16-bit type, the bias, and for the GELU layer the
// epilogue's auxiliary matrix of D's shape — forward act in D and pre as the auxiliary output,
// backward dpre in D from pre as the auxiliary input —, all of D's type (cuBLASLt's rule for
// non-fp8 GEMMs). fused false: cuBLASLt has no algorithm for it here, so the GEMM into f32 and
// one pass run instead (said once on stderr: a slower layer, not an error).
struct EpiloguePlan {
  bool fused = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t b = nullptr, a = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

using EpilogueKey = std::array<int64_t, 15>;

bool succeeded(cublasStatus_t status) { return status == CUBLAS_STATUS_SUCCESS; }

template <class T>
bool set(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  return succeeded(cublasLtMatmulDescSetAttribute(op, attribute, &value, sizeof value));
}

// The plan of g with this epilogue writing `out_type`, aux (or none) at this alignment. Every
// refusal along the way (an attribute, the heuristic) leaves fused false.
EpiloguePlan create_epilogue(const Gemm& g, cublasLtEpilogue_t epilogue, cudaDataType_t out_type, uint32_t align_a,
                             uint32_t align_b, uint32_t align_out, void* aux) {
  EpiloguePlan plan;
  Operand first{}, second{};
  if (!describes(g.K, g.N, g.b, first) || !describes(g.M, g.K, g.a, second)) return plan;
  const cudaDataType_t operands = cuda_type(g.operands);
  const int64_t aux_ld = g.N;  // aux is D's shape: (N, M) column-major, N apart
  if (!succeeded(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
      !set(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, first.op) || !set(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, second.op) ||
      !set(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue))
    return plan;
  if (aux != nullptr && (!set(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux) ||
                         !set(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld)))
    return plan;
  if (!succeeded(cublasLtMatrixLayoutCreate(&plan.b, operands, first.layout_rows, first.layout_cols, first.ld)) ||
      !succeeded(cublasLtMatrixLayoutCreate(&plan.a, operands, second.layout_rows, second.layout_cols, second.ld)) ||
      !succeeded(cublasLtMatrixLayoutCreate(&plan.out, out_type, g.N, g.M, g.N)))
    return plan;
  best_algorithm(plan.op, plan.b, plan.a, plan.out, align_b, align_a, align_out, plan.algo, plan.fused);
  return plan;
}

void say_unfused(const Gemm& g, const char* epilogue, const char* why) {
  std::fprintf(stderr,
               "kernels::cuda: the %s runs as the GEMM into f32 and one pass, without the %s epilogue (%s); its f32 "
               "sums take a stream-ordered scratch for each call, which the memory model does not count\n",
               describe(g).c_str(), epilogue, why);
}

// The epilogue's bias in D's 16-bit type: rounded on the stream into a buffer of the stream's (per
// width; stream order keeps one call's values until its GEMM has read them) — exact for a 16-bit
// model, whose f32 biases are its 16-bit parameters widened. Call with g_mutex held.
const void* epilogue_bias(Context& ctx, cudaDataType_t out_type, const float* bias, int N) {
  if (bias == nullptr) return nullptr;
  static std::map<std::pair<cudaStream_t, int>, Buffer<low16>> rounded;
  const auto key = std::make_pair(stream_of(ctx), N);
  auto found = rounded.find(key);
  if (found == rounded.end())
    found = rounded.emplace(key, Buffer<low16>(N, MemoryCategory::Workspace, cuda::backend(), MemoryKind::device)).first;
  if (found->second.data() == nullptr) throw std::runtime_error("cuBLASLt: no device memory for an epilogue's bias");
  to_low(ctx, out_type == CUDA_R_16F ? Precision::fp16 : Precision::bf16, found->second.data(), bias, N);
  return found->second.data();
}

// One fused GEMM: out (M, N) = the epilogue of a · b (run_gemm's operands) with the bias
// (forward only) and, for the GELU layer, aux (M, N). False where it cannot run (nothing written
// then).
struct EpilogueGemm {
  const Gemm& g;
  cublasLtEpilogue_t epilogue;
  const char* name;  // the epilogue's, for the message
  cudaDataType_t out_type;
  void* out;
  void* aux;
  const void* a;
  const void* b;
  const float* bias;
};

bool run_epilogue(Context& ctx, const EpilogueGemm& f) {
  const Gemm& g = f.g;
  if (f.aux != nullptr && g.N % 8 != 0) return false;  // cuBLASLt's rule for the auxiliary matrix: ld a multiple of 8
  const int64_t e = static_cast<int64_t>(operand_bytes(g.operands));
  const uint32_t align_a = alignment(reinterpret_cast<uintptr_t>(f.a), 0, 0);
  const uint32_t align_b = alignment(reinterpret_cast<uintptr_t>(f.b), 0, 0);
  const uint32_t align_out = alignment(reinterpret_cast<uintptr_t>(f.out), 0, 0);
  const uint32_t align_aux = alignment(reinterpret_cast<uintptr_t>(f.aux), 0, 0);
  // The operands' strides too: an epilogue is not tied to one GEMM builder's layouts.
  const EpilogueKey key{g.M, g.N, g.K, g.bias, e, static_cast<int64_t>(f.out_type), static_cast<int64_t>(f.epilogue),
                        align_a, align_b, int64_t(align_out) << 16 | align_aux, g.a.row, g.a.col, g.b.row, g.b.col,
                        g.c.row};
  std::lock_guard<std::mutex> lock(g_mutex);
  static std::unordered_map<EpilogueKey, EpiloguePlan, KeyHash> cache;
  auto found = cache.find(key);
  if (found == cache.end()) {
    found = cache.emplace(key, create_epilogue(g, f.epilogue, f.out_type, align_a, align_b, align_out, f.aux)).first;
    if (!found->second.fused) say_unfused(g, f.name, "cuBLASLt offers no algorithm with it");
  }
  EpiloguePlan& plan = found->second;
  if (!plan.fused) return false;
  const void* typed_bias = epilogue_bias(ctx, f.out_type, f.bias, g.N);
  if ((typed_bias != nullptr && !set(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, typed_bias)) ||
      (f.aux != nullptr && !set(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, f.aux)))
    return false;
  cudaStream_t stream = stream_of(ctx);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status = cublasLtMatmul(handle(), plan.op, &alpha, f.b, plan.b, f.a, plan.a, &beta, f.out,
                                               plan.out, f.out, plan.out, &plan.algo, workspace_of(stream),
                                               kWorkspaceBytes, stream);
  if (succeeded(status)) return true;
  plan.fused = false;  // refused at the call (before any work): this shape runs unfused from now on
  say_unfused(g, f.name, ("cublasLtMatmul returned status " + std::to_string(status)).c_str());
  return false;
}

// The GELU layer's: 16-bit outputs only — cuBLASLt does not say how its epilogue computes GELU (a
// tanh formula, or an approximate tanh instruction), which a 16-bit rounding hides and an f32
// model's agreement with the CPU's arithmetic to f32 rounding would not.
bool run_gelu_epilogue(Context& ctx, const EpilogueGemm& f) {
  if (!ctx.gelu_epilogues || f.out_type == CUDA_R_32F) return false;  // cuda.gelu_epilogues = off; f32
  return run_epilogue(ctx, f);
}

// A 16-bit output where no epilogue writes it (cuBLASLt offers none for the shape, said once by
// say_unfused; or cuda.gelu_epilogues = off): its f32 sums in a stream-ordered scratch of M·N
// floats for the call (release_scratch after its last use), outside the memory model.
Tensor sums_scratch(Context& ctx, int64_t M, int64_t N) {
  float* data = stream_scratch(ctx, static_cast<size_t>(M * N), "cudaMallocAsync (a GEMM's f32 sums)");
  return Tensor{data, DType::f32, Shape{M, N}, ctx.stream.device};
}

}  // namespace

// A 16-bit y: cuBLASLt writes it from the f32 sums (the bias added in its epilogue, BIAS), else
// the GEMM into a scratch and one rounding pass.
void linear_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias) {
  require_same_type(x, w);
  const int M = static_cast<int>(matrix_rows(x)), K = static_cast<int>(matrix_cols(x));
  const int N = static_cast<int>(matrix_rows(w));
  const float* b = optional_data<float>(bias);
  const Gemm g = linear_forward_gemm(M, K, N, b != nullptr, operand_type(x.dtype));
  if (y.dtype == DType::f32) return run_gemm(ctx, g, y.as<float>(), x.data, w.data, b);
  if (M == 0 || N == 0) return;
  const cudaDataType_t out_type = cuda_type(operand_type(y.dtype));
  const cublasLtEpilogue_t epilogue = b ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (K > 0 && run_epilogue(ctx, {g, epilogue, "16-bit output (BIAS)", out_type, y.data, nullptr, x.data, w.data, b}))
    return;
  float* sums = sums_scratch(ctx, M, N).as<float>();
  run_gemm(ctx, g, sums, x.data, w.data, b);
  to_low(ctx, precision_of(y.dtype), y.as<low16>(), sums, static_cast<size_t>(M) * N);
  release_scratch(ctx, sums);
}

void linear_gelu_forward(Context& ctx, const Tensor& pre, const Tensor& act, const Tensor& x, const Tensor& w,
                         const Tensor& bias) {
  require_same_type(x, w);
  const int M = static_cast<int>(matrix_rows(x)), K = static_cast<int>(matrix_cols(x));
  const int N = static_cast<int>(matrix_rows(w));
  if (M == 0 || N == 0) return;
  const float* b = optional_data<float>(bias);
  const Gemm g = linear_forward_gemm(M, K, N, b != nullptr, operand_type(x.dtype));
  const cudaDataType_t out_type = cuda_type(operand_type(pre.dtype));
  const cublasLtEpilogue_t epilogue = b ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  if (K > 0 && run_gelu_epilogue(ctx, {g, epilogue, "GELU_AUX", out_type, act.data, pre.data, x.data, w.data, b}))
    return;
  const size_t n = static_cast<size_t>(M) * N;
  if (pre.dtype == DType::f32) {
    run_gemm(ctx, g, pre.as<float>(), x.data, w.data, b);
    return cuda::gelu_forward(ctx, act, pre);
  }
  float* sums = sums_scratch(ctx, M, N).as<float>();
  run_gemm(ctx, g, sums, x.data, w.data, b);
  keep_with_gelu(ctx, precision_of(pre.dtype), pre.as<low16>(), act.as<low16>(), sums, n);
  release_scratch(ctx, sums);
}

// M, K from pre (M, K), N from w (N, K): the output layer's input-gradient GEMM (dy · w), which
// the DGELU epilogue ends with GELU'(pre) in D's type, pre's.
void linear_gelu_backward(Context& ctx, const Tensor& dpre, const Tensor& dbias, const Tensor& dy, const Tensor& pre,
                          const Tensor& w) {
  const int M = static_cast<int>(matrix_rows(pre)), K = static_cast<int>(matrix_cols(pre));
  const int N = static_cast<int>(matrix_rows(w));
  if (M == 0 || K == 0) return;
  float* db = optional_data<float>(dbias);
  const bool low = pre.dtype != DType::f32;
  const Gemm g = linear_input_gradient_gemm(M, K, N, operand_type(pre.dtype));
  const cudaDataType_t out_type = cuda_type(operand_type(pre.dtype));
  if (N > 0 &&
      run_gelu_epilogue(ctx, {g, CUBLASLT_EPILOGUE_DGELU, "DGELU", out_type, dpre.data, pre.data, dy.data, w.data, nullptr})) {
    if (db == nullptr) return;
    if (low) return column_sums_add_low16(ctx, precision_of(pre.dtype), db, dpre.as<low16>(), M, K);
    return column_sums_add(ctx, db, dpre.as<float>(), M, K);
  }
  const Tensor sums = low ? sums_scratch(ctx, M, K) : dpre;  // the f32 sums: dpre itself in f32
  run_gemm(ctx, g, sums.as<float>(), dy.data, w.data);
  cuda::gelu_backward(ctx, sums, pre, sums);  // in place
  if (db) column_sums_add(ctx, db, sums.as<float>(), M, K);
  if (!low) return;
  to_low(ctx, precision_of(pre.dtype), dpre.as<low16>(), sums.as<float>(), static_cast<size_t>(M) * K);
  release_scratch(ctx, sums.as<float>());
}

void prepare_linear(Context& ctx, Precision precision, int M, int K, int N, bool bias) {
  const OperandType type = operand_type(precision);
  prepare_gemm(linear_forward_gemm(M, K, N, bias, type));
  prepare_gemm(linear_input_gradient_gemm(M, K, N, type));
  prepare_gemm(linear_weight_gradient_gemm(M, K, N, type));
}

}  // namespace trident::kernels::cuda
