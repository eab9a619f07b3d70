// The oneDNN engine and stream every CPU primitive runs on (one of each per process; oneDNN
// runs on the program's OpenMP thread pool).
#pragma once

#include <dnnl.hpp>

namespace trident::kernels {

dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

}  // namespace trident::kernels
