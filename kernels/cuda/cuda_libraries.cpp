// The CUDA libraries of the CUDA backend, opened on first use (core/shared_library.hpp says
// why): cuBLASLt (every GEMM), and where the build has cuDNN's frontend, cuDNN (the fused
// attention) and NVRTC (which the frontend's own engines compile kernels with). Each function
// the program calls is defined here as a call through the library's own; their sonames are the
// major versions of the headers this binary was compiled against.
#include <cublasLt.h>

#include <string>

#include "core/shared_library.hpp"
#include "kernels/cuda/cuda_libraries.hpp"

#if TRIDENT_CUDNN
#include <cudnn.h>
#include <nvrtc.h>
#endif

namespace trident::kernels::cuda {

SharedLibrary& cublaslt_library() {
  static SharedLibrary library("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR), "kernels.device = cuda");
  return library;
}

std::string cublaslt_summary() {
  SharedLibrary& library = cublaslt_library();
  if (!library.problem().empty()) return "cuBLASLt not loadable (" + library.problem() + ")";
  return "cuBLASLt " + std::to_string(cublasLtGetVersion()) + " (" + library.path() + ")";
}

#if TRIDENT_CUDNN
SharedLibrary& cudnn_library() {
  static SharedLibrary library("libcudnn.so." + std::to_string(CUDNN_MAJOR), "cuDNN's fused attention");
  return library;
}

// NVRTC's soname carries the toolkit's major version (libnvrtc.so.13 for CUDA 13).
SharedLibrary& nvrtc_library() {
  static SharedLibrary library("libnvrtc.so." + std::to_string(CUDART_VERSION / 1000), "cuDNN's fused attention");
  return library;
}
#endif

}  // namespace trident::kernels::cuda

using trident::kernels::cuda::cublaslt_library;

TRIDENT_FORWARD(cublaslt_library(), size_t, cublasLtGetVersion, (void), ())
TRIDENT_FORWARD(cublaslt_library(), cublasStatus_t, cublasLtCreate, (cublasLtHandle_t* handle), (handle))
TRIDENT_FORWARD(cublaslt_library(), cublasStatus_t, cublasLtMatmulDescCreate,
                (cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale), (desc, compute, scale))
TRIDENT_FORWARD(cublaslt_library(), cublasStatus_t, cublasLtMatmulDescSetAttribute,
                (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t bytes),
                (desc, attr, buf, bytes))
TRIDENT_FORWARD(cublaslt_library(), cublasStatus_t, cublasLtMatrixLayoutCreate,
                (cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
                (layout, type, rows, cols, ld))
TRIDENT_FORWARD(cublaslt_library(), cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
                (cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const void* buf, size_t bytes),
                (layout, attr, buf, bytes))
TRIDENT_FORWARD(cublaslt_library(), cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t* pref),
                (pref))
TRIDENT_FORWARD(cublaslt_library(), cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref),
                (pref))
TRIDENT_FORWARD(cublaslt_library(), cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                 size_t bytes),
                (pref, attr, buf, bytes))
TRIDENT_FORWARD(cublaslt_library(), cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                 cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,
                 cublasLtMatmulHeuristicResult_t results[], int* returned),
                (handle, desc, a, b, c, d, pref, requested, results, returned))
TRIDENT_FORWARD(cublaslt_library(), cublasStatus_t, cublasLtMatmul,
                (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                 cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta, const void* C,
                 cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t* algo,
                 void* workspace, size_t workspace_bytes, cudaStream_t stream),
                (handle, desc, alpha, A, a, B, b, beta, C, c, D, d, algo, workspace, workspace_bytes, stream))

#if TRIDENT_CUDNN
using trident::kernels::cuda::cudnn_library;
using trident::kernels::cuda::nvrtc_library;

TRIDENT_FORWARD(cudnn_library(), size_t, cudnnGetVersion, (void), ())
TRIDENT_FORWARD(cudnn_library(), const char*, cudnnGetErrorString, (cudnnStatus_t status), (status))
TRIDENT_FORWARD(cudnn_library(), void, cudnnGetLastErrorString, (char* message, size_t max_size), (message, max_size))
TRIDENT_FORWARD(cudnn_library(), cudnnStatus_t, cudnnCreate, (cudnnHandle_t* handle), (handle))
TRIDENT_FORWARD(cudnn_library(), cudnnStatus_t, cudnnSetStream, (cudnnHandle_t handle, cudaStream_t stream),
                (handle, stream))
TRIDENT_FORWARD(cudnn_library(), cudnnStatus_t, cudnnGetStream, (cudnnHandle_t handle, cudaStream_t* stream),
                (handle, stream))
TRIDENT_FORWARD(cudnn_library(), cudnnStatus_t, cudnnBackendCreateDescriptor,
                (cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* descriptor), (type, descriptor))
TRIDENT_FORWARD(cudnn_library(), cudnnStatus_t, cudnnBackendDestroyDescriptor, (cudnnBackendDescriptor_t descriptor),
                (descriptor))
TRIDENT_FORWARD(cudnn_library(), cudnnStatus_t, cudnnBackendFinalize, (cudnnBackendDescriptor_t descriptor),
                (descriptor))
TRIDENT_FORWARD(cudnn_library(), cudnnStatus_t, cudnnBackendSetAttribute,
                (cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
                 cudnnBackendAttributeType_t type, int64_t count, const void* elements),
                (descriptor, name, type, count, elements))
TRIDENT_FORWARD(cudnn_library(), cudnnStatus_t, cudnnBackendGetAttribute,
                (cudnnBackendDescriptor_t const descriptor, cudnnBackendAttributeName_t name,
                 cudnnBackendAttributeType_t type, int64_t requested, int64_t* count, void* elements),
                (descriptor, name, type, requested, count, elements))
TRIDENT_FORWARD(cudnn_library(), cudnnStatus_t, cudnnBackendExecute,
                (cudnnHandle_t handle, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack),
                (handle, plan, pack))

TRIDENT_FORWARD(nvrtc_library(), nvrtcResult, nvrtcCreateProgram,
                (nvrtcProgram* program, const char* source, const char* name, int headers,
                 const char* const* header_sources, const char* const* include_names),
                (program, source, name, headers, header_sources, include_names))
TRIDENT_FORWARD(nvrtc_library(), nvrtcResult, nvrtcCompileProgram,
                (nvrtcProgram program, int options_count, const char* const* options),
                (program, options_count, options))
TRIDENT_FORWARD(nvrtc_library(), nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram* program), (program))
TRIDENT_FORWARD(nvrtc_library(), nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram program, size_t* bytes),
                (program, bytes))
TRIDENT_FORWARD(nvrtc_library(), nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram program, char* cubin), (program, cubin))
TRIDENT_FORWARD(nvrtc_library(), nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram program, size_t* bytes),
                (program, bytes))
TRIDENT_FORWARD(nvrtc_library(), nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram program, char* log), (program, log))
#endif
