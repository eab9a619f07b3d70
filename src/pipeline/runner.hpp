// Runs one stage's part of a pipeline schedule over the pipeline group.
//
// Communication: point-to-point on the pipeline group's Communicator, every transfer a Work
// handle (f32, on the model's stream). Virtual stage u = chunk·p + s (u = s without chunks).
// Forward of micro-batch i on u > 0 receives the activation (B, T, C) of u − 1 — rank s − 1, or
// for s = 0 rank p − 1's previous chunk — (tag 2(i·v + chunk)); every u but the last sends its
// output to u + 1 with a non-blocking send straight from the micro-batch's activation slot,
// completed (its Work waited for) before that slot is used again. Backward of i on all but the
// last u receives the gradient (B, T, C) of u + 1 (tag 2(i·v + chunk) + 1); every u > 0 sends
// its input gradient to u − 1, completed before its buffer is reused (with chunks a buffer per
// chunk). Receives block (under the watchdog): the schedules are deadlock-free with these waits
// (tests/unit/test_schedule.cpp simulates them). A zero-bubble schedule's W
// (Pass::WeightGradient) communicates nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "comm/communicator.hpp"
#include "tensor/buffer.hpp"
#include "kernels/stream_intervals.hpp"
#include "model/transformer.hpp"
#include "pipeline/schedule.hpp"

namespace trident::pipeline {

// Fills the tokens of micro-batch i: inputs and targets (B, T).
using BatchFn = std::function<void(int micro_batch, int32_t* inputs, int32_t* targets)>;

// The compute times are the model stream's (on a device, its own clock); the waits the host's.
struct StepTimes {
  double forward_seconds = 0;   // forward compute of this stage (with its tensor collectives)
  double backward_seconds = 0;  // backward compute (a zero-bubble schedule's B and W passes)
  double weight_seconds = 0;    // of backward: the W passes alone (zero-bubble schedules)
  double wait_seconds = 0;      // blocked on receives
  double schedule_seconds = 0;  // the whole schedule on this stage, first action to last send
  double edge_seconds = 0;      // of forward + backward: the embedding and head (Transformer::take_edge_seconds)
};

class PipelineRunner {
 public:
  // pipeline: the pipeline group's communicator (our point-to-point: counted per level, and
  // every wait under the watchdog).
  PipelineRunner(model::Transformer& gpt, comm::Communicator& pipeline, Schedule schedule, int micro_batches,
                 int B, int T);

  // One training step: every micro-batch forward and backward (loss scaled by loss_scale);
  // on_last_final is the gradient hook of the step's last backward (with every_backward, of
  // each backward: ZeRO-2 reduces every micro-batch's block gradients). The last stage keeps each
  // micro-batch's loss sum on the device (Transformer::kept_loss_sums): nothing is read on the host.
  void train_step(const BatchFn& batch, float loss_scale,
                    const std::function<void(int)>& on_last_final, StepTimes* times = nullptr,
                    bool every_backward = false);

  // Forward only, `count` micro-batches (validation). After each, on the last stage, consume(i,
  // losses) gets the per-position losses (B·T).
  void forward_only(int count, const BatchFn& batch,
                    const std::function<void(int, const float*)>& consume);

  // debug.slowdown: this rank's compute takes `factor` times as long — after each micro-batch's
  // forward and backward the runner sleeps for the compute time just measured × (factor − 1),
  // and that time counts as compute (the StepTimes see a slower device). 1: off.
  void set_slowdown(double factor) { slowdown_ = factor; }
  // From the next step on, `micro_batches` per step (balance.replicas: this replica's share of
  // the global batch); the activation slots follow the schedule's need.
  void set_micro_batches(int micro_batches);
  int micro_batches() const { return micro_batches_; }

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == stages_ - 1; }

 private:
  // backward_scale: a training step's forward, whose backward follows with that loss scale
  // (Transformer::enqueue_forward); none: a forward for the loss alone.
  void run_forward(int micro_batch, int chunk, const BatchFn& batch, std::optional<float> backward_scale,
                   StepTimes* times);
  void run_backward(int micro_batch, int chunk, float loss_scale, bool inputs_only,
                    const std::function<void(int)>& on_final, StepTimes* times);
  void run_weight_gradients(int micro_batch, int chunk, const std::function<void(int)>& on_final, StepTimes* times);
  void size_slots();
  int virtual_stage(int chunk) const;   // chunk · stages + stage
  bool reads_tokens(int chunk) const;   // this chunk's forward fills the micro-batch's tokens
  void stretch(double compute_start) const;  // debug.slowdown's sleep
  model::Transformer& gpt_;
  comm::Communicator& pipeline_;
  int stage_ = 0, stages_ = 1;
  Schedule schedule_;
  int micro_batches_, B_, T_;
  std::vector<int> slots_;               // per chunk (pipeline::chunk_slots)
  int chunks_ = 1;                       // model chunks of this stage (interleaved schedule)
  double slowdown_ = 1.0;
  size_t activation_elements_;
  // The step's tokens in pinned host memory, micro-batch i's inputs and targets at
  // [2·i·B·T, 2·(i+1)·B·T): on a device each upload is asynchronous (no host wait), so no
  // micro-batch's tokens are overwritten before the step's end has waited for its copy.
  // First and last stages only (they read batches).
  Buffer<int32_t> tokens_;
  int32_t* inputs_of(int i);   // (B·T) of micro-batch i, its targets after them
  void size_tokens();           // for micro_batches_
  std::vector<comm::Work> activation_sends_;  // per slot
  // Without chunks one: the model's input-gradient buffer is sent. With chunks one per slot,
  // each sent from its own gradient_out_ buffer (B, T, C): a chunk's next backward does not wait
  // for the previous stage to receive its last gradient (with one buffer per chunk, stage 0 of
  // p = 2, v = 2 waited a twentieth of its step for that; docs/PERFORMANCE.md).
  std::vector<comm::Work> gradient_sends_;
  std::vector<Buffer<float>> gradient_out_;
  // The step's compute on the model's stream, read after the schedule (on a device the host's
  // clock would time the launches only; kernels/stream_intervals.hpp).
  kernels::StreamIntervals forward_times_, backward_times_, weight_times_, schedule_times_;
};

}  // namespace trident::pipeline
