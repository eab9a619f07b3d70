// Recompute chosen by the memory model.
#include "job/memory_plan.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "comm/group_collectives.hpp"
#include "model/kv_cache.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "comm/agreement.hpp"
#include "comm/world.hpp"
#include "core/mpi_util.hpp"
#include "deck/validate.hpp"
#include "job/job.hpp"
#include "job/model_setup.hpp"
#include "kernels/backend.hpp"
#include "pipeline/schedule.hpp"

namespace trident {
namespace {

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  return text;
}

int64_t busiest_total(const plan::MemoryInputs& in) {
  int64_t total = 0;
  plan::estimate_busiest(in, &total);
  return total;
}

// Parameters, gradients and optimizer state of the busiest stage: what recompute cannot change.
int64_t fixed_bytes(const plan::MemoryInputs& in) {
  int64_t fixed = 0;
  plan::EstimateCache cache;
  for (int stage = 0; stage < in.pipeline; ++stage) {
    const plan::MemoryEstimate e = plan::estimate_stage(in, stage, &cache);
    fixed = std::max(fixed, e.total() - e.bytes[static_cast<int>(MemoryCategory::Activations)]);
  }
  return fixed;
}

// Per stage, the most shared windows a rank of it holds: one per group whose f32 all-reduces go
// through shared memory (a window is made at the first) — the tensor group, the data group (its
// all-reduce of f32 gradients; ZeRO's reduce-scatter and all-gather, and 16-bit gradients
// (comm.grad_dtype), stay on the ring) and the embedding group of a tied head (an untied one
// sums nothing there).
std::vector<int> shared_windows(const RunSettings& run, const layout::Grid& grid, const topo::Topology& topology,
                                const model::GptConfig& config) {
  const comm::CollectiveSettings& settings = run.comm.collectives;
  std::vector<int> per_stage(grid.pp_size(), 0);
  if (settings.node_algo != comm::Algo::Shm) return per_stage;
  const bool data_on_ring = run.step.zero > 0 || run.reduce.grad_dtype != DType::f32;
  for (int rank = 0; rank < grid.world_size(); ++rank) {
    int windows = 0;
    for (layout::GroupKind kind : {layout::GroupKind::Tensor, layout::GroupKind::Data, layout::GroupKind::Embedding})
      if (!(kind == layout::GroupKind::Data && data_on_ring) &&
          !(kind == layout::GroupKind::Embedding && !model::tied_head(config)))
        windows += comm::uses_shared_window(topology, grid.group(kind, rank), rank, settings) ? 1 : 0;
    int& stage = per_stage[grid.coord_of(rank).pp];
    stage = std::max(stage, windows);
  }
  return per_stage;
}

// "2.5 GiB", or "1.7 MiB" below a GiB (a budget of a few MB reads "0.0 GiB" otherwise).
std::string bytes_text(double bytes) {
  char text[32];
  if (bytes < 1073741824.0) std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  else std::snprintf(text, sizeof text, "%.1f GiB", bytes / 1073741824.0);
  return text;
}

// This host's memory as the processes see it: the RAM, or less where a cgroup (a container, a
// Slurm job) limits it. 0 if neither can be read.
double host_memory_bytes() {
  double bytes = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kib = 0;
    meminfo >> kib;
    if (key == "MemTotal:") bytes = kib * 1024;
    meminfo.ignore(1 << 10, '\n');
  }
  for (const char* limit : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(limit);
    double value = 0;
    if (in >> value && value > 0 && (bytes == 0 || value < bytes)) bytes = value;  // "max" reads as nothing
  }
  return bytes;
}

// What the world ranks sharing `memory` need beyond it, each by its stage's estimate (`held`:
// as memory_shortfall's).
std::string memory_problem(const plan::MemoryInputs& in, const layout::Grid& grid, const ModelMemory& memory,
                           double held) {
  double needed = 0;
  plan::EstimateCache cache;
  for (int rank : memory.ranks) {
    const plan::MemoryEstimate e = plan::estimate_stage(in, grid.coord_of(rank).pp, &cache);
    // A device's ranks stage an asynchronous checkpoint in pinned host memory, not the device's.
    const int64_t host_side = memory.device ? e.bytes[static_cast<int>(MemoryCategory::Checkpoint)] : 0;
    needed += static_cast<double>(e.total() - host_side);
  }
  return memory_shortfall(needed, memory, held);
}

