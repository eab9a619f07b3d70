// The fault-path test hooks of debug.*.
#include "job/fault_hooks.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <thread>

#include "core/error.hpp"
#include "comm/world.hpp"
#include "kernels/backend.hpp"

namespace trident {

void inject_fault(comm::Communicator& world, const DebugSettings& settings, int64_t step) {
  if (world.rank() != settings.fail_rank || settings.fail_step != step) return;
  if (settings.fail_mode == "sigkill") std::raise(SIGKILL);
  if (settings.fail_mode == "mpi_error") comm::send_to_missing_rank(world);
  fatal_one("fault injected by " + settings.fail_cite);
}

std::unique_ptr<FaultHooks> FaultHooks::install(comm::Communicator& world, const DebugSettings& settings) {
  return settings.active() ? std::make_unique<FaultHooks>(world, settings) : nullptr;
}

void FaultHooks::before_step(int64_t step) const {
  inject_fault(world_, settings_, step);
  if (step == 1 && world_.rank() == settings_.hang_rank)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // never answer
}

void FaultHooks::after_backward(int64_t step, float* grads, const kernels::Context& device) const {
  if (world_.rank() != 0) return;
  const float nan = std::nanf("");
  kernels::Context ctx = device;
  for (int64_t poisoned : settings_.nan_steps)  // wte's gradient, before its reduction, wherever it lives
    if (poisoned == step) kernels::upload(ctx, view(grads, 1, device.stream.device), &nan);
}

}  // namespace trident
