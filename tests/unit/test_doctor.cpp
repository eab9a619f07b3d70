// The rules of `trident doctor` on synthetic metrics.h5 files with known figures, written by the
// metrics code the trainer uses (metrics::MetricsFile) and read back by doctor's own reader —
// so each rule is tested deterministically, with no timing of real runs: communication
// blocking, scaling across runs, the pipeline bubble and stages waiting beyond it, checkpoints
// blocking training, memory against memory.budget_gb. A remedy never suggests the setting in
// force. (tests/e2e/doctor.sh runs the doctor on real runs.)
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "deck/schema.hpp"
#include "metrics/metrics_file.hpp"
#include "diag/doctor_input.hpp"

using namespace trident;

namespace {

using Overrides = std::map<std::string, std::string>;
using StepFigures = std::function<void(metrics::MetricsFile&, int step)>;

std::string base_dir() {
  static const std::string dir = "/tmp/trident-doctor-" + std::to_string(getpid());
  return dir;
}

// A run directory NAME whose metrics.h5 has every deck key (defaults, then `deck`) as an
// attribute, and `steps` steps of tokens_per_s and step_ms (100 ms) plus what `figures` adds.
std::string write_run(const std::string& name, const Overrides& deck, double tokens_per_s, const StepFigures& figures,
                      int steps = 8) {
  const std::string dir = base_dir() + "/" + name;
  std::filesystem::create_directories(dir);
  std::vector<std::pair<std::string, std::string>> attributes;
  for (const deck::KeySpec& spec : deck::schema()) {
    const auto given = deck.find(spec.key);
    attributes.emplace_back(spec.key, given != deck.end() ? given->second : spec.default_value.value_or("1"));
  }
  metrics::MetricsFile file(dir + "/metrics.h5", attributes);
  for (int step = 1; step <= steps; ++step) {
    file.append_int("step", step);
    file.append("tokens_per_s", tokens_per_s);
    file.append("step_ms", 100.0);
    if (figures) figures(file, step);
  }
  file.flush();
  return dir;
}

struct Report {
  std::vector<diag::Finding> findings;
  std::vector<std::string> checked;
  const diag::Finding* find(const std::string& rule) const {
    for (const diag::Finding& f : findings)
      if (f.rule.rfind(rule, 0) == 0) return &f;
    return nullptr;
  }
};

Report run_doctor(const std::vector<std::string>& dirs, double budget_gb = 0) {
  std::vector<diag::RunFigures> runs;
  for (const std::string& dir : dirs) runs.push_back(read_run_figures(dir, budget_gb));
  Report report;
  report.findings = diag::diagnose(runs, diag::Thresholds{}, report.checked);
  return report;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Cleanup {
  ~Cleanup() { std::filesystem::remove_all(base_dir()); }
};

StepFigures exposed(double ms) {
  return [ms](metrics::MetricsFile& f, int) { f.append("comm_exposed_ms", ms); };
}

// Two stages, each step idle `idle` ms of 100 (forward 40, backward 60 besides).
StepFigures stages_idle(double idle) {
  return [idle](metrics::MetricsFile& f, int) {
    for (const char* stage : {"stage0/", "stage1/"}) {
      f.append(std::string(stage) + "bubble_ms", idle);
      f.append(std::string(stage) + "forward_ms", 40.0 * (100 - idle) / 100);
      f.append(std::string(stage) + "backward_ms", 60.0 * (100 - idle) / 100);
    }
  };
}

// A full checkpoint every 2 steps (the last one after the last step) blocking `ms` each.
StepFigures checkpoints(double ms) {
  return [ms](metrics::MetricsFile& f, int step) {
    if (step % 2) return;
    f.append_int("checkpoint/step", step);
    f.append_int("checkpoint/full", 1);
    f.append("checkpoint/blocking_ms", ms);
    f.append_int("checkpoint/ok", 1);
  };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(doctor)

BOOST_AUTO_TEST_CASE(doctor_communication_blocking_from_known_figures) {
  Cleanup cleanup;
  const Report blocked = run_doctor({write_run("blocked", {{"comm.overlap", "false"}, {"comm.algo", "flat"}}, 1000, exposed(40))});
  const diag::Finding* f = blocked.find("communication blocking");
  BOOST_REQUIRE(f);
  BOOST_TEST(contains(f->evidence, "40.0% of the step"), f->evidence);
  BOOST_TEST(contains(f->remedy, "comm.overlap = true"), f->remedy);
  BOOST_TEST(contains(f->remedy, "comm.algo = hierarchical (now flat)"), f->remedy);
  // Already hierarchical and overlapped: the remedy suggests neither again.
  const Report in_force = run_doctor({write_run("in_force", {{"comm.algo", "hierarchical"}}, 1000, exposed(40))});
  BOOST_REQUIRE(in_force.find("communication blocking"));
  BOOST_TEST(!contains(in_force.find("communication blocking")->remedy, "comm.algo = hierarchical"));
  BOOST_TEST(!contains(in_force.find("communication blocking")->remedy, "comm.overlap"));
  BOOST_TEST(!run_doctor({write_run("overlapped", {}, 1000, exposed(5))}).find("communication blocking"));
}

BOOST_AUTO_TEST_CASE(doctor_scaling_from_known_figures) {
  Cleanup cleanup;
  const std::string one = write_run("one", {}, 1000, nullptr);
  const std::string four = write_run("four", {{"parallel.data", "4"}, {"comm.algo", "flat"}}, 600, nullptr);
  const std::string two = write_run("two", {{"parallel.data", "2"}}, 1900, nullptr);
  const Report slower = run_doctor({one, four});
  const diag::Finding* f = slower.find("throughput falls as ranks are added");
  BOOST_REQUIRE(f);
  BOOST_TEST(contains(f->evidence, "600 tokens/s, 60% of"), f->evidence);
  BOOST_TEST(contains(f->remedy, "comm.algo = hierarchical (now flat)"), f->remedy);
  BOOST_TEST(!run_doctor({one, two}).find("throughput falls"));
  const std::string hierarchical = write_run("four_h", {{"parallel.data", "4"}, {"comm.algo", "hierarchical"}}, 600, nullptr);
  const Report report_h = run_doctor({one, hierarchical});
  const diag::Finding* h = report_h.find("throughput falls");
  BOOST_REQUIRE(h);
  BOOST_TEST(!contains(h->remedy, "comm.algo = hierarchical ("), h->remedy);
}

BOOST_AUTO_TEST_CASE(doctor_pipeline_bubble_from_known_figures) {
  Cleanup cleanup;
  // 2 stages, 2 micro-batches: the schedule's bubble is 1/3; idle 40%: the bubble rule.
  const Overrides few{{"parallel.pipeline", "2"}, {"train.global_batch", "2"}, {"train.micro_batch", "1"}};
  const Report report_f = run_doctor({write_run("bubble", few, 1000, stages_idle(40))});
  const diag::Finding* f = report_f.find("pipeline bubble");
  BOOST_REQUIRE(f);
  BOOST_TEST(contains(f->evidence, "idle 40.0%"), f->evidence);
  BOOST_TEST(contains(f->evidence, "33.3%"), f->evidence);
  BOOST_TEST(!run_doctor({write_run("small_bubble", few, 1000, stages_idle(10))}).find("pipeline"));
  // 16 micro-batches (bubble 1/17) and still idle 40%: stages waiting on each other.
  const Overrides many{{"parallel.pipeline", "2"}, {"train.global_batch", "16"}, {"train.micro_batch", "1"}};
  BOOST_TEST(run_doctor({write_run("unbalanced", many, 1000, stages_idle(40))}).find("pipeline stages waiting on each other"));
  // 4 micro-batches: 1F1B's bubble is 1/5, ZB-H1's with F:B:W measured 24:18:18 is 24/264, so under
  // ZB-H1 40% idle is stages waiting on each other, not the schedule.
  const Overrides four{{"parallel.pipeline", "2"}, {"train.global_batch", "4"}, {"train.micro_batch", "1"}};
  BOOST_TEST(run_doctor({write_run("one_f_one_b", four, 1000, stages_idle(40))}).find("pipeline bubble"));
  Overrides zero_bubble = four;
  zero_bubble["parallel.schedule"] = "zb-h1";
  const StepFigures idle = stages_idle(40);
  const Report report_zb = run_doctor({write_run("zero_bubble", zero_bubble, 1000, [&](metrics::MetricsFile& f, int step) {
    idle(f, step);
    for (const char* stage : {"stage0/", "stage1/"}) f.append(std::string(stage) + "weights_ms", 18.0);
  })});
  const diag::Finding* zb = report_zb.find("pipeline stages waiting on each other");
  BOOST_REQUIRE(zb);
  BOOST_TEST(contains(zb->evidence, "the schedule's bubble with these stage times is 9.1% (zb-h1)"), zb->evidence);
}

BOOST_AUTO_TEST_CASE(doctor_checkpoint_blocking_from_known_figures) {
  Cleanup cleanup;
  // 3 checkpoints during the 8 steps (the one after step 8 does not count) of 50 ms: 150 of 800.
  const Report report_f = run_doctor({write_run("blocking", {}, 1000, checkpoints(50))});
  const diag::Finding* f = report_f.find("checkpoints blocking training");
  BOOST_REQUIRE(f);
  BOOST_TEST(contains(f->evidence, "3 checkpoint writes during training"), f->evidence);
  BOOST_TEST(contains(f->evidence, "blocked training 150 ms, 18.8%"), f->evidence);
  BOOST_TEST(contains(f->remedy, "checkpoint.async = true"), f->remedy);
  const Report report_async = run_doctor({write_run("async", {{"checkpoint.async", "true"}}, 1000, checkpoints(50))});
  const diag::Finding* async = report_async.find("checkpoints blocking");
  BOOST_REQUIRE(async);
  BOOST_TEST(!contains(async->remedy, "checkpoint.async"), async->remedy);
  BOOST_TEST(!run_doctor({write_run("quick", {}, 1000, checkpoints(1))}).find("checkpoints blocking"));
}

BOOST_AUTO_TEST_CASE(doctor_memory_against_the_budget_in_force) {
  Cleanup cleanup;
  auto peaks = [](metrics::MetricsFile& f, int) {
    f.append("memory/parameters_peak_bytes", 400e6);
    f.append("memory/activations_peak_bytes", 550e6);
  };
  // memory.budget_gb = 1: 950 MB of 1 GB is 95%; the finding says which limit it used.
  const Overrides budget{{"memory.budget_gb", "1"}, {"memory.recompute", "full"}, {"optim.zero", "1"}};
  const Report report_f = run_doctor({write_run("budget", budget, 1000, peaks)});
  const diag::Finding* f = report_f.find("memory close to the budget");
  BOOST_REQUIRE(f);
  BOOST_TEST(contains(f->evidence, "95% of the 953.7 MiB budget (memory.budget_gb)"), f->evidence);
  BOOST_TEST(!contains(f->remedy, "optim.zero = 1"), f->remedy);  // in force already
  BOOST_TEST(!run_doctor({write_run("roomy", {{"memory.budget_gb", "4"}}, 1000, peaks)}).find("memory close"));
  const Report report_given = run_doctor({write_run("given", {}, 1000, peaks)}, 1.0);
  const diag::Finding* given = report_given.find("memory close");
  BOOST_REQUIRE(given);
  BOOST_TEST(contains(given->evidence, "(--budget_gb)"), given->evidence);
}

BOOST_AUTO_TEST_SUITE_END()