// What `who` (its `total` bytes by the memory model) needs beyond memory.budget_gb ("" when it
// fits or no budget is set).
std::string budget_shortfall(const RunSettings& settings, const deck::Record& deck, int64_t total,
                             const std::string& who) {
  const double budget = settings.memory.budget_gb * 1e9;
  if (budget <= 0 || static_cast<double>(total) <= budget) return "";
  return who + " needs " + bytes_text(static_cast<double>(total)) + " by the memory model, " +
         bytes_text(static_cast<double>(total) - budget) + " more than " + deck.cite("memory.budget_gb");
}

// The whole-model commands' verdict: `total` bytes on each of the ranks sharing `memory` (`who`
// names one) beyond memory.budget_gb, or together beyond that memory (`held`: as
// memory_shortfall's); "" when they fit.
std::string whole_model_shortfall(const RunSettings& settings, const deck::Record& deck, int64_t total,
                                  const std::string& who, const ModelMemory& memory, double held) {
  const std::string problem = budget_shortfall(settings, deck, total, who);
  if (!problem.empty()) return problem;
  return memory_shortfall(static_cast<double>(total) * static_cast<double>(memory.ranks.size()), memory, held);
}

}  // namespace

std::string memory_shortfall(double needed, const ModelMemory& memory, double held) {
  if (memory.bytes <= 0) return "";
  const size_t ranks = memory.ranks.size();
  const std::string who = "the " + count_of(ranks, "rank") + " on " + memory.name + (ranks == 1 ? " needs " : " need ") +
                          bytes_text(needed) + " by the memory model, ";
  if (needed > memory.bytes)
    return who + bytes_text(needed - memory.bytes) + " more than its " + bytes_text(memory.bytes) +
           (memory.device ? " of device memory" : " of memory");
  const double free = memory.bytes - held;
  if (held <= 0 || needed <= free) return "";
  return who + bytes_text(needed - free) + " more than the " + bytes_text(free) + " free of its " +
         bytes_text(memory.bytes) + " at start-up: " + bytes_text(held) +
         " is held by the CUDA contexts of its ranks and by other processes (nvidia-smi lists them)";
}

namespace {

// The advice to shard more where the run does not fit: the next ZeRO stage (none past 3).
std::string more_sharding(const RunSettings& settings) {
  const int zero = settings.step.zero;
  return zero < 3 ? "set optim.zero = " + std::to_string(zero + 1) + " (or up to 3), " : std::string();
}

// The world ranks of this host (real hosts, not the emulated nodes of topology.ranks_per_node)
// with the same `device` (its identity; "" for the host's memory), collective over the world.
std::vector<int> ranks_on_this_host_with(comm::Communicator& world, const std::string& device) {
  const std::unique_ptr<comm::Communicator> host = comm::split_by_host(world, "host");
  const std::unique_ptr<comm::Communicator> group = comm::split_by_value(*host, device, "ranks on one device");
  const int32_t me = world.rank();
  std::vector<int32_t> ranks(static_cast<size_t>(group->size()));
  group->all_gather_values(&me, ranks.data(), 1, DType::i32, Stream{}).wait();
  return std::vector<int>(ranks.begin(), ranks.end());
}

}  // namespace

std::vector<int> ranks_on_this_host(comm::Communicator& world) { return ranks_on_this_host_with(world, ""); }

ModelMemory host_model_memory(comm::Communicator& world) {
  ModelMemory memory;
  memory.ranks = ranks_on_this_host(world);
  memory.bytes = host_memory_bytes();
  memory.name = "host " + host_name();
  return memory;
}

// On a device, the ranks of this host on the same device: the same physical GPU (its identity:
// under srun --gpus-per-task=1 every rank's one GPU is its device 0, and they are not one), or the
// guarded backend's one emulated device, as large as kernels.guard_memory_gb says.
ModelMemory model_memory(comm::Communicator& world, const kernels::Context& device, const KernelSettings& kernels) {
  const kernels::Backend& backend = kernels::backend_of(device);
  const bool emulated = std::string(backend.name()) == "guard";
  const double device_bytes = emulated ? kernels.guard_memory_gb * 1e9 : backend.device_memory().total;
  if (device_bytes <= 0) return host_model_memory(world);
  ModelMemory memory;
  memory.device = true;
  const int index = backend.device().index;
  const std::string identity = backend.device_identity();
  const std::string indexed = std::string(backend.name()) + ":" + std::to_string(index);
  memory.ranks = ranks_on_this_host_with(world, identity.empty() ? indexed : identity);
  memory.bytes = device_bytes;
  // After the collective above: by then each sharing rank has made its context on the device.
  if (!emulated) memory.held = std::max(0.0, device_bytes - backend.device_memory().free);
  memory.name = "device " + indexed + (identity.empty() ? "" : " (" + identity + ")") + " of host " + host_name();
  return memory;
}

