// The test hooks of the fault paths (debug.* keys): a fault on one rank at a step, a rank that
// never answers, a NaN in a gradient. A run gets a FaultHooks object only when a debug key asks
// for one, so the training loop holds a null pointer and no test code of its own.
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.hpp"
#include "job/settings.hpp"
#include "tensor/device.hpp"

namespace trident {

class FaultHooks {
 public:
  // Null when no debug key is set (every production run).
  // world: the job's control communicator (the faults' ranks are world ranks); outlives the hooks.
  static std::unique_ptr<FaultHooks> install(comm::Communicator& world, const DebugSettings& settings);
  FaultHooks(comm::Communicator& world, DebugSettings settings) : world_(world), settings_(std::move(settings)) {}

  // Before step `step` (1-based) runs: debug.fail_rank's fault at debug.fail_step, and
  // debug.hang_rank's endless sleep at the first step (the watchdog tests).
  void before_step(int64_t step) const;
  // After the backward pass of step `step`, before the gradients are reduced: rank 0 puts a
  // NaN into its first gradient at the steps of debug.nan_steps (the NaN-skipping tests).
  void after_backward(int64_t step, float* grads, const kernels::Context& device) const;  // grads on device's stream

 private:
  comm::Communicator& world_;
  DebugSettings settings_;
};

// debug.fail_rank's fault when `step` is debug.fail_step (0: during set-up): the other ranks go
// on into the next collective and must be ended by the faulty rank's MPI_Abort (or, for
// SIGKILL, by the launcher and the watchdog), not left waiting.
void inject_fault(comm::Communicator& world, const DebugSettings& settings, int64_t step);

}  // namespace trident
