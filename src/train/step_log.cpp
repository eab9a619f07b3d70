// The run's metrics rows and console lines on rank 0.
#include "train/step_log.hpp"

#include <cstdio>

#include "core/log.hpp"
#include "tensor/buffer.hpp"

namespace trident {

StepLog::StepLog(int64_t total_steps, int64_t log_interval, bool loss_scaled, int peak_holders, double flops_per_token)
    : total_steps_(total_steps),
      log_interval_(log_interval),
      loss_scaled_(loss_scaled),
      peak_holders_(peak_holders),
      flops_per_token_(flops_per_token) {}

void StepLog::open(const std::string& path, const std::vector<std::pair<std::string, std::string>>& attributes,
                   int64_t start_step) {
  start_step_ = start_step;
  metrics_ = start_step > 0 ? std::make_unique<metrics::MetricsFile>(path, attributes, start_step)
                            : std::make_unique<metrics::MetricsFile>(path, attributes);
  for (const std::string& note : metrics_->recovery_notes()) warn0(note);
}

void StepLog::start(const metrics::GemmPeak& peak, const char* precision) {
  if (!metrics_) return;
  peak_tflops_ = peak.tflops;
  progress_ = std::make_unique<metrics::RunProgress>(total_steps_, start_step_);
  char line[160];
  std::snprintf(line, sizeof line, "MFU against the measured %s GEMM peak of rank 0: %.1f GFLOP/s (%d^3)", precision,
                peak_tflops_ * 1e3, peak.n);
  print0(line);
}

void StepLog::step(int64_t step, const StepResult& r, double tokens) {
  if (!metrics_) return;  // only rank 0 writes metrics and prints
  const double tokens_per_s = tokens / r.seconds;
  const double tflops = tokens_per_s * flops_per_token_ / 1e12;
  progress_->step_done(step + 1, tokens, r.seconds);
  const MemoryUsage memory = memory_usage();
  metrics_->append_int("step", step + 1);
  metrics_->append("loss", r.loss);
  metrics_->append("lr", r.lr);
  metrics_->append("grad_norm", r.grad_norm);
  metrics_->append("tokens_per_s", tokens_per_s);
  metrics_->append("tflops", tflops);
  metrics_->append("step_ms", r.seconds * 1e3);
  metrics_->append("memory_mb", memory.total_current() / 1048576.0);
  metrics_->append_int("skipped", r.skipped ? 1 : 0);
  if (r.host_reads >= 0) metrics_->append_int("host_reads", r.host_reads);
  if (loss_scaled_) metrics_->append("loss_scale", r.loss_scale);
  if ((step + 1) % log_interval_ != 0 && step + 1 != total_steps_ && step != start_step_ && !r.skipped) return;
  print0(console_line(step, r, tokens_per_s, tflops));
  metrics_->flush();
}

std::string StepLog::console_line(int64_t step, const StepResult& r, double tokens_per_s, double tflops) const {
  char line[256];
  std::snprintf(line, sizeof line,
                "step %6lld/%lld | loss %.4f | lr %.2e | norm %7.3f | %8.0f tok/s | %6.3f TFLOP/s | %8.1f ms",
                static_cast<long long>(step + 1), static_cast<long long>(total_steps_), r.loss, r.lr, r.grad_norm,
                tokens_per_s, tflops, r.seconds * 1e3);
  std::string text = line;
  if (loss_scaled_) {
    std::snprintf(line, sizeof line, " | scale %g", r.loss_scale);
    text += line;
  }
  if (r.skipped) text += loss_scaled_ ? " | skipped (overflow)" : " | skipped (NaN/Inf)";
  // MFU per processor (the job's FLOPs are shared by its ranks, or GPUs) against rank 0's measured peak.
  const double eta = progress_->eta_seconds();
  std::snprintf(line, sizeof line, " | MFU %4.1f%% | ETA %s", 100.0 * tflops / peak_holders_ / peak_tflops_,
                eta < 0 ? "-" : metrics::format_duration(eta).c_str());
  return text + line;
}

void StepLog::validation(int64_t step, double loss) {
  if (!metrics_) return;
  metrics_->append_int("val_step", step);
  metrics_->append("val_loss", loss);
  metrics_->flush();
  char line[128];
  std::snprintf(line, sizeof line, "step %6lld | val_loss %.6g", static_cast<long long>(step), loss);
  print0(line);
}

void StepLog::add_evaluation(double seconds) {
  if (progress_) progress_->add_evaluation(seconds);
}

void StepLog::add_checkpoint(double seconds) {
  if (progress_) progress_->add_checkpoint(seconds);
}

std::string StepLog::progress_summary() const { return progress_ ? progress_->summary() : ""; }

}  // namespace trident
