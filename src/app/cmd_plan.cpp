// `trident plan DECK [--gpus=N|A-B] [--hardware=PROFILE] [--json] [--audit samples_per_s=X]
// [--emit-deck=FILE] [--calibrate]`: memory, step time and scaling of the deck's model on any
// layout and cluster, in one process, from shapes only (src/plan/). Works the same under
// mpirun; rank 0 prints.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/log.hpp"
#include "deck/deck.hpp"
#include "deck/schema.hpp"
#include "plan/png_plot.hpp"
#include "plan/report.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "bench/gemm_probe.hpp"
#include "comm/nccl/nccl.hpp"
#include "job/job.hpp"
#include "job/model_setup.hpp"
#include "job/plan_inputs.hpp"
#include "pipeline/schedule.hpp"
#include "tensor/buffer.hpp"

namespace trident {
namespace {

struct PlanFlags {
  std::vector<int> gpus;  // empty: the deck's tensor x pipeline x data
  std::string hardware;  // empty: the deck's parallel.hardware
  bool json = false, calibrate = false;
  int top = 10;
  double audit_samples_per_s = 0;
  std::string emit_deck, calibrate_out, links, plot;
  plan::Implementation implementation = plan::Implementation::trident;  // --as
};

const char* kUsage =
    "usage: trident plan DECK [--gpus=N | --gpus=A-B | --gpus=N1,N2,...] [--hardware=PROFILE] [--json]\n"
    "                    [--top=K] [--audit samples_per_s=X] [--emit-deck=FILE] [--plot=PNG] [--as=trident|megatron|torchtitan]\n"
    "                    [--section.key=value ...]\n"
    "       trident plan DECK --calibrate[=FILE] [--links=LINKS_INI]\n"
    "One process, no ranks, nothing model-sized allocated. PROFILE: a name in inputs/hardware/\n"
    "(" TRIDENT_HARDWARE_PROFILES ", this-host) or the path of a profile; the deck's parallel.hardware\n"
    "when not given. --gpus=A-B: every\n"
    "power of two from A to B, the scaling curve. --audit: the FLOP/s a throughput claim implies\n"
    "against the peak and the model's best. --calibrate: this host's profile from a GEMM probe on\n"
    "the deck's shapes, a memory-bandwidth probe — on the deck's kernels.device: the CPU's cores, or\n"
    "the rank's GPU — and commbench's links.ini (RUN_DIR/links.ini).\n"
    "--as: whose costs where implementations differ — trident (the default: what trident train runs),\n"
    "megatron (Megatron-LM's dropout, 16-bit activation messages and fused 16-bit element-wise passes,\n"
    "pipeline messages scattered over the tensor ranks and gathered again) or torchtitan (16-bit\n"
    "activation messages, compiled 16-bit element-wise passes, and its activation checkpointing:\n"
    "every_k as its per-layer AC, one block in K recomputed; selective as its per-op AC, every second\n"
    "matmul, the element-wise passes and the all-gathers recomputed), to predict their published runs.\n";

int positive_int(const std::string& text, const std::string& flag) {
  try {
    size_t used = 0;
    const long value = std::stol(text, &used);
    if (used == text.size() && value >= 1 && value <= (1L << 24)) return static_cast<int>(value);
  } catch (const std::exception&) {
  }
  fatal_all("command line: " + flag + " takes a positive whole number, not '" + text + "' (trident plan --help)");
}

std::vector<int> gpu_counts(const std::string& text) {
  std::vector<int> counts;
  const size_t dash = text.find('-');
  if (dash != std::string::npos) {  // every power of two from A to B, and B
    const int lo = positive_int(text.substr(0, dash), "--gpus"), hi = positive_int(text.substr(dash + 1), "--gpus");
    if (hi < lo) fatal_all("command line: --gpus=" + text + " is an empty range; give A-B with A <= B");
    for (long n = lo; n <= hi; n *= 2) counts.push_back(static_cast<int>(n));
    if (counts.back() != hi) counts.push_back(hi);
    return counts;
  }
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) counts.push_back(positive_int(item, "--gpus"));
  return counts;
}

// Takes the plan's own flags out of `args`; the rest is the deck and its overrides.
PlanFlags take_plan_flags(std::vector<std::string>& args) {
  PlanFlags flags;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag) { return a.substr(flag.size() + 1); };
    if (a.rfind("--gpus=", 0) == 0) flags.gpus = gpu_counts(value("--gpus"));
    else if (a.rfind("--hardware=", 0) == 0) flags.hardware = value("--hardware");
    else if (a == "--json") flags.json = true;
    else if (a.rfind("--top=", 0) == 0) flags.top = positive_int(value("--top"), "--top");
    else if (a.rfind("--emit-deck=", 0) == 0) flags.emit_deck = value("--emit-deck");
    else if (a.rfind("--links=", 0) == 0) flags.links = value("--links");
    else if (a.rfind("--plot=", 0) == 0) flags.plot = value("--plot");
    else if (a.rfind("--as=", 0) == 0) {
      try {
        flags.implementation = plan::parse_implementation(value("--as"));
      } catch (const std::invalid_argument&) {
        fatal_all("command line: --as takes trident, megatron or torchtitan, not '" + value("--as") + "' (trident plan --help)");
      }
    }
    else if (a == "--calibrate") flags.calibrate = true;
    else if (a.rfind("--calibrate=", 0) == 0) flags.calibrate = true, flags.calibrate_out = value("--calibrate");
    else if (a == "--audit" || a.rfind("--audit=", 0) == 0) {
      const std::string claim = a == "--audit" ? (i + 1 < args.size() ? args[++i] : "") : value("--audit");
      if (claim.rfind("samples_per_s=", 0) != 0)
        fatal_all("command line: --audit takes samples_per_s=X (e.g. --audit samples_per_s=680), not '" + claim + "'");
      char* end = nullptr;
      flags.audit_samples_per_s = std::strtod(claim.c_str() + 14, &end);
      if (*end || !(flags.audit_samples_per_s > 0) || !std::isfinite(flags.audit_samples_per_s))
        fatal_all("command line: --audit samples_per_s= takes a positive number, not '" + claim.substr(14) + "'");
    } else rest.push_back(a);
  }
  args = rest;
  return flags;
}

