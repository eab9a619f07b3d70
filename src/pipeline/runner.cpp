// One stage's execution of a pipeline schedule.
#include "pipeline/runner.hpp"

#include <chrono>

#include "comm/traffic.hpp"
#include "core/error.hpp"

namespace trident::pipeline {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int activation_tag(int micro_batch) { return 2 * micro_batch; }
int gradient_tag(int micro_batch) { return 2 * micro_batch + 1; }

}  // namespace

PipelineRunner::PipelineRunner(model::Gpt2& gpt, MPI_Comm pipeline, Schedule schedule,
                               int micro_batches, int B, int T)
    : gpt_(gpt), pipeline_(pipeline), schedule_(schedule), micro_batches_(micro_batches), B_(B), T_(T) {
  MPI_CHECK(MPI_Comm_rank(pipeline, &stage_));
  MPI_CHECK(MPI_Comm_size(pipeline, &stages_));
  slots_ = slots_needed(schedule, stage_, stages_, micro_batches);
  gpt_.set_slots(slots_);
  gpt_.prepare(B, T);
  activation_elements_ = static_cast<size_t>(B) * T * gpt.config().channels;
  inputs_.resize(static_cast<size_t>(B) * T);
  targets_.resize(inputs_.size());
  activation_sends_.assign(slots_, MPI_REQUEST_NULL);
}

void PipelineRunner::wait(MPI_Request& request) {
  if (request != MPI_REQUEST_NULL) MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
}

float PipelineRunner::run_forward(int i, int slot, const BatchFn& batch, bool with_targets,
                                  StepTimes* times) {
  wait(activation_sends_[slot]);  // the slot's previous output must have left
  const double start = now();
  if (!first())
    MPI_CHECK(MPI_Recv(gpt_.stage_input(slot), static_cast<int>(activation_elements_), MPI_FLOAT,
                       stage_ - 1, activation_tag(i), pipeline_, MPI_STATUS_IGNORE));
  const double received = now();
  if (first() || last()) batch(i, inputs_.data(), targets_.data());
  const float loss = gpt_.forward(slot, inputs_.data(), with_targets ? targets_.data() : nullptr, B_, T_);
  if (!last()) {
    MPI_CHECK(MPI_Isend(gpt_.output(slot), static_cast<int>(activation_elements_), MPI_FLOAT,
                        stage_ + 1, activation_tag(i), pipeline_, &activation_sends_[slot]));
    comm::count_sent(comm::Traffic::Pipeline, activation_elements_ * sizeof(float));
  }
  if (times) times->wait_seconds += received - start, times->forward_seconds += now() - received;
  return loss;
}

void PipelineRunner::run_backward(int i, int slot, float loss_scale,
                                  const std::function<void(int)>& on_final, StepTimes* times) {
  wait(gradient_send_);  // the input gradient buffer is about to be overwritten
  const double start = now();
  if (!last())
    MPI_CHECK(MPI_Recv(gpt_.output_gradient(), static_cast<int>(activation_elements_), MPI_FLOAT,
                       stage_ + 1, gradient_tag(i), pipeline_, MPI_STATUS_IGNORE));
  const double received = now();
  gpt_.backward(slot, loss_scale, on_final);
  if (!first()) {
    MPI_CHECK(MPI_Isend(gpt_.input_gradient(), static_cast<int>(activation_elements_), MPI_FLOAT,
                        stage_ - 1, gradient_tag(i), pipeline_, &gradient_send_));
    comm::count_sent(comm::Traffic::Pipeline, activation_elements_ * sizeof(float));
  }
  if (times) times->wait_seconds += received - start, times->backward_seconds += now() - received;
}

double PipelineRunner::train_step(const BatchFn& batch, float loss_scale,
                                  const std::function<void(int)>& on_last_final, StepTimes* times) {
  double loss_sum = 0.0;
  const double start = now();
  for (const Action& action : stage_actions(schedule_, stage_, stages_, micro_batches_)) {
    const int slot = action.micro_batch % slots_;
    if (action.forward) {
      loss_sum += run_forward(action.micro_batch, slot, batch, true, times);
      continue;
    }
    const bool last_backward = action.micro_batch == micro_batches_ - 1;
    run_backward(action.micro_batch, slot, loss_scale,
                 last_backward ? on_last_final : std::function<void(int)>(), times);
  }
  for (MPI_Request& request : activation_sends_) wait(request);
  wait(gradient_send_);
  if (times) times->schedule_seconds += now() - start;
  return loss_sum;
}

void PipelineRunner::forward_only(int count, const BatchFn& batch,
                                  const std::function<void(int, const float*)>& consume) {
  for (int i = 0; i < count; ++i) {
    const int slot = i % slots_;
    run_forward(i, slot, batch, true, nullptr);
    if (last()) consume(i, gpt_.losses(slot));
  }
  for (MPI_Request& request : activation_sends_) wait(request);
}

}  // namespace trident::pipeline
