// Tables, JSON and the audit of `trident plan`.
#include "plan/report.hpp"

#include <cmath>
#include <cstdio>

#include "core/json.hpp"
#include "model/params.hpp"

namespace trident::plan {
namespace {

std::string format(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char text[256];
  std::snprintf(text, sizeof text, fmt, a, b, c, d);
  return text;
}

// "1f1b", "zb-h1", or interleaved "1f1b v3".
std::string schedule_label(const Layout& l) {
  return pipeline::schedule_name(l.schedule) + (l.virtual_stages > 1 ? " v" + std::to_string(l.virtual_stages) : "");
}

// The tensor degree: "4sp" with sequence parallelism, "4spo" with its collectives overlapped.
std::string tensor_label(const Layout& l) {
  return std::to_string(l.tensor) + (l.splits_rows() ? (l.tp_comm_overlap ? "spo" : "sp") : "");
}

std::string layout_name(const Layout& l) {
  std::string text = format("tensor %g x pipeline %g x data %g, micro-batch %g", l.tensor, l.pipeline, l.data,
                            l.micro_batch);
  if (l.splits_rows()) text += ", sequence parallel";
  if (l.context > 1) text += format(", context %g", l.context);
  if (l.pipeline > 1) text += ", " + schedule_label(l);
  text += ", recompute " + l.recompute + (l.zero ? ", ZeRO-" + std::to_string(l.zero) : "");
  return text;
}

double max_stage(const StepEstimate& e, double StageTime::*part) {
  double most = 0;
  for (const StageTime& s : e.stages) most = std::max(most, s.*part);
  return most;
}

}  // namespace

double scaling_efficiency(const Workload& w, const Layout& l, const Hardware& hw) {
  if (l.data == 1) return 1;
  Workload one = w;
  one.global_batch = w.global_batch / l.data;
  Layout alone = l;
  alone.data = 1;
  alone.zero = 0;
  return estimate_step(one, alone, hw).step_s / estimate_step(w, l, hw).step_s;
}

std::string layout_json(const Candidate& c, double efficiency, const std::string& source, int rank) {
  const Layout& l = c.layout;
  const StepEstimate& e = c.estimate;
  const double m = e.micro_batches;
  Json memory = Json::object();
  for (int k = 0; k < kCategories; ++k) memory[memory_category_name(static_cast<MemoryCategory>(k))] = e.memory.bytes[k];
  memory["total"] = e.memory_total;  // the tensors'
  memory["runtime"] = e.runtime_bytes;
  memory["allocation_slack"] = e.allocation_slack_bytes;
  memory["device_total"] = double(e.memory_total) + e.runtime_bytes;
  Json row = {{"source", source},
              {"rank", rank},
              {"devices", l.devices()},
              {"tensor", l.tensor},
              {"pipeline", l.pipeline},
              {"data", l.data},
              {"micro_batch", l.micro_batch},
              {"micro_batches", e.micro_batches},
              {"recompute", l.recompute},
              {"zero", l.zero},
              {"precision", l.precision},
              {"schedule", pipeline::schedule_name(l.schedule)},
              {"virtual_stages", l.virtual_stages},
              {"sequence_parallel", l.splits_rows()},
              {"context", l.context},
              {"tp_comm_overlap", l.tp_comm_overlap},
              {"feasible", e.feasible},
              {"reason", e.reason},
              {"memory_bytes", memory},
              {"buffers", e.memory.buffers},  // alive at once on the busiest rank: each one cudaMalloc
              {"headroom_bytes", e.headroom_bytes},
              {"step_time_s", e.step_s},
              {"pipeline_s", e.pipeline_s},
              {"bubble_s", e.bubble_s},
              {"compute_s", max_stage(e, &StageTime::compute_s) * m},
              {"elementwise_s", max_stage(e, &StageTime::elementwise_s) * m},
              {"tensor_comm_s", max_stage(e, &StageTime::tensor_s) * m},
              {"pipeline_comm_s", max_stage(e, &StageTime::p2p_s) * m},
              {"data_comm_s", e.data_s},
              {"data_exposed_s", e.data_exposed_s},
              {"embedding_comm_s", e.embedding_s},
              {"optimizer_s", e.optimizer_s},
              {"tokens_per_s", e.tokens_per_s},
              {"tflops_per_device", e.tflops_per_device},
              {"hardware_tflops_per_device", e.hardware_tflops_per_device},
              {"mfu", e.mfu},
              {"scaling_efficiency", efficiency}};
  return row.dump();  // a NaN or Inf is written as null
}

std::string table_header() {
  return "rank  tensor context pipeline  data micro schedule recompute  zero  mem/dev(GB) headroom(GB)   step(s)    tokens/s  TFLOP/s   MFU";
}

std::string table_row(const Candidate& c, int rank) {
  const Layout& l = c.layout;
  const StepEstimate& e = c.estimate;
  char text[256];
  std::snprintf(text, sizeof text, "%4d %7s %7d %8d %5d %5d %-8s %-10s %4s %12.1f %12.1f %9.3f %11.4g %8.1f %5.1f%%", rank,
                tensor_label(l).c_str(), l.context, l.pipeline, l.data, l.micro_batch, schedule_label(l).c_str(),
                l.recompute.c_str(), l.zero ? std::to_string(l.zero).c_str() : "no",
                (e.memory_total + e.runtime_bytes) / 1e9, e.headroom_bytes / 1e9, e.step_s, e.tokens_per_s, e.tflops_per_device,
                100 * e.mfu);
  return e.feasible ? text : std::string(text) + "\n        does not fit: " + e.reason;
}

std::string breakdown(const Candidate& c) {
  const StepEstimate& e = c.estimate;
  std::string out = "  " + layout_name(c.layout) + format(", %g micro-batches per step\n", e.micro_batches);
  out += format("  step %.4g s = pipeline %.4g s (bubble %.4g s) + exposed gradient reduction %.4g s", e.step_s,
                e.pipeline_s, e.bubble_s, e.data_exposed_s) +
         format(" (of %.4g s) + embedding %.4g s + optimizer %.4g s\n", e.data_s, e.embedding_s, e.optimizer_s);
  for (size_t s = 0; s < e.stages.size() && s < 4; ++s)
    out += format("  stage %g per micro-batch: compute %.4g s, element-wise %.4g s", double(s), e.stages[s].compute_s,
                  e.stages[s].elementwise_s) +
           format(", tensor collectives %.4g s, point-to-point %.4g s", e.stages[s].tensor_s, e.stages[s].p2p_s) +
           format(", context ring %.4g s\n", e.stages[s].context_s);
  if (e.stages.size() > 4) out += "  (" + std::to_string(e.stages.size() - 4) + " more stages)\n";
  const char* kinds[] = {"data", "tensor", "pipeline"};
  const std::array<double, 3>* bytes[] = {&e.data_bytes, &e.tensor_bytes, &e.pipeline_bytes};
  for (int k = 0; k < 3; ++k)
    out += std::string("  ") + kinds[k] + format(" bytes per rank per step: node %.4g GB, rack %.4g GB, cross-rack %.4g GB\n",
                                                 (*bytes[k])[0] / 1e9, (*bytes[k])[1] / 1e9, (*bytes[k])[2] / 1e9);
  return out;
}

std::string seed_rule_table(const std::vector<SeedRule>& rules, int model_best_devices) {
  std::string out = "seed §2.1: N = T_comp / (T_comm x alpha), from this layout's figures\n"
                    "  dimension  T_comp(s)   T_comm(s)  alpha       N\n";
  for (const SeedRule& r : rules)
    out += "  " + r.dimension + std::string(9 - r.dimension.size(), ' ') + format(" %10.4g  %10.4g  %.2f-%.2f", r.t_comp_s, r.t_comm_s, r.alpha_lo, r.alpha_hi) +
           (r.t_comm_s > 0 ? format("  %.3g-%.3g\n", r.n_lo, r.n_hi) : std::string("  (no communication)\n"));
  out += model_best_devices > 0 ? "  the model's best device count in the curve: " + std::to_string(model_best_devices) + "\n"
                                : "  (give --gpus=A-B for the model's best device count)\n";
  return out;
}

std::string curve_table(const std::vector<CurvePoint>& curve) {
  std::string out = "scaling: the best layout per device count (efficiency against the smallest count that fits)\n"
                    "  devices  tensor context pipeline  data micro schedule recompute      tokens/s  TFLOP/s/dev  efficiency\n";
  for (const CurvePoint& p : curve) {
    if (!p.best) {
      out += format(p.ranked.empty() ? "  %7g  no runnable layout (the batch, heads and layers allow none)\n"
                                     : "  %7g  nothing fits in memory\n", p.devices);
      continue;
    }
    const Layout& l = p.best->layout;
    char text[200];
    std::snprintf(text, sizeof text, "  %7d %7s %7d %8d %5d %5d %-8s %-10s %12.4g %12.1f %10.0f%%%s\n", p.devices,
                  tensor_label(l).c_str(), l.context,
                  l.pipeline, l.data, l.micro_batch, schedule_label(l).c_str(), l.recompute.c_str(),
                  p.best->estimate.tokens_per_s,
                  p.best->estimate.tflops_per_device, 100 * p.efficiency,
                  p.negative ? "  <- negative scaling: slower than fewer devices" : "");
    out += text;
  }
  return out;
}

std::string audit(const Workload& w, const Hardware& hw, double samples_per_s, int devices, const Candidate& claimed,
                  const Candidate* best) {
  const double per_token = model::training_flops_per_token(w.config, w.seq_len);
  const double implied = samples_per_s * w.seq_len * per_token;
  const double peak = devices * hw.peak(claimed.layout.precision);
  std::string out = "audit: the claim of " + format("%g samples/s on %g devices of ", samples_per_s, devices) + hw.name + "\n";
  out += format("  model FLOPs per token (6 per weight + attention) = %.4g; x %g tokens per sample x %g samples/s\n",
                per_token, w.seq_len, samples_per_s);
  out += format("  = %.4g PFLOP/s implied, against a peak of %g devices x %.4g TFLOP/s", implied / 1e15, devices,
                hw.peak(claimed.layout.precision) / 1e12) +
         format(" = %.4g PFLOP/s: %.3g x the peak\n", peak / 1e15, implied / peak);
  // The longest sequence at which the claim stays under the peak: samples·T·(6N' + 12·L·T·C) = peak.
  const double fixed = model::training_flops_per_token(w.config, 0), growth = 12.0 * w.config.layers * w.config.channels;
  const double a = samples_per_s * growth, b = samples_per_s * fixed;
  const double longest = (-b + std::sqrt(b * b + 4 * a * peak)) / (2 * a);
  out += implied > peak ? format("  IMPOSSIBLE: above the peak at this sequence length; under the peak only for sequences "
                                 "of at most %.0f tokens (at 100%% of peak, which no training reaches)\n", longest)
                        : format("  under the peak (%.0f%% of it); sequences up to %.0f tokens would stay under it\n",
                                 100 * implied / peak, longest);
  out += "  the claimed layout (" + layout_name(claimed.layout) + "): " +
         (claimed.estimate.feasible ? format("fits, predicted %.4g samples/s\n", claimed.estimate.tokens_per_s / w.seq_len)
                                    : "DOES NOT FIT: " + claimed.estimate.reason + "\n");
  if (best)
    out += "  the model's best on " + format("%g devices: ", devices) + layout_name(best->layout) +
           format(", %.4g samples/s (%.3g x the claim), MFU %.0f%%\n", best->estimate.tokens_per_s / w.seq_len,
                  best->estimate.tokens_per_s / w.seq_len / samples_per_s, 100 * best->estimate.mfu);
  else
    out += format("  no layout of %g devices fits this model in memory\n", devices);
  return out;
}

}  // namespace trident::plan