std::string read_text(const std::string& path, const std::string& what, const std::string& hint) {
  std::string text, why;
  if (!read_file(path, kMaxConfigBytes, text, why)) fatal_all(what + " '" + path + "': " + why + "; " + hint);
  return text;
}

std::string describe_model(const plan::Workload& w) {
  char text[200];
  std::snprintf(text, sizeof text, "%.4g B parameters (%d layers, width %d, %d heads, vocabulary %d), sequence %d, "
                "%lld sequences per step", model::num_parameters(w.config) / 1e9, w.config.layers, w.config.channels,
                w.config.heads, w.config.padded_vocab, w.seq_len, static_cast<long long>(w.global_batch));
  return text;
}

// Per ZeRO stage: how many of its layouts fit, and its fastest that does (or, where none does,
// the one that needs least memory) — which stage makes the model fit, at what speed.
void print_stages(const std::vector<plan::Candidate>& ranked) {
  static const char* const what[] = {"", " (distributed optimizer)",
                                     " (gradients sharded too)",
                                     " (parameters sharded too, FSDP)"};
  for (int zero : {0, 1, 2, 3}) {
    int layouts = 0, fit = 0;
    const plan::Candidate* first = nullptr;  // ranked: the fastest that fits, else the smallest
    for (const auto& c : ranked) {
      if (c.layout.zero != zero) continue;
      ++layouts;
      fit += c.estimate.feasible ? 1 : 0;
      if (!first) first = &c;
    }
    if (layouts == 0) continue;
    const plan::Layout& l = first->layout;
    char text[320];
    std::snprintf(text, sizeof text, "  optim.zero = %d%s: %d of %d layouts fit; %s tensor %d x pipeline %d x data %d, "
                  "micro-batch %d, recompute %s: %.1f GB per device", zero, what[zero], fit, layouts,
                  fit ? "fastest" : "least memory:",
                  l.tensor, l.pipeline, l.data, l.micro_batch, l.recompute.c_str(), first->estimate.memory_total / 1e9);
    std::string line = text;
    if (fit) {
      std::snprintf(text, sizeof text, ", %.4g tokens/s", first->estimate.tokens_per_s);
      line += text;
    }
    print0(line);
  }
}