// Each memory counted by the lowest world rank that shares it (ranks: in world order).
int memories_in_job(comm::Communicator& world, const ModelMemory& memory) {
  int32_t counted = !memory.ranks.empty() && memory.ranks.front() == world.rank() ? 1 : 0;
  world.all_reduce(&counted, 1, DType::i32, comm::Op::Sum, Stream{}).wait();
  return counted;
}

std::string micro_batch_shortfall(const kernels::Context& device, const RunSettings& settings,
                                  const deck::Record& deck, const layout::Grid& grid, const model::GptConfig& config,
                                  const topo::Topology* topology, const RecomputeChoice& recompute,
                                  const std::vector<int>& split, int micro_batch, int micro_batches,
                                  const ModelMemory& memory) {
  plan::MemoryInputs in = memory_inputs(device, settings, grid, config, topology);
  in.recompute = recompute.mode;
  in.recompute_interval = recompute.interval;
  in.stage_layers = pipeline::stage_totals(split, in.pipeline);
  if (in.virtual_stages > 1) in.chunk_layers = split;
  in.micro_batch = micro_batch;
  in.micro_batches = micro_batches;
  int64_t total = 0;
  plan::estimate_busiest(in, &total);
  const std::string problem = budget_shortfall(settings, deck, total, "the busiest rank");
  return problem.empty() ? memory_problem(in, grid, memory, 0.0) : problem;  // held: partly this job's own
}

void check_whole_model_fits(comm::Communicator& world, const kernels::Context& device, const RunSettings& settings, const deck::Record& deck,
                            const model::GptConfig& config, const std::string& command) {
  // The serial layout's estimate without what only training allocates: the optimizer's moments
  // and the checkpoint's staging copies. Parameters, gradients (the model allocates them with
  // its parameters) and one micro-batch's activations remain.
  plan::MemoryInputs in = memory_inputs(device, settings, layout::Grid(1, 1, 1), config);
  in.recompute = "none";
  in.recompute_interval = 0;
  plan::MemoryEstimate estimate = plan::estimate_busiest(in);
  estimate.bytes[static_cast<int>(MemoryCategory::OptimizerState)] = 0;
  estimate.bytes[static_cast<int>(MemoryCategory::Checkpoint)] = 0;
  const int64_t total = estimate.total();
  const ModelMemory memory = model_memory(world, device, settings.kernels);  // collective: every rank calls it
  std::string problem = whole_model_shortfall(settings, deck, total, "the whole model", memory, memory.held);
  if (!problem.empty())
    problem = "trident " + command + " builds the whole model on each rank and it does not fit in memory: " + problem +
              " (" + describe_estimate(estimate, total, false) + "); use a smaller model (model.layers, model.hidden) "
              "or a lower train.micro_batch";
  comm::agree_on_first_error(world, problem);
}

void check_decoder_fits(comm::Communicator& world, const kernels::Context& device, const RunSettings& settings,
                        const deck::Record& deck, const model::GptConfig& config, int positions) {
  const int64_t decoder = model::KvDecoder::buffer_bytes(config, positions);
  const ModelMemory memory = model_memory(world, device, settings.kernels);  // collective: every rank calls it
  const int64_t read = memory.device ? 0 : model::num_parameters(config) * int64_t(sizeof(float));  // WholeModel's
  const int64_t total = decoder + read;
  std::string problem = whole_model_shortfall(settings, deck, total, "the decoder", memory, memory.held);
  if (!problem.empty())
    problem = "trident generate's decoder does not fit in memory: " + problem + " (the model's " +
              std::to_string(model::num_parameters(config)) + " parameters in f32" + (read ? " twice" : "") +
              " and a key/value cache of " + std::to_string(std::min(positions, config.max_seq_len)) +
              " positions); use a smaller model, or a shorter prompt and fewer --tokens";
  comm::agree_on_first_error(world, problem);
}

