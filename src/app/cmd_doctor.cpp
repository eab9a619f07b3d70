// `trident doctor RUN_DIR... [--budget_gb=X]`: reads each run's metrics.h5 and prints the
// findings of the seed's troubleshooting rules (diag/doctor.hpp), each with the figures that
// triggered it and the remedy. Several run directories (a sweep over ranks) also get the
// scaling rule. Exit status 0 (findings or not), 2 for a missing or unreadable run.
#include <unistd.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <stdexcept>

#include "core/error.hpp"
#include "core/log.hpp"
#include "deck/schema.hpp"
#include "diag/doctor.hpp"
#include "metrics/metrics_file.hpp"
#include "tensor/buffer.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "diag/doctor_input.hpp"
#include "pipeline/timeline.hpp"

namespace trident {
namespace po = boost::program_options;
namespace {

const char* kDoctorUsage =
    "usage: trident doctor RUN_DIR... [--budget_gb=GB]\n"
    "The seed's troubleshooting table as rules over each run's metrics.h5: communication blocking,\n"
    "memory close to the budget (GB per rank; default the deck's memory.budget_gb, else the memory\n"
    "the run's model lived in, its host's or its GPU's, shared by the ranks on it), NaN/Inf steps,\n"
    "pipeline bubble, and with several runs of\n"
    "different size, throughput falling as ranks are added.";

std::vector<double> series_or_empty(const std::string& path, const std::string& name) {
  try {
    return metrics::read_series(path, name);
  } catch (const std::runtime_error&) {
    return {};
  }
}

std::vector<double> after_warmup(std::vector<double> values) {
  if (values.size() > 1) values.erase(values.begin());  // step 1 creates primitives and touches memory
  return values;
}

// Bytes per rank to compare the peaks with, and where the figure comes from.
double budget_bytes(double given_gb, const diag::RunFigures& run, std::string& source) {
  if (given_gb > 0) {
    source = "--budget_gb";
    return given_gb * 1e9;
  }
  const auto it = run.deck.find("memory.budget_gb");
  if (it != run.deck.end() && std::stod(it->second) > 0) {
    source = "memory.budget_gb";
    return std::stod(it->second) * 1e9;
  }
  // The memory the run's model lived in (its host's or its device's, as the run recorded it),
  // shared by that many ranks.
  const auto capacity = run.deck.find("memory.capacity_bytes"), ranks = run.deck.find("memory.capacity_ranks"),
             of = run.deck.find("memory.capacity_of");
  if (capacity != run.deck.end() && ranks != run.deck.end() && of != run.deck.end() && std::stod(capacity->second) > 0) {
    source = "the memory of " + of->second + " / " + ranks->second + " ranks";
    return std::stod(capacity->second) / std::max(1, std::stoi(ranks->second));
  }
  const double host = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  const auto per_node = run.deck.find("topology.ranks_per_node");
  const int sharing = per_node != run.deck.end() && std::stoi(per_node->second) > 0 ? std::stoi(per_node->second) : run.world;
  source = "this host's memory / " + std::to_string(sharing) + " ranks";
  return host / sharing;
}

}  // namespace

diag::RunFigures read_run_figures(const std::string& dir, double budget_gb) {
  const std::string path = dir + "/metrics.h5";
  if (!std::filesystem::exists(path)) fatal_all("'" + dir + "' has no metrics.h5; give a run directory of trident train");
  diag::RunFigures run;
  run.dir = dir;
  try {
    for (const deck::KeySpec& spec : deck::schema()) {
      try {
        run.deck[spec.key] = metrics::read_attribute(path, spec.key);
      } catch (const std::runtime_error&) {  // a key added after the run was made
      }
    }
    // Not deck keys: what the run recorded of the memory its model lived in (budget_bytes), and
    // of its threads (the threads rule).
    for (const char* name : {"memory.capacity_bytes", "memory.capacity_ranks", "memory.capacity_of", "threads.per_rank",
                             "threads.chosen", "threads.host_threads", "threads.host_cores", "threads.host_ranks"}) {
      try {
        run.deck[name] = metrics::read_attribute(path, name);
      } catch (const std::runtime_error&) {  // a run made before they were recorded
      }
    }
    const std::vector<double> steps = metrics::read_series(path, "step");
    run.steps = static_cast<int64_t>(steps.size());
    run.tokens_per_s = after_warmup(metrics::read_series(path, "tokens_per_s"));
    const std::vector<double> step_ms = metrics::read_series(path, "step_ms");
    for (double ms : step_ms) run.step_ms_total += ms;
    // Checkpoints during training; the one after the last step blocks nothing that follows.
    const std::vector<double> at = series_or_empty(path, "checkpoint/step");
    const std::vector<double> blocking = series_or_empty(path, "checkpoint/blocking_ms");
    const std::vector<double> ok = series_or_empty(path, "checkpoint/ok");
    for (size_t i = 0; i < at.size() && i < blocking.size() && i < ok.size(); ++i) {
      run.failed_checkpoints += ok[i] == 0.0;
      if (!steps.empty() && at[i] >= steps.back()) continue;
      ++run.checkpoints;
      run.checkpoint_blocking_ms += blocking[i];
    }
    run.step_ms = after_warmup(step_ms);
    run.comm_exposed_ms = after_warmup(series_or_empty(path, "comm_exposed_ms"));
    const std::vector<double> skipped = series_or_empty(path, "skipped");
    for (size_t i = 0; i < skipped.size() && i < steps.size(); ++i)
      if (skipped[i] != 0) run.skipped_steps.push_back(static_cast<int64_t>(steps[i]));
    const std::vector<double> scale = series_or_empty(path, "loss_scale");
    for (size_t i = 1; i < scale.size(); ++i) run.loss_scale_events += scale[i] < scale[i - 1];
    for (int c = 0; c < static_cast<int>(MemoryCategory::Count); ++c) {
      const std::vector<double> peak = series_or_empty(
          path, std::string("memory/") + memory_category_name(static_cast<MemoryCategory>(c)) + "_peak_bytes");
      if (!peak.empty()) run.peak_bytes_per_rank += *std::max_element(peak.begin(), peak.end());
    }
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + " (is '" + dir + "' a finished or running trident run?)");
  }
  auto number = [&](const char* key) { return run.deck.count(key) ? std::stoi(run.deck[key]) : 1; };
  run.pipeline = number("parallel.pipeline");
  run.world = number("parallel.tensor") * run.pipeline * number("parallel.data");
  if (run.pipeline > 1) {  // per step, the stages' idle share of the pipeline phase, averaged (as in the summary)
    std::vector<double> share(static_cast<size_t>(run.steps), 0.0);
    for (int s = 0; s < run.pipeline; ++s) {
      const std::string stage = "stage" + std::to_string(s) + "/";
      const std::vector<double> idle = series_or_empty(path, stage + "bubble_ms");
      const std::vector<double> forward = series_or_empty(path, stage + "forward_ms");
      const std::vector<double> backward = series_or_empty(path, stage + "backward_ms");
      for (size_t i = 0; i < share.size() && i < idle.size() && i < forward.size() && i < backward.size(); ++i)
        share[i] += idle[i] / std::max(1e-9, idle[i] + forward[i] + backward[i]) / run.pipeline;
    }
    run.bubble_share = after_warmup(share);
    run.micro_batches = number("train.global_batch") / (number("train.micro_batch") * number("parallel.data"));
    if (run.deck.count("parallel.schedule")) run.schedule = run.deck["parallel.schedule"];
    auto total = [&](int s, const char* name) {  // over the steps after the first, of the stage's busiest rank
      const std::vector<double> values = after_warmup(series_or_empty(path, "stage" + std::to_string(s) + "/" + name));
      return std::accumulate(values.begin(), values.end(), 0.0);
    };
    std::vector<pipeline::PassTimes> stage_times;
    for (int s = 0; s < run.pipeline; ++s) {
      const double weights = total(s, "weights_ms");  // absent in runs before zero-bubble schedules: 0
      stage_times.push_back({total(s, "forward_ms"), total(s, "backward_ms") - weights, weights});
    }
    const bool timed = std::any_of(stage_times.begin(), stage_times.end(), [](const pipeline::PassTimes& t) {
      return t.forward + t.input_gradient + t.weight_gradient > 0;
    });
    const pipeline::Schedule schedule = pipeline::parse_schedule(run.schedule);
    const int chunks = number("parallel.virtual_stages");  // 1 where the run's deck predates the key
    if (chunks > 1) run.schedule += " interleaved, v = " + std::to_string(chunks);
    run.schedule_bubble = timed ? pipeline::implied_bubble(schedule, run.micro_batches, stage_times, chunks)
                                : pipeline::bubble_fraction(schedule, run.pipeline, run.micro_batches, 0, 0, 0, chunks);
  }
  run.budget_bytes = budget_bytes(budget_gb, run, run.budget_source);
  return run;
}

