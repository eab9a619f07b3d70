// The run's log, kept by rank 0: each step's row in metrics.h5 and its console line (every
// metrics.log_interval steps, the first of the run, the last and every skipped one: loss, lr,
// norm, tokens/s, TFLOP/s, step time, MFU against the measured GEMM peak, ETA), the validation
// rows and lines, and the run's progress (ETA and the end-of-run totals). On every other rank
// the log is closed: its methods do nothing and metrics() is null.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "metrics/metrics_file.hpp"
#include "metrics/progress.hpp"
#include "train/step_result.hpp"

namespace trident {

class StepLog {
 public:
  // total_steps: train.steps; log_interval: metrics.log_interval; loss_scaled: fp16 (its scale
  // logged); peak_holders: the processors the job's FLOPs are spread over, each as fast as the
  // measured peak (the ranks, or the GPUs where ranks share one: MFU is per processor);
  // flops_per_token: the model's training FLOPs per token.
  StepLog(int64_t total_steps, int64_t log_interval, bool loss_scaled, int peak_holders, double flops_per_token);

  // Rank 0: metrics.h5 (created, or continued after `start_step` steps: the run resumed there)
  // with `attributes`. Throws std::runtime_error when it cannot be written.
  void open(const std::string& path, const std::vector<std::pair<std::string, std::string>>& attributes,
            int64_t start_step);
  // Rank 0, after open: the GEMM peak MFU is measured against (printed), and the progress
  // from open's start step.
  void start(const metrics::GemmPeak& peak, const char* precision);

  // Step `step` (0-based) done: its row, and its console line when due. tokens: the step's,
  // all replicas.
  void step(int64_t step, const StepResult& result, double tokens);
  void validation(int64_t step, double loss);
  void add_evaluation(double seconds);
  void add_checkpoint(double seconds);

  metrics::MetricsFile* metrics() const { return metrics_.get(); }  // rank 0; else null
  // Rank 0: the end-of-run totals line ("" elsewhere).
  std::string progress_summary() const;

 private:
  std::string console_line(int64_t step, const StepResult& r, double tokens_per_s, double tflops) const;

  const int64_t total_steps_, log_interval_;
  const bool loss_scaled_;
  const int peak_holders_;
  const double flops_per_token_;
  int64_t start_step_ = 0;  // the step the run started or resumed at (its first line is printed)
  std::unique_ptr<metrics::MetricsFile> metrics_;
  std::unique_ptr<metrics::RunProgress> progress_;
  double peak_tflops_ = 0;  // the measured GEMM peak, for MFU
};

}  // namespace trident
