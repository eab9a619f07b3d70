// The CUDA emulator's cuBLASLt (tests/cuda_emu/README.md), built as libcublasLt.so.13: the GEMMs
// the CUDA backend asks of cuBLASLt, computed on the host as cuBLASLt defines them — column-major
// D = alpha·op(A)·op(B) + beta·C, strided batches, f32 / bf16 / fp16 matrices summed in f32, and
// the epilogues BIAS, GELU_AUX(_BIAS) and DGELU (the bias and the auxiliary matrix in D's type
// where D is 16-bit, GELU in its tanh form). Each call is enqueued on its stream with
// cudaLaunchHostFunc, so that a captured graph replays it.
//
// What it checks that NVIDIA's would refuse: layouts whose shapes do not agree with the ops, an
// attribute of the wrong size, an auxiliary matrix without its pointer or leading dimension, and
// operands less aligned than the preference the algorithm was chosen for.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

struct cublasLtContext {
  int unused = 0;
};
struct cublasLtMatmulDescOpaque_t {
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
};
struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int batch = 1;
  int64_t stride = 0;
};
struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
};

namespace {

// A matrix element of `type` as f32, and an f32 value stored as `type` (rounded to nearest even,
// as the GPU's conversions: the emulator's cuda_bf16.h and cuda_fp16.h).
float read(const void* base, cudaDataType_t type, size_t index) {
  if (type == CUDA_R_32F) return static_cast<const float*>(base)[index];
  if (type == CUDA_R_16BF) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]);
  return __half2float(static_cast<const __half*>(base)[index]);
}

void write(void* base, cudaDataType_t type, size_t index, float value) {
  if (type == CUDA_R_32F) static_cast<float*>(base)[index] = value;
  else if (type == CUDA_R_16BF) static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16_rn(value);
  else static_cast<__half*>(base)[index] = __float2half_rn(value);
}

