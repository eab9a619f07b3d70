// NCCL, opened on first use (src/comm/nccl/nccl_library.cpp; core/shared_library.hpp says why).
// In builds with NCCL only.
#pragma once

#include "core/shared_library.hpp"

namespace trident::comm {

SharedLibrary& nccl_library();  // libnccl.so.<NCCL major>

}  // namespace trident::comm