void check_parameters_fit_host(comm::Communicator& world, const RunSettings& settings, const deck::Record& deck,
                               const model::GptConfig& config, const std::string& command) {
  const int64_t bytes = model::num_parameters(config) * int64_t(sizeof(float));
  const ModelMemory host = host_model_memory(world);  // collective: every rank calls it
  std::string problem = whole_model_shortfall(settings, deck, bytes, "the model's parameters", host, 0.0);
  if (!problem.empty())
    problem = "trident " + command + " holds the whole model's " + std::to_string(model::num_parameters(config)) +
              " parameters in f32 in host memory on each rank and they do not fit: " + problem +
              "; use a smaller model (model.layers, model.hidden) or fewer ranks on the host";
  comm::agree_on_first_error(world, problem);
}

void check_memory_fits(comm::Communicator& world, const kernels::Context& device, const RunSettings& settings, const deck::Record& deck,
                       const layout::Grid& grid, const model::GptConfig& config,
                       const topo::Topology* topology, const RecomputeChoice& recompute) {
  plan::MemoryInputs in = memory_inputs(device, settings, grid, config, topology);
  in.recompute = recompute.mode;
  in.recompute_interval = recompute.interval;
  int64_t total = 0;
  const plan::MemoryEstimate estimate = plan::estimate_busiest(in, &total);
  std::string problem = budget_shortfall(settings, deck, total, "the busiest rank");
  // The same branch on every rank: ranks_on_this_host is collective.
  if (problem.empty()) {
    const ModelMemory memory = model_memory(world, device, settings.kernels);
    problem = memory_problem(in, grid, memory, memory.held);  // before the model's first buffer
  }
  if (!problem.empty())
    problem = "the run does not fit in memory: " + problem + " (per rank: " + describe_estimate(estimate, total, false) +
              "; " + deck.cite("memory.recompute") + "); use a smaller model (model.layers, model.hidden), add "
              "pipeline stages or tensor parallelism, " + more_sharding(settings) + "lower train.micro_batch, or use "
              "memory.recompute = auto with memory.budget_gb";
  comm::agree_on_first_error(world, problem);
}

plan::MemoryInputs memory_inputs(const kernels::Context& device, const RunSettings& settings,
                                 const layout::Grid& grid, const model::GptConfig& config,
                                 const topo::Topology* topology) {
  plan::MemoryInputs in;
  in.config = config;
  in.tensor = grid.tp_size();
  in.pipeline = grid.pp_size();
  in.data = grid.dp_size();
  in.stage_layers = stage_layer_counts(settings, in.pipeline);
  in.micro_batch = settings.train.micro_batch;
  in.seq_len = settings.train.seq_len;
  in.sequence_parallel = settings.parallel.sequence_parallel && in.tensor > 1;
  in.context = grid.cp_size();
  in.tp_comm_overlap = in.sequence_parallel && settings.parallel.tp_comm_overlap;
  in.micro_batches = static_cast<int>(settings.train.micro_batches);
  in.schedule = pipeline::parse_schedule(settings.step.schedule);
  in.virtual_stages = settings.parallel.virtual_stages;
  in.chunk_layers = virtual_layer_counts(settings);
  in.recompute = settings.memory.recompute;
  in.recompute_interval = settings.memory.recompute_interval;
  in.flash_attention = settings.model.flash_attention;
  in.classifier_chunk = settings.model.classifier_chunk;
  in.zero = settings.step.zero;
  in.bucket_mb = settings.reduce.bucket_mb;
  in.grad_bytes = dtype_size(settings.reduce.grad_dtype);
  in.async_checkpoint = settings.checkpoint.async;
  in.precision = settings.precision.name;
  in.low16_widened = kernels::widens_low16(device, settings.precision.precision);
  in.cpu_kernels = kernels::backend_of(device).runs_cpu_kernels();
  in.cuda_kernels = std::string(kernels::backend_of(device).name()) == "cuda";
  in.gelu_epilogues = settings.kernels.gelu_epilogues;
  in.portable_arithmetic = device.arithmetic == kernels::Arithmetic::portable;
  in.cpu_threads = omp_get_max_threads();
  if (topology) in.shared_windows = shared_windows(settings, grid, *topology, config);
  return in;
}