void print_ranking(const std::vector<plan::Candidate>& ranked, const PlanFlags& flags) {
  int feasible = 0;
  for (const auto& c : ranked) feasible += c.estimate.feasible ? 1 : 0;
  print0(std::to_string(ranked.size()) + " runnable layouts, " + std::to_string(feasible) + " fit in memory; by ZeRO stage:");
  print_stages(ranked);
  print0("the best " + std::to_string(std::min(flags.top, feasible)) + " by predicted tokens/s:");
  print0(plan::table_header());
  for (int i = 0; i < feasible && i < flags.top; ++i) print0(plan::table_row(ranked[i], i + 1));
  if (feasible < static_cast<int>(ranked.size())) {
    print0("closest that do not fit (least memory first):");
    for (int i = feasible; i < static_cast<int>(ranked.size()) && i < feasible + 3; ++i)
      print0(plan::table_row(ranked[i], i + 1));
  }
}

// The best layout as a deck: the input deck with the layout's keys overridden, resolved.
void emit_deck(const cli::CommandLine& line, const std::string& text, const plan::Candidate& best,
               const std::string& path) {
  const plan::Layout& l = best.layout;
  const std::vector<deck::Override> keys = layout_overrides(l);
  const deck::Deck chosen = deck::Deck::parse(line.deck_path, text, without_keys_of(line.overrides, keys), keys);
  std::ofstream out(path);
  out << chosen.to_ini("written by trident plan from " + line.deck_path + ": the best predicted layout, " +
                       std::to_string(l.devices()) + " ranks");
  if (!out) fatal_all("--emit-deck=" + path + ": cannot write the file; give a writable path");
  print0("wrote " + path + " (" + std::to_string(l.devices()) + " ranks: tensor " + std::to_string(l.tensor) +
         " x pipeline " + std::to_string(l.pipeline) + " x data " + std::to_string(l.data) + ")");
}

// The scaling curve as a PNG (--plot).
void write_plot(const std::vector<plan::CurvePoint>& curve, const std::string& path) {
  std::vector<plan::PlotPoint> points;
  for (const plan::CurvePoint& p : curve)
    points.push_back({double(p.devices), p.best ? p.best->estimate.tokens_per_s : 0, p.negative});
  std::ofstream out(path, std::ios::binary);
  out << plan::scaling_plot_png(points);
  if (!out) fatal_all("--plot=" + path + ": cannot write the file; give a writable path");
  print0("wrote " + path + " (predicted tokens/s against devices; red: slower than fewer devices)");
}

int calibrate(comm::Communicator& world, const cli::CommandLine& line, const std::string& text,
              const RunSettings& settings, const deck::Record& deck, const plan::Workload& w, const PlanFlags& flags);  // below

}  // namespace

