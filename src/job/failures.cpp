// Exceptions as one-rank faults (see failures.hpp).
#include "job/failures.hpp"

#include <dnnl.hpp>

#include <new>
#include <stdexcept>
#include <system_error>

#include "core/error.hpp"
#include "kernels/kernels.hpp"
#include "tensor/buffer.hpp"

namespace trident {
namespace {

std::string cpu_description() {
  const dnnl_version_t* v = dnnl_version();
  return " [CPU ISA " + kernels::cpu_isa() + ", oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
         "." + std::to_string(v->patch) + "]";
}

constexpr const char* kMemoryHint =
    "; reduce train.micro_batch, recompute activations (memory.recompute, or auto with memory.budget_gb), or "
    "spread the model over more ranks (parallel.tensor, parallel.pipeline)";

}  // namespace

std::string describe_exception(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const dnnl::error& e) {  // a oneDNN call our kernels did not wrap with its operation
    return std::string("oneDNN error: ") + e.what() + " (dnnl status " + std::to_string(static_cast<int>(e.status)) +
           ")" + cpu_description() + "; run with ONEDNN_VERBOSE=1 to see the primitive";
  } catch (const OutOfMemory& e) {
    return std::string(e.what()) + cpu_description() + kMemoryHint;
  } catch (const std::bad_alloc& e) {
    return std::string("out of memory outside the tracked buffers (") + e.what() + ")" + cpu_description() + kMemoryHint;
  } catch (const std::system_error& e) {
    return std::string("system error: ") + e.what() + " (" + e.code().category().name() + " " +
           std::to_string(e.code().value()) + ")" + cpu_description();
  } catch (const std::exception& e) {  // our own runtime errors name the operation already
    return std::string(e.what()) + cpu_description();
  } catch (...) {
    return "an exception of unknown type" + cpu_description();
  }
}

void install_terminate_handler() {
  std::set_terminate([] {
    const std::exception_ptr error = std::current_exception();
    fatal_one(error ? "in a thread: " + describe_exception(error) : std::string("std::terminate without an exception"));
  });
}

}  // namespace trident
