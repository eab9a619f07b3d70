// What one training step produced and how long its parts took, on this rank.
#pragma once

#include "pipeline/runner.hpp"

namespace trident {

struct StepResult {
  float loss = 0, lr = 0, grad_norm = 0;
  double seconds = 0;
  double comm_seconds = 0, exposed_comm_seconds = 0;  // data-parallel reduction
  double tensor_exposed_seconds = 0;  // the host's waits for the tensor group's communication (CPU)
  double optimizer_seconds = 0;                       // gradient norm, AdamW, ZeRO all-gather
  pipeline::StepTimes pipeline;                       // this stage's compute and waiting
  bool skipped = false;  // NaN/Inf in the loss or the gradients: no update made
  double loss_scale = 1;  // fp16: the loss scale the step ran with
  // Device results the host read in the step (Backend::host_reads), the most of any rank; −1
  // where the backend does not count them (all but the guard).
  int64_t host_reads = -1;
};

}  // namespace trident