int run_doctor(comm::Communicator& world, const std::vector<std::string>& args) {
  po::options_description options;
  options.add_options()("help,h", "")("budget_gb", po::value<double>(), "")("dirs", po::value<std::vector<std::string>>(), "");
  const po::variables_map values = cli::parse_without_deck(args, options, "dirs", kDoctorUsage);
  if (values.count("help")) {
    print0(kDoctorUsage);
    return kExitOk;
  }
  if (!values.count("dirs")) fatal_all(std::string("give at least one run directory\n") + kDoctorUsage);
  std::vector<diag::RunFigures> runs;
  const double given_gb = values.count("budget_gb") ? values["budget_gb"].as<double>() : 0.0;
  for (const std::string& dir : values["dirs"].as<std::vector<std::string>>()) {
    runs.push_back(read_run_figures(dir, given_gb));
  }
  std::vector<std::string> checked;
  const std::vector<diag::Finding> findings = diag::diagnose(runs, diag::Thresholds{}, checked);
  print0("trident doctor: " + std::to_string(runs.size()) + (runs.size() == 1 ? " run" : " runs"));
  for (const std::string& line : checked) print0("  checked " + line);
  if (findings.empty()) print0("no findings");
  for (const diag::Finding& f : findings)
    print0("finding: " + f.rule + "\n  evidence: " + f.evidence + "\n  remedy: " + f.remedy);
  return kExitOk;
}

}  // namespace trident
