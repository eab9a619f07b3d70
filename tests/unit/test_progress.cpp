// The console's progress figures (issue 19): durations as the console prints them, the ETA from
// the recent steps' wall time, and the GEMM peak MFU is measured against.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "metrics/progress.hpp"

namespace metrics = trident::metrics;

BOOST_AUTO_TEST_SUITE(progress)

BOOST_AUTO_TEST_CASE(durations) {
  BOOST_TEST(metrics::format_duration(0.2) == "0s");
  BOOST_TEST(metrics::format_duration(59.4) == "59s");
  BOOST_TEST(metrics::format_duration(185) == "3m05s");
  BOOST_TEST(metrics::format_duration(2 * 3600 + 4 * 60 + 10) == "2h04m");
  BOOST_TEST(metrics::format_duration(3 * 86400 + 5 * 3600) == "3d05h");
}

BOOST_AUTO_TEST_CASE(eta_from_recent_steps) {
  metrics::RunProgress progress(10, 0);
  BOOST_TEST(progress.eta_seconds() < 0);  // nothing measured yet
  progress.step_done(1, 100, 0.01);        // the first interval holds the start-up: not a pace
  BOOST_TEST(progress.eta_seconds() < 0);
  for (int step = 2; step <= 4; ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    progress.step_done(step, 100, 0.02);
  }
  const double eta = progress.eta_seconds();  // 6 steps left at >= 20 ms each
  BOOST_TEST(eta >= 6 * 0.02);
  BOOST_TEST(eta < 6 * 0.5);
  progress.add_evaluation(1.5);
  progress.add_checkpoint(0.5);
  const std::string summary = progress.summary();
  BOOST_TEST(summary.find("400 tokens") != std::string::npos);
  BOOST_TEST(summary.find("5714 tokens/s in the steps") != std::string::npos);  // 400 / 0.07 s
  BOOST_TEST(summary.find("evaluation 1.5 s, checkpoints 0.5 s") != std::string::npos);
}

// On the CPU the probe is one 1024^3 product (on a GPU 8192^3 with events: tests/gpu and
// scripts/gpu-check.sh see that one).
BOOST_AUTO_TEST_CASE(gemm_peak_is_positive) {
  const metrics::GemmPeak peak = metrics::measure_gemm_peak({}, trident::kernels::Precision::fp32);
  BOOST_TEST(peak.n == 1024);
  BOOST_TEST(peak.tflops > 0.0);
  BOOST_TEST(peak.tflops < 1e3);
}

// The 16-bit runs' peak: the linear layer's GEMM on bf16 or fp16 operands where this CPU has such
// a matmul, the f32 product where it widens them (kernels::widens_low16).
BOOST_AUTO_TEST_CASE(gemm_peak_of_16_bit_runs) {
  for (const auto precision : {trident::kernels::Precision::bf16, trident::kernels::Precision::fp16}) {
    const metrics::GemmPeak peak = metrics::measure_gemm_peak({}, precision);
    BOOST_TEST(peak.n == 1024);
    BOOST_TEST(peak.tflops > 0.0);
    BOOST_TEST(peak.tflops < 1e3);
  }
}

BOOST_AUTO_TEST_SUITE_END()
