// The planner's inputs from a deck.
#include "job/plan_inputs.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "comm/agreement.hpp"
#include "core/error.hpp"
#include "deck/schema.hpp"
#include "job/model_setup.hpp"
#include "job/threads.hpp"
#include "kernels/kernels.hpp"
#include "pipeline/schedule.hpp"

namespace trident {

// inputs/hardware/NAME.ini from the working directory or beside the executable, or a path.
std::string profile_path(const std::string& name) {
  if (name.find('/') != std::string::npos || (name.size() > 4 && name.substr(name.size() - 4) == ".ini")) return name;
  const std::string relative = "inputs/hardware/" + name + ".ini";
  if (std::filesystem::exists(relative)) return relative;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);  // build/bin/trident
  if (!ec && std::filesystem::exists(exe.parent_path() / "../.." / relative))
    return (exe.parent_path() / "../.." / relative).lexically_normal().string();
  return relative;
}

plan::Hardware load_hardware(comm::Communicator& world, const std::string& name, const std::string& named_by) {
  const std::string path = profile_path(name);
  const std::string text = comm::read_on_root_and_broadcast(
      world, path, "hardware profile (" + named_by + ")", "name " TRIDENT_HARDWARE_PROFILES ", this-host (written by trident "
      "plan --calibrate) or the path of a profile");
  try {
    return plan::parse_hardware(text, path);
  } catch (const std::invalid_argument& e) {
    fatal_all(std::string(e.what()));
  }
}

plan::Workload workload_from(const RunSettings& settings, const deck::Record& deck) {
  plan::Workload w;
  w.config = model_config(settings.model, deck);
  w.seq_len = settings.train.seq_len;
  w.global_batch = settings.train.global_batch;
  w.flash_attention = settings.model.flash_attention;
  w.library_attention = settings.kernels.library_attention;
  w.gelu_epilogues = settings.kernels.gelu_epilogues;
  w.classifier_chunk = settings.model.classifier_chunk;
  return w;
}

plan::Layout layout_from(const RunSettings& settings, const plan::Hardware& hw) {
  plan::Layout l;
  l.tensor = settings.parallel.tensor;
  l.pipeline = settings.parallel.pipeline;
  l.data = settings.parallel.data;
  l.micro_batch = settings.train.micro_batch;
  l.zero = settings.step.zero;
  l.recompute = settings.memory.recompute;
  if (l.recompute == "auto") l.recompute = "none";  // the search tries every mode
  l.recompute_interval = std::max<int>(1, settings.memory.recompute_interval);
  l.schedule = pipeline::parse_schedule(settings.step.schedule);
  l.virtual_stages = settings.parallel.virtual_stages;
  l.sequence_parallel = settings.parallel.sequence_parallel;
  l.context = settings.parallel.context;
  l.tp_comm_overlap = settings.parallel.tp_comm_overlap;
  l.precision = settings.precision.name;
  const std::string& algo = settings.comm.collectives.algo;
  l.hierarchical = algo == "auto" || algo == "hierarchical";
  l.overlap = settings.reduce.overlap;
  l.bucket_mb = settings.reduce.bucket_mb;
  l.gradient_bytes = static_cast<double>(dtype_size(settings.reduce.grad_dtype));
  for (int64_t n : settings.parallel.stage_layers) l.stage_layers.push_back(static_cast<int>(n));
  // The CPU backend's kernels and their workspaces (widened 16-bit GEMMs, 16-bit outputs' sums): this host.
  l.cpu_kernels = hw.name.rfind("this-host", 0) == 0;
  l.low16_widened = l.cpu_kernels && kernels::widens_low16(kernels::Context{}, precision_from_name(l.precision));
  l.cpu_threads = l.cpu_kernels ? openmp_threads_for(hw.devices_per_node) : 1;  // as each rank will run
  return l;
}

std::vector<deck::Override> layout_overrides(const plan::Layout& l) {
  return {{"parallel.tensor", std::to_string(l.tensor)},
          {"parallel.pipeline", std::to_string(l.pipeline)},
          {"parallel.data", std::to_string(l.data)},
          {"parallel.stage_layers", ""},
          {"train.micro_batch", std::to_string(l.micro_batch)},
          {"memory.recompute", l.recompute},
          {"parallel.schedule", pipeline::schedule_name(l.schedule)},
          {"parallel.virtual_stages", std::to_string(l.virtual_stages)},
          {"parallel.sequence_parallel", l.sequence_parallel ? "true" : "false"},
          {"parallel.context", std::to_string(l.context)},
          {"parallel.tp_comm_overlap", l.tp_comm_overlap ? "true" : "false"},
          {"optim.zero", std::to_string(l.zero)}};
}

std::vector<deck::Override> without_keys_of(const std::vector<deck::Override>& overrides,
                                            const std::vector<deck::Override>& replacements) {
  std::vector<deck::Override> kept;
  for (const deck::Override& o : overrides)
    if (std::none_of(replacements.begin(), replacements.end(), [&](const deck::Override& r) { return r.first == o.first; }))
      kept.push_back(o);
  return kept;
}

}  // namespace trident