int run_plan(comm::Communicator& world, const std::vector<std::string>& args) {
  std::vector<std::string> rest = args;
  const PlanFlags flags = take_plan_flags(rest);
  const cli::CommandLine line = cli::parse_command_line("plan", rest);
  if (line.help) {
    print0(std::string(kUsage) + "\n" + cli::command_help("plan"));
    return kExitOk;
  }
  const std::string text = read_text(line.deck_path, "deck", "give the path of an INI input deck (examples in inputs/)");
  const deck::Deck deck = deck::Deck::parse(line.deck_path, text, line.overrides);
  const RunSettings settings = read_settings(deck);
  const deck::Record record(deck);
  plan::Workload w = workload_from(settings, record);
  plan::model_implementation(w, flags.implementation);
  if (flags.calibrate) return calibrate(world, line, text, settings, record, w, flags);
  const std::string profile = flags.hardware.empty() ? settings.parallel.hardware : flags.hardware;
  const plan::Hardware hw =
      load_hardware(world, profile, flags.hardware.empty() ? deck.cite("parallel.hardware") : "--hardware=" + profile);
  const plan::Layout base = layout_from(settings, hw);
  const std::string problem = plan::layout_problem(w, base);
  const plan::Candidate declared{base, problem.empty() ? plan::estimate_step(w, base, hw) : plan::StepEstimate{}};
  const std::vector<int> counts = flags.gpus.empty() ? std::vector<int>{base.devices()} : flags.gpus;
  const std::vector<plan::CurvePoint> curve = plan::scaling_curve(w, base, counts, hw);
  if (flags.json) {
    if (problem.empty()) print0(plan::layout_json(declared, plan::scaling_efficiency(w, base, hw), "deck", 0));
    for (const plan::CurvePoint& p : curve)
      for (size_t i = 0; i < p.ranked.size(); ++i)
        print0(plan::layout_json(p.ranked[i], p.ranked[i].estimate.feasible ? plan::scaling_efficiency(w, p.ranked[i].layout, hw) : 0,
                                 "search", static_cast<int>(i) + 1));
  } else {
    print0("trident plan: " + describe_model(w) + "; hardware " + hw.name + " (" + profile_path(profile) + ")" +
           (flags.implementation == plan::Implementation::megatron
                ? "; Megatron-LM's costs (--as=megatron: dropout, 16-bit activation messages and element-wise passes, "
                  "scatter/gather pipeline messages)"
            : flags.implementation == plan::Implementation::torchtitan
                ? "; TorchTitan's costs (--as=torchtitan: 16-bit activation messages and element-wise passes, its "
                  "per-layer (every_k) and per-op (selective) activation checkpointing)"
                : ""));
    print0(problem.empty() ? "the deck's layout:" : "the deck's layout is not runnable: " + problem);
    if (problem.empty()) {
      print0(plan::table_header() + "\n" + plan::table_row(declared, 0));
      print0(plan::breakdown(declared));
    }
    for (const plan::CurvePoint& p : curve) {
      print0("\n" + std::to_string(p.devices) + " devices:");
      print_ranking(p.ranked, flags);
      if (p.best) print0("the best, in parts:\n" + plan::breakdown(*p.best));
    }
    int best_count = 0;
    double best_rate = 0;
    for (const plan::CurvePoint& p : curve)
      if (p.best && p.best->estimate.tokens_per_s > best_rate) best_rate = p.best->estimate.tokens_per_s, best_count = p.devices;
    if (curve.size() > 1) print0("\n" + plan::curve_table(curve));
    // The seed's rule on the layout at hand: the deck's, or with a range the best at the most devices.
    const bool deck_reference = curve.size() == 1 && problem.empty() && declared.estimate.feasible;
    const plan::Candidate* reference = deck_reference ? &declared : curve.back().best;
    if (reference) print0("\n" + plan::seed_rule_table(plan::seed_rules(w, *reference, hw), curve.size() > 1 ? best_count : 0));
  }
  if (flags.audit_samples_per_s > 0) {
    if (!problem.empty()) fatal_all("--audit: the deck's layout is not runnable (" + problem + "); fix the deck's [parallel] keys");
    print0((flags.json ? "" : "\n") + plan::audit(w, hw, flags.audit_samples_per_s, counts.front(), declared, curve.front().best));
  }
  if (!flags.plot.empty()) write_plot(curve, flags.plot);
  if (!flags.emit_deck.empty()) {
    if (!curve.back().best) fatal_all("--emit-deck: no layout of " + std::to_string(counts.back()) + " devices fits; nothing written");
    emit_deck(line, text, *curve.back().best, flags.emit_deck);
  }
  return kExitOk;
}