size_t bytes_of(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

bool known_type(cudaDataType_t type) { return type == CUDA_R_32F || type == CUDA_R_16F || type == CUDA_R_16BF; }

template <class T>
cublasStatus_t take(T& into, const void* buf, size_t bytes) {
  if (buf == nullptr || bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&into, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/π)

float gelu(float x) { return 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + 0.044715f * x * x * x))); }
float gelu_derivative(float x) {
  const float t = std::tanh(kGeluScale * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

bool has_bias(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS; }
bool has_gelu(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool has_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU;
}

// The shapes: op(A) (m, k), op(B) (k, n), C and D (m, n), batches agreeing.
cublasStatus_t check_shapes(const cublasLtMatmulDescOpaque_t& d, const cublasLtMatrixLayoutOpaque_t& a,
                            const cublasLtMatrixLayoutOpaque_t& b, const cublasLtMatrixLayoutOpaque_t& c,
                            const cublasLtMatrixLayoutOpaque_t& out) {
  const uint64_t m = d.transa == CUBLAS_OP_N ? a.rows : a.cols, k = d.transa == CUBLAS_OP_N ? a.cols : a.rows;
  const uint64_t kb = d.transb == CUBLAS_OP_N ? b.rows : b.cols, n = d.transb == CUBLAS_OP_N ? b.cols : b.rows;
  if (k != kb || c.rows != m || c.cols != n || out.rows != m || out.cols != n) return CUBLAS_STATUS_INVALID_VALUE;
  for (const auto* l : {&a, &b, &c, &out})
    if (l->ld < static_cast<int64_t>(l->rows) || l->batch < 1) return CUBLAS_STATUS_INVALID_VALUE;
  if (a.batch != out.batch || b.batch != out.batch || c.batch != out.batch) return CUBLAS_STATUS_INVALID_VALUE;
  if (a.type != b.type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (has_aux(d.epilogue) && (d.aux == nullptr || d.aux_ld < static_cast<int64_t>(m) || out.batch != 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

bool aligned(const void* p, uint32_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

// One call's work, run on its stream.
struct Call {
  cublasLtMatmulDescOpaque_t desc;
  cublasLtMatrixLayoutOpaque_t a, b, c, d;
  float alpha, beta;
  const void *A, *B, *C;
  void* D;
};

// One batch's op(X) widened to f32, `inner` values contiguous for each of `outer`: element
// [o · inner + q] is X[o·ld + q] where `along` (X's columns are the outer index), X[q·ld + o]
// otherwise.
std::vector<float> widened(const void* base, cudaDataType_t type, size_t offset, int64_t ld, bool along,
                           uint64_t outer, uint64_t inner) {
  std::vector<float> out(outer * inner);
  for (uint64_t o = 0; o < outer; ++o)
    for (uint64_t q = 0; q < inner; ++q)
      out[o * inner + q] = read(base, type, offset + (along ? o * ld + q : q * ld + o));
  return out;
}

// D's element (i, j) from its sum over k: alpha, beta·C, the epilogue, D's type.
void finish(const Call& call, size_t oc, size_t od, uint64_t i, uint64_t j, float sum) {
  const auto& desc = call.desc;
  const cudaDataType_t vector_type = call.d.type;  // the bias's and aux's: D's
  float value = call.alpha * sum;
  if (call.beta != 0.0f) value += call.beta * read(call.C, call.c.type, oc + j * call.c.ld + i);
  if (has_bias(desc.epilogue)) value += read(desc.bias, vector_type, i);
  const size_t aux_at = j * desc.aux_ld + i;
  if (has_gelu(desc.epilogue)) {
    if (has_aux(desc.epilogue)) write(desc.aux, vector_type, aux_at, value);
    value = gelu(value);
  } else if (desc.epilogue == CUBLASLT_EPILOGUE_DGELU) {
    value *= gelu_derivative(read(desc.aux, vector_type, aux_at));
  }
  write(call.D, call.d.type, od + j * call.d.ld + i, value);
}

// Each element summed in k order from 0. Eight rows of D at once: eight independent sums, so the
// additions overlap (the emulator's GEMMs were a sixth of a training run's time) — each sum's
// order, and so its value, as one at a time.
void run(void* data) {
  const Call& call = *static_cast<const Call*>(data);
  const bool ta = call.desc.transa == CUBLAS_OP_T, tb = call.desc.transb == CUBLAS_OP_T;
  const uint64_t m = call.d.rows, n = call.d.cols, k = ta ? call.a.rows : call.a.cols;
  constexpr uint64_t kRows = 8;
  for (int batch = 0; batch < call.d.batch; ++batch) {
    const size_t oa = static_cast<size_t>(batch * call.a.stride), ob = static_cast<size_t>(batch * call.b.stride);
    const size_t oc = static_cast<size_t>(batch * call.c.stride), od = static_cast<size_t>(batch * call.d.stride);
    const std::vector<float> a = widened(call.A, call.a.type, oa, call.a.ld, !ta, k, m);  // [p·m + i] = op(A)(i, p)
    const std::vector<float> b = widened(call.B, call.b.type, ob, call.b.ld, !tb, n, k);  // [j·k + p] = op(B)(p, j)
    for (uint64_t j = 0; j < n; ++j) {
      const float* column = &b[j * k];
      for (uint64_t i0 = 0; i0 < m; i0 += kRows) {
        const uint64_t rows = std::min(kRows, m - i0);
        float sums[kRows] = {};
        if (rows == kRows) {
          for (uint64_t p = 0; p < k; ++p)
            for (uint64_t r = 0; r < kRows; ++r) sums[r] += a[p * m + i0 + r] * column[p];
        } else {
          for (uint64_t r = 0; r < rows; ++r)
            for (uint64_t p = 0; p < k; ++p) sums[r] += a[p * m + i0 + r] * column[p];
        }
        for (uint64_t r = 0; r < rows; ++r) finish(call, oc, od, i0 + r, j, sums[r]);
      }
    }
  }
}

}  // namespace

extern "C" {

size_t cublasLtGetVersion(void) { return 130000; }

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext{};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = new cublasLtMatmulDescOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return take(desc->transa, buf, bytes);
    case CUBLASLT_MATMUL_DESC_TRANSB: return take(desc->transb, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return take(desc->epilogue, buf, bytes);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return take(desc->bias, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return take(desc->aux, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return take(desc->aux_ld, buf, bytes);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!known_type(type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld, 1, 0};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
  if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) return take(layout->batch, buf, bytes);
  if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) return take(layout->stride, buf, bytes);
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return take(pref->workspace, buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return take(pref->align[0], buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return take(pref->align[1], buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return take(pref->align[2], buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return take(pref->align[3], buf, bytes);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// One algorithm, which assumes the alignments the preference promised (kept in the algorithm, and
// held against the operands of each call).
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  *returned = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  if (const cublasStatus_t s = check_shapes(*desc, *a, *b, *c, *d); s != CUBLAS_STATUS_SUCCESS) return s;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  for (int i = 0; i < 4; ++i) results[0].algo.data[i] = pref->align[i];
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void*, size_t, cudaStream_t stream) {
  if (handle == nullptr || algo == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (const cublasStatus_t s = check_shapes(*desc, *a, *b, *c, *d); s != CUBLAS_STATUS_SUCCESS) return s;
  const void* pointers[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i)
    if (!aligned(pointers[i], static_cast<uint32_t>(algo->data[i]))) return CUBLAS_STATUS_INVALID_VALUE;
  if (has_bias(desc->epilogue) && (desc->bias == nullptr || !aligned(desc->bias, static_cast<uint32_t>(bytes_of(d->type)))))
    return CUBLAS_STATUS_INVALID_VALUE;
  // Kept for the stream's (or the graph's) runs: a graph replays it, so it lives with the process.
  auto* call = new Call{*desc, *a, *b, *c, *d, *static_cast<const float*>(alpha), *static_cast<const float*>(beta), A, B, C, D};
  return cudaLaunchHostFunc(stream, run, call) == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

}  // extern "C"