RecomputeChoice choose_recompute(const kernels::Context& device, const RunSettings& settings,
                                 const deck::Record& deck, const layout::Grid& grid, const model::GptConfig& config,
                                 const topo::Topology* topology) {
  plan::MemoryInputs in = memory_inputs(device, settings, grid, config, topology);
  const double budget = settings.memory.budget_gb * 1e9;
  const bool auto_mode = in.recompute == "auto", auto_k = in.recompute == "every_k" && in.recompute_interval == 0;
  if ((auto_mode || auto_k) && budget <= 0)
    fatal_all(deck.cite(auto_mode ? "memory.recompute" : "memory.recompute_interval") +
              " chooses by the memory budget, and memory.budget_gb is 0 (" + deck.cite("memory.budget_gb") +
              "); give the memory per rank in GB, e.g. --memory.budget_gb=16, or choose the mode");
  const int most_layers = *std::max_element(in.stage_layers.begin(), in.stage_layers.end());
  // The seed's K = sqrt(2 x available / one block's activations), within 1 .. the stage's blocks.
  auto formula_k = [&] {
    const double available = budget - static_cast<double>(fixed_bytes(in));
    const double k = std::floor(std::sqrt(std::max(0.0, 2.0 * available / plan::block_activation_bytes(in))));
    return static_cast<int>(std::max(1.0, std::min<double>(k, most_layers)));
  };
  auto total = [&](const std::string& mode, int k) {  // per rank, of the busiest rank
    plan::MemoryInputs with = in;
    with.recompute = mode;
    with.recompute_interval = k;
    return busiest_total(with);
  };
  auto fits = [&](const std::string& mode, int k) { return budget <= 0 || total(mode, k) <= budget; };
  // ZB-H1 keeps every block's GEMM inputs for its weight-gradient pass (deck::check_schedule).
  const bool keeps_all = in.schedule == pipeline::Schedule::ZeroBubbleH1;
  RecomputeChoice choice{in.recompute, in.recompute == "full" ? 1 : in.recompute_interval, "memory.recompute"};
  if (auto_k) {  // the formula's K, or the nearest that fits (the formula ignores backward's scratch)
    const int k = formula_k();
    choice = {"every_k", k, "memory.recompute_interval = 0: K = sqrt(2 x available / one block's activations)"};
    for (int step = 1; !fits("every_k", choice.interval) && step <= most_layers; ++step)
      for (int candidate : {k - step, k + step})
        if (candidate >= 1 && candidate <= most_layers && fits("every_k", candidate)) {
          choice = {"every_k", candidate, "the formula's K = " + std::to_string(k) + " does not fit; the nearest that does"};
          break;
        }
  } else if (auto_mode) {
    const int k = formula_k();
    const std::pair<std::string, int> order[] = {{"none", 0}, {"selective", 0}, {"every_k", k}, {"full", 1}};
    choice.mode.clear();
    for (const auto& [mode, interval] : order)
      if ((!keeps_all || interval == 0) && fits(mode, interval)) {
        choice = {mode, interval, "memory.recompute = auto: the cheapest that fits memory.budget_gb"};
        break;
      }
  }
  if (choice.mode.empty() || (auto_k && !fits(choice.mode, choice.interval))) {
    const int64_t least = keeps_all ? total("selective", 0) : total("full", 1);
    const std::string mode = !choice.mode.empty() ? "memory.recompute = " + choice.mode
                             : keeps_all        ? "selective recompute (the most parallel.schedule = zb-h1 allows)"
                                                : "even full recompute";
    fatal_all("the run does not fit " + deck.cite("memory.budget_gb") + ": " + mode + " needs " + mib(least) +
              " per rank, " + mib(least - static_cast<int64_t>(budget)) +
              " more than the budget; add pipeline stages or tensor parallelism, " + more_sharding(settings) +
              "or lower train.micro_batch");
  }
  if (choice.mode != "every_k" && choice.mode != "full") choice.interval = 0;
  return choice;
}

std::string describe_estimate(const plan::MemoryEstimate& estimate, int64_t busiest_total, bool bytes) {
  std::string text;
  for (int c = 0; c < plan::kCategories; ++c) {
    const char* name = memory_category_name(static_cast<MemoryCategory>(c));
    text += (text.empty() ? "" : bytes ? " " : ", ") + std::string(name) + (bytes ? "=" : " ") +
            (bytes ? std::to_string(estimate.bytes[c]) : mib(estimate.bytes[c]));
  }
  return text + (bytes ? " total=" + std::to_string(busiest_total) : ", total " + mib(busiest_total));
}

}  // namespace trident
