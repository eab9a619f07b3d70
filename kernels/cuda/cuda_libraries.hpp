// The CUDA libraries the CUDA backend calls, opened on first use (kernels/cuda/cuda_libraries.cpp;
// core/shared_library.hpp says why): what says whether each can be loaded, and from where.
#pragma once

#include <string>

#include "core/shared_library.hpp"

namespace trident::kernels::cuda {

SharedLibrary& cublaslt_library();  // libcublasLt.so.<CUDA major>: every GEMM
// "cuBLASLt 130100 (/usr/local/cuda/lib64/libcublasLt.so.13)", or "cuBLASLt not loadable (why)":
// `trident version` opens it to say so.
std::string cublaslt_summary();
#if TRIDENT_CUDNN
SharedLibrary& cudnn_library();  // libcudnn.so.<cuDNN major>: the fused attention
SharedLibrary& nvrtc_library();  // libnvrtc.so.<CUDA major>: cuDNN's frontend compiles kernels with it
#endif

}  // namespace trident::kernels::cuda
