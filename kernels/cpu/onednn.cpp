// The process-wide oneDNN engine and stream.
#include "kernels/cpu/onednn.hpp"

namespace trident::kernels {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  static dnnl::stream stream(cpu_engine());
  return stream;
}

}  // namespace trident::kernels
