// How far a run is and how well it uses the machine, for the console: the estimated time to the
// end of the run (from the wall time of the recent steps, evaluations and checkpoints included,
// since they recur), the model FLOPs utilisation against a peak, and the end-of-run totals
// (time, tokens, average tokens/s, time in evaluation and in checkpoints).
//
// The peak: no vendor figure is known to the program, so it is measured — the rate of one large
// square GEMM in the run's precision on this rank's threads or GPU (measure_gemm_peak), the most
// the model's GEMMs could reach here. MFU = the model FLOPs of a step per second per processor
// (a rank; on CUDA a GPU, which ranks may share through MPI) over that peak.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "kernels/kernels.hpp"

namespace trident::metrics {

// The rate of an n × n × n GEMM in the run's precision (16-bit operands for bf16 and fp16 where
// the backend multiplies them natively, else f32: what widened 16-bit GEMMs run at). On the CPU
// (and the guard) n = 1024, the best of 2 runs after one; on a GPU n = 8192 (less where memory
// is short) on random operands, 20 products timed by events after 10 that warm the clocks: one
// 1024^3 product timed by the host clock from idle clocks would make the MFU several times too high.
constexpr int kCpuGemmPeakSize = 1024;  // n on the CPU and the guard
struct GemmPeak {
  double tflops = 0;
  int n = 0;
};
GemmPeak measure_gemm_peak(const kernels::Context& device, kernels::Precision precision);

// Operands a GEMM probe keeps busy with: uniform in [-1, 1) from a 64-bit LCG. On a GPU, constant
// operands (zeros, say: the allocator's) draw less power than real ones and let the clocks run
// higher than a training step's.
std::vector<float> probe_values(size_t count, uint64_t seed);

// "12s", "3m05s", "2h04m", "3d05h".
std::string format_duration(double seconds);

class RunProgress {
 public:
  // total_steps: the step the run ends at; first_step: where it starts (a resume's step).
  RunProgress(int64_t total_steps, int64_t first_step, int window = 20);
  // At the end of each step (after its evaluation and checkpoint), with the step's tokens and
  // its time inside the training step proper.
  void step_done(int64_t completed, double tokens, double step_seconds);
  void add_evaluation(double seconds) { evaluation_seconds_ += seconds; }
  void add_checkpoint(double seconds) { checkpoint_seconds_ += seconds; }
  // Seconds to the last step at the recent pace; negative before two steps are done.
  double eta_seconds() const;
  // "run: 42.0 s, 614400 tokens, 16135 tokens/s in the steps (14629 overall); evaluation 1.2 s, checkpoints 0.4 s"
  std::string summary() const;

 private:
  int64_t total_steps_, completed_;
  size_t window_;
  SteadyClock::time_point start_, last_;
  std::deque<double> recent_;  // wall seconds between the last step ends
  double tokens_ = 0, step_seconds_ = 0, evaluation_seconds_ = 0, checkpoint_seconds_ = 0;
};

}  // namespace trident::metrics
