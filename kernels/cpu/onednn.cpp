// The process-wide oneDNN engine and stream, and oneDNN's failures as our errors.
#include "kernels/cpu/onednn.hpp"

#include "kernels/kernels.hpp"

namespace trident::kernels::cpu {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  static dnnl::stream stream(cpu_engine());
  return stream;
}

std::runtime_error onednn_failure(const std::string& operation, const dnnl::error& error, const std::string& hint) {
  return std::runtime_error("oneDNN could not " + operation + " on this CPU (ISA " + cpu_isa() + "): " + error.what() +
                            " (dnnl status " + std::to_string(static_cast<int>(error.status)) + ")" + hint);
}

}  // namespace trident::kernels::cpu
