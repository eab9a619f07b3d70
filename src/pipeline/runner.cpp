// One stage's execution of a pipeline schedule.
#include "pipeline/runner.hpp"

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "core/clock.hpp"
#include "core/error.hpp"

namespace trident::pipeline {
namespace {

// A stage waits for its neighbour's activation or gradient for as long as that neighbour
// computes, typically milliseconds: after a short spin it sleeps between polls instead of
// yielding, so that where ranks outnumber cores the waiting ones leave the cores to the
// computing ones (yielding still competes for them). The wake-up costs tens of µs per transfer.
const std::atomic<bool> kPatient{true};

// Receives under the patient wait, then restores the thread's usual one. A receive ordered on a
// device stream (NCCL) is left to the stream: the kernels that read it are enqueued after it
// there, and the schedule's fence brings its completion under the watchdog; a host receive is
// waited for here.
void patient_recv(comm::Communicator& pipeline, float* data, size_t n, int peer, int tag, Stream stream) {
  comm::wait_patiently(&kPatient);
  pipeline.recv(data, n, DType::f32, peer, tag, stream).leave_to_stream();
  comm::wait_patiently(nullptr);
}

// Between two ranks each (micro-batch, receiving chunk) crosses once each way.
int activation_tag(int micro_batch, int chunks, int chunk) { return 2 * (micro_batch * chunks + chunk); }
int gradient_tag(int micro_batch, int chunks, int chunk) { return 2 * (micro_batch * chunks + chunk) + 1; }

}  // namespace

PipelineRunner::PipelineRunner(model::Transformer& gpt, comm::Communicator& pipeline, Schedule schedule,
                               int micro_batches, int B, int T)
    : gpt_(gpt), pipeline_(pipeline), schedule_(schedule), micro_batches_(micro_batches), B_(B), T_(T),
      forward_times_(gpt.context()), backward_times_(gpt.context()), weight_times_(gpt.context()),
      schedule_times_(gpt.context()) {
  stage_ = pipeline.rank();
  stages_ = pipeline.size();
  chunks_ = gpt.partition().chunks();
  activation_elements_ = gpt.activation_elements(B, T);
  size_slots();
  gpt_.prepare(B, T);
}

// The schedule's slots per chunk for micro_batches_, the activation sends' handles per slot,
// and with chunks a gradient buffer per slot.
void PipelineRunner::size_slots() {
  size_tokens();
  gpt_.keep_losses_for(micro_batches_);
  slots_ = chunk_slots(schedule_, stage_, stages_, micro_batches_, chunks_);
  gpt_.set_slots(slots_);
  const size_t slots = std::accumulate(slots_.begin(), slots_.end(), size_t{0});
  activation_sends_.clear();
  activation_sends_.resize(slots);
  gradient_sends_.clear();
  gradient_sends_.resize(chunks_ > 1 ? slots : 1);
  gradient_out_.clear();
  if (chunks_ > 1)
    for (size_t k = 0; k < slots; ++k)
      gradient_out_.emplace_back(activation_elements_, MemoryCategory::Activations, kernels::backend_of(gpt_.context()),
                                 MemoryKind::device);
}

int PipelineRunner::virtual_stage(int chunk) const { return chunk * stages_ + stage_; }
bool PipelineRunner::reads_tokens(int chunk) const {
  return first() ? chunk == 0 : last() && chunk == chunks_ - 1;  // once per micro-batch
}

void PipelineRunner::size_tokens() {
  const size_t needed = first() || last() ? 2 * static_cast<size_t>(micro_batches_) * B_ * T_ : 0;
  if (tokens_.size() != needed)
    tokens_ = Buffer<int32_t>(needed, MemoryCategory::Activations, kernels::backend_of(gpt_.context()),
                              MemoryKind::pinned_host);
}

// Validation's passes outnumber the step's micro-batches: pass i reuses region i mod m, by which
// time its earlier copy is done (the last stage reads each pass's losses; the first waits for
// each slot's send before reusing the slot, and m >= slots).
int32_t* PipelineRunner::inputs_of(int i) {
  return tokens_.data() + 2 * static_cast<size_t>(i % micro_batches_) * B_ * T_;
}

// Virtual stage u = chunk·p + stage receives from u − 1 (the previous rank, the last rank's
// previous chunk for rank 0) and sends to u + 1.
void PipelineRunner::run_forward(int i, int chunk, const BatchFn& batch, std::optional<float> backward_scale,
                                 StepTimes* times) {
  const int slot = gpt_.slot(chunk, i % slots_[chunk]), u = virtual_stage(chunk);
  activation_sends_[slot].wait();  // slot reuse
  const double start = steady_seconds();
  if (u > 0)
    patient_recv(pipeline_, gpt_.stage_input(slot), activation_elements_, (stage_ + stages_ - 1) % stages_,
                 activation_tag(i, chunks_, chunk), gpt_.stream());
  const double received = steady_seconds();
  if (times) forward_times_.begin();
  int32_t* inputs = first() || last() ? inputs_of(i) : nullptr;
  int32_t* targets = inputs ? inputs + static_cast<size_t>(B_) * T_ : nullptr;
  if (inputs && reads_tokens(chunk)) batch(i, inputs, targets);
  gpt_.enqueue_forward(slot, inputs, targets, B_, T_, backward_scale);
  stretch(received);
  if (u < chunks_ * stages_ - 1)
    activation_sends_[slot] = pipeline_.send(gpt_.output(slot), activation_elements_, DType::f32, (stage_ + 1) % stages_,
                                             activation_tag(i, chunks_, last() ? chunk + 1 : chunk), gpt_.stream());
  if (times) times->wait_seconds += received - start, forward_times_.end();
}

// inputs_only: the zero-bubble B (Transformer::backward_inputs), the weight gradients left to
// run_weight_gradients. It keeps dy where the slot's output was: that send must be complete.
// Without chunks the input gradient goes out of the model's buffer, its send completed before
// the next backward writes it; with chunks each slot sends from a buffer of its own, completed
// before the slot's next backward — one buffer for all chunks can deadlock once MPI completes
// a large send only at its receive, and one per chunk makes a stage wait for its neighbour to
// receive (tests/unit/test_schedule.cpp checks every schedule against these waits).
void PipelineRunner::run_backward(int i, int chunk, float loss_scale, bool inputs_only,
                                  const std::function<void(int)>& on_final, StepTimes* times) {
  const int slot = gpt_.slot(chunk, i % slots_[chunk]), u = virtual_stage(chunk);
  const int buffer = chunks_ > 1 ? slot : 0;
  comm::Work& gradient_send = gradient_sends_[buffer];
  gradient_send.wait();  // buffer reuse
  if (inputs_only) activation_sends_[slot].wait();
  const double start = steady_seconds();
  if (u < chunks_ * stages_ - 1)
    patient_recv(pipeline_, gpt_.output_gradient(), activation_elements_, (stage_ + 1) % stages_,
                 gradient_tag(i, chunks_, chunk), gpt_.stream());
  const double received = steady_seconds();
  if (times) backward_times_.begin();
  if (inputs_only) gpt_.backward_inputs(slot, loss_scale);
  else gpt_.backward(slot, loss_scale, on_final);
  stretch(received);
  if (u > 0) {
    const float* gradient = gpt_.input_gradient();
    if (chunks_ > 1) {
      gpt_.copy_input_gradient(gradient_out_[buffer].data());
      gradient = gradient_out_[buffer].data();
    }
    gradient_send = pipeline_.send(gradient, activation_elements_, DType::f32, (stage_ + stages_ - 1) % stages_,
                                   gradient_tag(i, chunks_, first() ? chunk - 1 : chunk), gpt_.stream());
  }
  if (times) times->wait_seconds += received - start, backward_times_.end();
}

// The zero-bubble W: local work, nothing received or sent.
void PipelineRunner::run_weight_gradients(int i, int chunk, const std::function<void(int)>& on_final,
                                          StepTimes* times) {
  const int slot = gpt_.slot(chunk, i % slots_[chunk]);
  const double start = steady_seconds();
  if (times) weight_times_.begin();
  gpt_.backward_weights(slot, on_final);
  stretch(start);
  if (times) weight_times_.end();
}

void PipelineRunner::set_micro_batches(int micro_batches) {
  for (comm::Work& send : activation_sends_) send.wait();  // no slot may go while its send is pending
  for (comm::Work& send : gradient_sends_) send.wait();
  micro_batches_ = micro_batches;
  size_slots();
}

void PipelineRunner::stretch(double compute_start) const {
  if (slowdown_ <= 1.0) return;
  const double compute = steady_seconds() - compute_start;
  std::this_thread::sleep_for(std::chrono::duration<double>(compute * (slowdown_ - 1.0)));
}

void PipelineRunner::train_step(const BatchFn& batch, float loss_scale,
                                const std::function<void(int)>& on_last_final, StepTimes* times,
                                bool every_backward) {
  gpt_.take_edge_seconds();  // validation's forwards are not this step's
  if (times) schedule_times_.begin();
  for (const Action& action : stage_actions(schedule_, stage_, stages_, micro_batches_, chunks_)) {
    const int i = action.micro_batch, chunk = action.chunk;
    // The last micro-batch's backward, or its W, makes the chunk's weight gradients final.
    const std::function<void(int)> on_final = every_backward || i == micro_batches_ - 1 ? on_last_final : nullptr;
    switch (action.pass) {
      case Pass::Forward:
        run_forward(i, chunk, batch, loss_scale, times);
        if (virtual_stage(chunk) == chunks_ * stages_ - 1)  // the step's loss, on the device
          gpt_.keep_loss(gpt_.slot(chunk, i % slots_[chunk]), i);
        break;
      case Pass::Backward: run_backward(i, chunk, loss_scale, false, on_final, times); break;
      case Pass::InputGradient: run_backward(i, chunk, loss_scale, true, nullptr, times); break;
      case Pass::WeightGradient: run_weight_gradients(i, chunk, on_final, times); break;
    }
  }
  for (comm::Work& send : activation_sends_) send.wait();
  for (comm::Work& send : gradient_sends_) send.wait();
  pipeline_.fence(gpt_.stream()).wait();  // the receives left to the stream, under the watchdog
  gpt_.settle_communication();  // the tensor group's last all-reduces, before the host reads results
  if (times) {
    schedule_times_.end();
    times->schedule_seconds += schedule_times_.take_seconds();
    times->forward_seconds += forward_times_.take_seconds();
    const double weights = weight_times_.take_seconds();
    times->backward_seconds += backward_times_.take_seconds() + weights;
    times->weight_seconds += weights;
  }
  // The slowed rank's embedding and head are slowed too (stretch sleeps for the whole compute).
  const double edge = gpt_.take_edge_seconds() * slowdown_;
  if (times) times->edge_seconds += edge;
}

void PipelineRunner::forward_only(int count, const BatchFn& batch,
                                  const std::function<void(int, const float*)>& consume) {
  std::vector<float> losses(last() ? static_cast<size_t>(B_) * T_ : 0);  // on the host, wherever the model is
  for (int i = 0; i < count; ++i) {
    for (int chunk = 0; chunk < chunks_; ++chunk) run_forward(i, chunk, batch, std::nullopt, nullptr);
    if (!last()) continue;
    gpt_.settle_communication();  // the groups' fences, under their watchdogs, before the host waits on the stream
    gpt_.download_losses(gpt_.slot(chunks_ - 1, i % slots_[chunks_ - 1]), losses.data());
    consume(i, losses.data());
  }
  for (comm::Work& send : activation_sends_) send.wait();
  pipeline_.fence(gpt_.stream()).wait();
}

}  // namespace trident::pipeline