namespace {

struct Rates {
  double gemm_flops_per_s, other_bytes_per_s;
  // A GPU's (cuBLASLt's), or oneDNN's native bf16 matmul where this CPU has one, else the f32 rate.
  double bf16_gemm_flops_per_s;
  std::vector<plan::GemmPoint> shapes;  // each distinct shape's rate, f32 (and native bf16)
  bool gpu = false;         // measured on this rank's GPU (kernels.device = cuda), else on its threads
  double gpu_memory = 0;    // that GPU's bytes
  // What its runtime held beside the probe's buffers and the kernels' pool at the end (the CUDA
  // context with the modules loaded, cuBLASLt's workspaces): the device's used memory less every
  // tracked byte (host ones too: the figure errs low) and the pool's.
  double gpu_reserved = 0;
  kernels::Backend::DeviceFacts facts;
  std::string where;        // "this host's CPU", "the guard backend", "GPU cuda:0 NVIDIA H200 (GPU-…)"
};

// The pass's distinct shapes as profile points of `precision`.
void add_shape_rates(GemmPass& pass, double pass_seconds, const std::string& precision,
                     std::vector<plan::GemmPoint>& points) {
  for (const ShapeRate& r : pass.shape_rates(3, pass_seconds))
    points.push_back({precision, double(r.shape.batch), double(r.shape.M), double(r.shape.N), double(r.shape.K),
                      r.flops_per_s});
}

// The device a probe runs on, before its rates: whether a GPU, its memory and facts, its name.
Rates probed_device(const kernels::Backend& backend, const std::string& device) {
  Rates rates;
  rates.gpu = backend.device().kind == DeviceKind::cuda;
  if (!rates.gpu) {
    rates.where = device == "cpu" ? "this host's CPU" : "the " + device + " backend";
    return rates;
  }
  rates.gpu_memory = backend.device_memory().total;
  rates.facts = backend.device_facts();
  const std::string identity = backend.device_identity();
  rates.where = "GPU cuda:" + std::to_string(backend.device().index) + " " + rates.facts.name +
                (identity.empty() ? "" : " (" + identity + ")");
  return rates;
}

// On one rank, on the deck's kernels.device (this process's threads, or its GPU): the GEMM rate of
// the deck's micro-batch shapes, and the rate of everything else in a real step (element-wise
// kernels, the optimizer) expressed as the bandwidth at which the step model's element-wise and
// optimizer bytes take the time that a step of 2 micro-batches spends outside its GEMMs. Median
// of alternating turns. Collective over `world` (the device chosen as a job's).
Rates probe_rates(comm::Communicator& world, const cli::CommandLine& line, const std::string& text,
                  const plan::Workload& w) {
  const int64_t B = read_settings(deck::Deck::parse(line.deck_path, text, line.overrides)).train.micro_batch;
  // The deck's model on one rank: its micro-batch, every other layout key at its one-rank value,
  // replacing any the command line gave (a key given twice is a deck error).
  plan::Layout one_rank_layout;
  one_rank_layout.micro_batch = static_cast<int>(B);
  std::vector<deck::Override> probe = layout_overrides(one_rank_layout);
  // No graphs: the probe times GEMMs apart from the step, which a replay does not show (and the CPU
  // records none).
  probe.insert(probe.end(),
               {{"train.global_batch", std::to_string(2 * B)}, {"optim.precision", "fp32"}, {"cuda.graphs", "false"}});
  std::vector<deck::Override> one_rank = without_keys_of(line.overrides, probe);
  one_rank.insert(one_rank.end(), probe.begin(), probe.end());
  const deck::Deck deck = deck::Deck::parse(line.deck_path, text, one_rank);
  RunSettings settings = read_settings(deck);
  const deck::Record record(deck);
  const kernels::Context here = device_context(world, settings, record);
  const kernels::Backend& backend = kernels::backend_of(here);
  Rates rates = probed_device(backend, settings.kernels.device);
  GemmPass gemm(here, w.config, static_cast<int>(B), w.seq_len);
  StepRunner step(here, settings, record, kernels::Precision::fp32);
  std::vector<double> gemm_s, step_s;
  for (int turn = 0; turn < 6; ++turn) {
    const double g = gemm.run(), t = step.run();
    if (turn > 0) gemm_s.push_back(g), step_s.push_back(t);
  }
  // The step model's bytes of that step: its times at 1 byte/s and an unlimited GEMM rate.
  plan::Hardware unit;
  unit.peak_fp32 = 1e30, unit.memory_bandwidth = 1, unit.devices_per_node = 1, unit.nodes_per_rack = 1;
  plan::Workload one = w;
  one.global_batch = 2 * B;
  plan::Layout layout;
  layout.micro_batch = static_cast<int>(B);
  const plan::StepEstimate bytes = plan::estimate_step(one, layout, unit);
  const double other_s = std::max(median(step_s) - 2 * median(gemm_s), 0.05 * median(step_s));
  rates.gemm_flops_per_s = rates.bf16_gemm_flops_per_s = gemm.flops() / median(gemm_s);
  rates.other_bytes_per_s = (2 * bytes.stages[0].elementwise_s + bytes.optimizer_s) / other_s;
  add_shape_rates(gemm, median(gemm_s), "fp32", rates.shapes);
  if (rates.gpu || kernels::native_low16_gemm_available(kernels::Precision::bf16)) {
    GemmPass native(here, w.config, static_cast<int>(B), w.seq_len, true);
    std::vector<double> native_s;
    for (int turn = 0; turn < 4; ++turn) native_s.push_back(native.run());
    rates.bf16_gemm_flops_per_s = native.flops() / median(native_s);
    add_shape_rates(native, median(native_s), "bf16", rates.shapes);
    if (rates.gpu) {  // every probe's buffers alive, its modules loaded
      const kernels::Backend::DeviceMemory memory = backend.device_memory();
      const double pool = backend.device_facts().pool_reserved;  // now, not at the start
      // Our buffers in device memory alone: host and pinned ones are not in the GPU's used memory.
      rates.gpu_reserved =
          std::max(0.0, memory.total - memory.free - static_cast<double>(memory_usage().device_current) - pool);
    }
  }
  return rates;
}

int calibrate(comm::Communicator& world, const cli::CommandLine& line, const std::string& text,
              const RunSettings& settings, const deck::Record& deck, const plan::Workload& w, const PlanFlags& flags) {
  const std::string links_path = flags.links.empty() ? settings.train.run_dir + "/links.ini" : flags.links;
  const std::string links = read_text(links_path, "links.ini", "run trident commbench with this deck first (it writes "
                                      "RUN_DIR/links.ini), or give --links=FILE");
  const ParallelSettings& layout = settings.parallel;
  const int ranks = layout.tensor * layout.context * layout.pipeline * layout.data;
  const int per_node = settings.topology.ranks_per_node > 0 ? settings.topology.ranks_per_node : ranks;
  plan::Hardware hw;
  hw.name = "this-host";
  hw.devices_per_node = per_node;
  hw.nodes_per_rack = settings.topology.nodes_per_rack > 0 ? settings.topology.nodes_per_rack : ranks / per_node;
  try {
    plan::apply_links_ini(links, hw);
  } catch (const std::exception& e) {
    fatal_all(links_path + ": " + e.what());
  }
  const Rates rates = probe_rates(world, line, text, w);
  // The ranks of a job on this host share its cores: one rank's share of the rates; a GPU is one
  // rank's own (NCCL's one rank per GPU), or shared by a node's ranks beyond its GPUs (MPI's) — the
  // GPUs this process sees, a node's when it runs alone on one.
  const double cores = std::thread::hardware_concurrency(), threads = omp_get_max_threads();
  const double share = rates.gpu ? std::min(1.0, double(comm::cuda_devices_visible()) / per_node)
                                 : std::min(1.0, cores / (threads * ranks));
  hw.peak_fp32 = rates.gemm_flops_per_s * share;
  hw.peak_bf16 = rates.bf16_gemm_flops_per_s * share;
  hw.peak_fp16 = rates.gpu ? hw.peak_bf16 : hw.peak_fp32;
  hw.gemm_fraction = 1;  // the probe measured the achieved rate itself
  hw.memory_bandwidth = rates.other_bytes_per_s * share;
  hw.gemm_table = rates.shapes;
  for (plan::GemmPoint& p : hw.gemm_table) p.flops_per_s *= share;
  hw.memory_bytes = rates.gpu ? rates.gpu_memory * share : double(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) / ranks;
  hw.reserved_bytes = rates.gpu_reserved;
  hw.compute_units = rates.facts.compute_units;
  hw.shared_memory_bytes = rates.facts.block_shared_memory;
  const std::string out = flags.calibrate_out.empty() ? "inputs/hardware/this-host.ini" : flags.calibrate_out;
  const std::string probe = "measured by trident plan --calibrate on " + rates.where;
  const std::string whose = rates.gpu ? share < 1 ? "one rank's share of the node's GPUs" : "the GPU's"
                                      : "one rank's share of the cores";
  // commbench times MPI over host memory: on GPUs a job's NCCL links may be faster (NVLink).
  const std::string links_source = links_path + (rates.gpu ? " (trident commbench: MPI over host memory, not NCCL)" : "");
  const std::string bf16_source =
      rates.gpu ? probe + ": the same GEMMs in bf16 (cuBLASLt), the GPU's"
      : kernels::native_low16_gemm_available(kernels::Precision::bf16)
          ? probe + ": the same GEMMs in oneDNN's native bf16, one rank's share"
          : "the f32 rate: this CPU has no native bf16 matmul, 16-bit GEMMs run widened to f32";
  const std::map<std::string, std::string> sources = {
      {"device.memory_gb", rates.gpu ? "the GPU's memory (" + rates.where + "), " + whose
                                     : "this host's RAM / " + std::to_string(ranks) + " ranks"},
      {"device.peak_tflops_fp32", probe + ": the model's f32 GEMMs (trident bench --gemm), " + whose},
      {"device.peak_tflops_bf16", bf16_source},
      {"device.peak_tflops_fp16", rates.gpu ? "the bf16 rate (the same tensor cores)"
                                            : "the f32 rate (oneDNN 2.6 has no f16 CPU matmul: widened)"},
      {"device.gemm_fraction", "1: the peak figures are the achieved GEMM rate"},
      {"device.reserved_gb", rates.gpu ? probe + ": the device's used memory beside the probe's buffers and its kernels' "
                                                  "pool (the CUDA context, cuBLASLt's workspaces)"
                                       : "0: a CPU's tensors are all the memory model counts"},
      {"device.compute_units", rates.gpu ? "the GPU's SMs (cudaDevAttrMultiProcessorCount)" : "0: no waves modelled (a CPU)"},
      {"device.shared_memory_kb", rates.gpu ? "the GPU's opt-in shared memory per block" : "0: a CPU"},
      {"device.nccl_mb_per_group", rates.gpu ? "0: not measured (NCCL's buffers per communicator; the GPU profiles "
                                               "assume 200, inputs/hardware/h100-80gb-dgx.ini)" : "0: no NCCL on a CPU"},
      {"device.comm_interference", rates.gpu ? "0: not measured (the GPU profiles assume 0.12: NCCL's SMs while it "
                                               "overlaps compute)" : "0: a CPU's communication waits in MPI"},
      {"gemm", probe + ": each distinct GEMM shape of the model alone (PRECISION.[BATCHx]MxNxK = TFLOP/s), " + whose +
               "; the step model times each product at the nearest (plan/gemm_model.hpp)"},
      {"device.memory_bandwidth_gbps", probe + ": a one-rank step's time outside its GEMMs over the model's element-wise "
                                       "and optimizer bytes (trident bench's step), " + whose},
      {"cluster.devices_per_node", "topology.ranks_per_node of " + deck.file_name()},
      {"cluster.nodes_per_rack", "topology.nodes_per_rack of " + deck.file_name()},
      {"link.node_latency_us", links_source}, {"link.node_bandwidth_gbps", links_source},
      {"link.rack_latency_us", links_source}, {"link.rack_bandwidth_gbps", links_source},
      {"link.cross_rack_latency_us", links_source}, {"link.cross_rack_bandwidth_gbps", links_source}};
  const std::string profile = plan::format_hardware(hw, "# this host, " + count_of(ranks, "rank") + ", " +
                                                        probe + " on " + deck.file_name() + "'s shapes\n", sources);
  if (world.rank() == 0) {
    // The default's folder is made where a run directory is (profile_path reads it there first).
    std::error_code ec;
    const std::filesystem::path folder = std::filesystem::path(out).parent_path();
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    const std::string problem = ec ? folder.string() + ": " + ec.message() : write_atomically(out, {{profile.data(), profile.size()}});
    if (!problem.empty()) fatal_all("--calibrate=" + out + ": cannot write the profile (" + problem + "); give a writable path");
  }
  print0("wrote " + out + ":\n" + profile);
  return kExitOk;
}

}  // namespace
}  // namespace trident
