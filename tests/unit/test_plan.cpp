// The planner (src/plan/): the α-β formulas against docs/COMMUNICATION.md, the step model's
// bubble and flop counts, the paper validation against Narayanan et al. 2021 Table 1
// (tests/data/ptdp_table1.csv) and Korthikanti et al. 2022's activation memory, and the
// hardware profiles' parser.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "deck/schema.hpp"
#include "kernels/kernels.hpp"
#include "model/params.hpp"
#include "plan/gemm_model.hpp"
#include "plan/report.hpp"

using namespace trident;
using namespace trident::plan;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " + path + " (run the unit tests from the repository root)");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Hardware a100() { return parse_hardware(slurp("inputs/hardware/a100-80gb-dgx.ini"), "a100-80gb-dgx.ini"); }

// A profile with round figures, for checking formulas by hand.
Hardware round_hardware() {
  Hardware hw;
  hw.name = "round";
  hw.memory_bytes = 1e12;
  hw.peak_fp32 = hw.peak_bf16 = hw.peak_fp16 = 1e12;
  hw.gemm_fraction = 0.5;
  hw.memory_bandwidth = 1e11;
  hw.devices_per_node = 4;
  hw.nodes_per_rack = 2;
  hw.links = {Link{1e-6, 1e10}, Link{1e-5, 1e9}, Link{1e-4, 1e8}};
  return hw;
}

struct PaperRow {
  double params_b;
  int heads, hidden, layers, tp, pp, gpus, global_batch, micro_batch;
  double tflops_per_gpu;
};

std::vector<PaperRow> paper_rows() {
  std::istringstream in(slurp("tests/data/ptdp_table1.csv"));
  std::vector<PaperRow> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("params_b", 0) == 0) continue;
    PaperRow r;
    BOOST_REQUIRE(std::sscanf(line.c_str(), "%lf,%d,%d,%d,%d,%d,%d,%d,%d,%lf", &r.params_b, &r.heads, &r.hidden,
                              &r.layers, &r.tp, &r.pp, &r.gpus, &r.global_batch, &r.micro_batch,
                              &r.tflops_per_gpu) == 10);
    rows.push_back(r);
  }
  return rows;
}

// The paper's setting: sequence 2048, vocabulary 51200, fp16, full recompute (its §5.1).
Workload paper_workload(const PaperRow& r) {
  Workload w;
  w.config = {2048, 51200, model::padded_vocab_for(51200), r.layers, r.heads, r.hidden};
  w.seq_len = 2048;
  w.global_batch = r.global_batch;
  model_implementation(w, Implementation::megatron);  // dropout, fp16 messages and element-wise passes
  return w;
}

Layout paper_layout(const PaperRow& r) {
  Layout l;
  l.tensor = r.tp, l.pipeline = r.pp, l.data = r.gpus / (r.tp * r.pp), l.micro_batch = r.micro_batch;
  l.precision = "fp16";
  l.recompute = "full";
  // Megatron-LM of 2021 (its local DDP) all-reduced the gradients after the backward: no overlap.
  l.overlap = false;
  return l;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(plan)

BOOST_AUTO_TEST_CASE(ring_all_reduce_is_alpha_beta_of_the_byte_formula) {
  const Hardware hw = round_hardware();
  std::array<double, 3> bytes{};
  // 4 ranks of one node: 2(n−1) = 6 latencies, 2(n−1)/n·S = 1.5·S bytes.
  const GroupShape node = group_shape({0, 1, 2, 3}, hw);
  BOOST_TEST(int(node.span) == int(Level::Node));
  const double s = all_reduce_seconds(8e6, node, hw, true, &bytes);
  BOOST_TEST(s == 6 * 1e-6 + 1.5 * 8e6 / 1e10, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(bytes[0] == 1.5 * 8e6);
}

// The tied embedding's sum between the first and the last stage (dp::GradientReducer::sum_tied):
// the whole (V/t, h) f32 gradient without ZeRO, the part a replica owns with it (a d-th), nothing
// for an untied head. Links without latency: a 2-rank all-reduce takes its bytes over the bandwidth.
BOOST_AUTO_TEST_CASE(the_tied_embedding_sum_moves_what_a_replica_holds) {
  Hardware hw = round_hardware();
  for (Link& link : hw.links) link.latency_s = 0;
  Workload w;
  w.config = {64, 1000, model::padded_vocab_for(1000), 4, 4, 64};
  w.seq_len = 64, w.global_batch = 16;
  Layout l;
  l.pipeline = 2, l.data = 4;
  const double whole = estimate_step(w, l, hw).embedding_s;
  l.zero = 1;
  const double owned = estimate_step(w, l, hw).embedding_s;
  BOOST_TEST(whole > 0);
  BOOST_TEST(owned * 4 == whole, boost::test_tools::tolerance(1e-9));  // 1024 · 64 elements split evenly
  w.config.arch = model::Arch::llama, w.config.kv_heads = 4, w.config.ffn_hidden = 128, w.config.tie_embeddings = false;
  BOOST_TEST(estimate_step(w, l, hw).embedding_s == 0);
  l.pipeline = 1, l.data = 8;
  w.config = {64, 1000, model::padded_vocab_for(1000), 4, 4, 64};
  BOOST_TEST(estimate_step(w, l, hw).embedding_s == 0);  // one stage holds the only copy
}

BOOST_AUTO_TEST_CASE(hierarchical_all_reduce_moves_one_kth_across_nodes) {
  const Hardware hw = round_hardware();
  std::vector<int> ranks(16);
  for (int i = 0; i < 16; ++i) ranks[i] = i;  // 4 per node, 2 nodes per rack, 2 racks
  const GroupShape g = group_shape(ranks, hw);
  BOOST_TEST(int(g.span) == int(Level::CrossRack));
  BOOST_TEST(g.per_node == 4);
  BOOST_TEST(g.nodes_per_rack == 2);
  BOOST_TEST(g.racks == 2);
  std::array<double, 3> bytes{};
  const double S = 4e6;
  const double t = all_reduce_seconds(S, g, hw, true, &bytes);
  // docs/COMMUNICATION.md: node 2(k−1)/k·S, rack 2(r−1)/r·S/k, cross-rack 2(q−1)/q·S/k.
  BOOST_TEST(bytes[0] == 1.5 * S);
  BOOST_TEST(bytes[1] == 1.0 * S / 4);
  BOOST_TEST(bytes[2] == 1.0 * S / 4);
  const double expected = (6e-6 + 1.5 * S / 1e10) + (2e-5 + S / 4 / 1e9) + (2e-4 + S / 4 / 1e8);
  BOOST_TEST(t == expected, boost::test_tools::tolerance(1e-12));
  // A flat ring over all 16 crosses racks at the cross-rack speed: far slower.
  BOOST_TEST(all_reduce_seconds(S, g, hw, false) == 30 * 1e-4 + 2.0 * 15 / 16 * S / 1e8,
             boost::test_tools::tolerance(1e-12));
}

// GEMM time by shape (plan/gemm_model.hpp): the last wave of 256 × 128 tiles, the roofline,
// and a profile without compute units at its one rate.
BOOST_AUTO_TEST_CASE(gemm_time_by_shape) {
  Hardware hw = round_hardware();  // 1 TFLOP/s at 0.5, 100 GB/s
  hw.compute_units = 4;
  const GemmShape whole{1, 512, 256, 4096}, partial{1, 768, 256, 4096}, ragged{1, 700, 256, 4096};
  BOOST_TEST(wave_efficiency(whole, hw) == 1.0);           // 2 x 2 tiles: one full wave
  BOOST_TEST(wave_efficiency(partial, hw) == 0.75);        // 3 x 2 tiles: two waves of 4, 6 busy
  BOOST_TEST(wave_efficiency(ragged, hw) == 700.0 / 1024, boost::test_tools::tolerance(1e-12));  // its 3rd row of tiles part-filled
  BOOST_TEST(gemm_seconds(partial, "bf16", hw) == partial.flops() / (1e12 * 0.5 * 0.75), boost::test_tools::tolerance(1e-12));
  // K = 2: 2·M·N·2 FLOPs (1.0 µs at 0.5 TFLOP/s) against 2·(M·2 + 2·N + M·N) bytes (2.6 µs at
  // 100 GB/s): memory-bound.
  const GemmShape thin{1, 512, 256, 2};
  BOOST_TEST(gemm_seconds(thin, "bf16", hw) == 2 * (512 * 2 + 2 * 256 + 512 * 256) / 1e11, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(gemm_seconds(thin, "fp32", hw) == 2 * gemm_seconds(thin, "bf16", hw), boost::test_tools::tolerance(1e-12));
  // The three products of training: the same FLOPs each.
  for (const GemmShape& g : with_gradients(partial)) BOOST_TEST(g.flops() == partial.flops());
  hw.compute_units = 0;  // a calibrated CPU profile: its measured rate, shapes included
  BOOST_TEST(gemm_seconds(thin, "bf16", hw) == thin.flops() / (1e12 * 0.5), boost::test_tools::tolerance(1e-12));
}

// The published per-shape measurements there are: the Maximum Achievable Matmul FLOPS table of
// stas00/ml-engineering (compute/accelerator/README.md, bf16, mamf-finder.py: the best of a scan
// of large shapes, M x N x K) — A100 SXM 267.9 TFLOP/s at 6912 x 16384 x 2048, H100 SXM 792.1 at
// 6144 x 17920 x 2816 (GH200 821.0 at 11264 x 19712 x 1536). A training step's GEMMs do not
// reach a lone GEMM's best: every GPU profile's shape model stays under the ceiling at its shape
// (A100 0.78 of peak, H100 and H200 0.65, the 500 W H100 0.47, against 0.859 and 0.801).
BOOST_AUTO_TEST_CASE(gpu_profiles_stay_under_the_published_matmul_ceiling) {
  struct Ceiling {
    const char* profile;
    GemmShape shape;
    double tflops;
  };
  for (const Ceiling& c : {Ceiling{"a100-80gb-dgx", {1, 6912, 16384, 2048}, 267.9},
                           Ceiling{"h100-80gb-dgx", {1, 6144, 17920, 2816}, 792.1},
                           Ceiling{"h100-500w", {1, 6144, 17920, 2816}, 792.1},
                           Ceiling{"h200", {1, 11264, 19712, 1536}, 821.0}}) {
    const std::string file = std::string(c.profile) + ".ini";
    const Hardware hw = parse_hardware(slurp("inputs/hardware/" + file), file);
    const double rate = c.shape.flops() / gemm_seconds(c.shape, "bf16", hw) / 1e12;
    BOOST_TEST(rate <= c.tflops, c.profile << ": " << rate << " TFLOP/s");
    BOOST_TEST(rate >= 0.5 * c.tflops, c.profile << ": " << rate << " TFLOP/s");  // and not absurdly under it
  }
}

// Measured rates ([gemm] in a profile): read and written back; a measured shape takes its
// measured time, another the shape model's ratio to the nearest measured one.
BOOST_AUTO_TEST_CASE(gemm_time_anchored_at_measured_shapes) {
  std::string text = slurp("inputs/hardware/a100-80gb-dgx.ini");
  text += "\n[gemm]\nbf16.8192x2304x768 = 200\nbf16.96x1024x1024x64 = 40  # the attention's q·kᵀ\n";
  const Hardware hw = parse_hardware(text, "with-gemm.ini");
  BOOST_REQUIRE(hw.gemm_table.size() == 2u);
  const Hardware again = parse_hardware(format_hardware(hw, "# again\n", {}), "again.ini");
  BOOST_REQUIRE(again.gemm_table.size() == 2u);
  for (int i = 0; i < 2; ++i) {
    BOOST_TEST(again.gemm_table[i].flops_per_s == hw.gemm_table[i].flops_per_s);
    BOOST_TEST(again.gemm_table[i].batch == hw.gemm_table[i].batch);
    BOOST_TEST(again.gemm_table[i].K == hw.gemm_table[i].K);
  }
  const GemmShape measured{1, 8192, 2304, 768}, near{1, 8192, 1152, 768}, scores{96, 1024, 1024, 64};
  BOOST_TEST(gemm_seconds(measured, "bf16", hw) == measured.flops() / 200e12, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(gemm_seconds(scores, "bf16", hw) == scores.flops() / 40e12, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(nearest_measured(near, "bf16", hw) == &hw.gemm_table[hw.gemm_table[0].batch == 1 ? 0 : 1]);
  BOOST_TEST(gemm_seconds(near, "bf16", hw) == shape_model_seconds(near, "bf16", hw) * (measured.flops() / 200e12) /
                                                    shape_model_seconds(measured, "bf16", hw),
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(nearest_measured(measured, "fp32", hw) == nullptr);  // none in f32: the shape model alone
  BOOST_TEST(gemm_seconds(measured, "fp32", hw) == shape_model_seconds(measured, "fp32", hw));
  for (const char* bad : {"bf8.64x64x64 = 1", "bf16.64x64 = 1", "bf16.64x0x64 = 1", "bf16.64x64x64 = -1", "bf16.64xax64 = 1"})
    BOOST_CHECK_THROW(parse_hardware(text + bad + "\n", "bad.ini"), std::invalid_argument);
}

// The stage's GEMMs add up to the FLOPs the papers count: with one rate for every product (no
// compute units, unbounded bandwidth) a stage's compute time is its FLOPs over that rate —
// 24C² + 4TC per token per block forward (GPT-2; on t = 2 ranks, halved), three passes, the head.
BOOST_AUTO_TEST_CASE(stage_gemms_are_the_counted_flops) {
  Hardware hw = round_hardware();
  hw.memory_bandwidth = 1e30;
  Workload w;
  w.config = {1024, 50257, model::padded_vocab_for(50257), 12, 12, 768};
  w.seq_len = 1024, w.global_batch = 8;
  Layout l;
  l.tensor = 2, l.micro_batch = 4;
  const double C = 768, T = 1024, tokens = 4 * T;
  const double block = (2 * (12 * C * C) + 4 * T * C) / 2, head = 2 * C * model::padded_vocab_for(50257) / 2.0;
  const double flops = 3 * tokens * (12 * block + head);
  BOOST_TEST(estimate_step(w, l, hw).stages[0].compute_s == flops / (1e12 * 0.5), boost::test_tools::tolerance(1e-9));
}

// The flash attention's backward as each implementation runs it: Trident's recomputes the scores
// in one kernel on the CPU (5 products: 2.5 forward passes) and in two on a GPU (7: 3.5); others'
// stay at the materialized count (2), as gemm_fraction was fitted. The difference is the
// products' FLOPs alone, 4·T·C per token and block forward, at peak · gemm_fraction.
BOOST_AUTO_TEST_CASE(flash_backward_counts_the_products_each_implementation_runs) {
  Hardware hw = round_hardware();
  hw.memory_bandwidth = 1e30;
  Workload w;
  w.config = {1024, 50257, model::padded_vocab_for(50257), 12, 12, 768};
  w.seq_len = 1024, w.global_batch = 2, w.flash_attention = true;
  Layout l;
  l.micro_batch = 2;
  const double attention_forward = 12 * 4.0 * 1024 * 768 * (2 * 1024) / (1e12 * 0.5);  // 12 blocks, the micro-batch
  for (Implementation who : {Implementation::megatron, Implementation::torchtitan, Implementation::trident}) {
    Workload x = w;
    model_implementation(x, who);
    BOOST_TEST(x.trident_flash_backward == (who == Implementation::trident));
  }
  Workload theirs = w;
  theirs.trident_flash_backward = false;
  const auto compute = [&](const Workload& x, const Hardware& h) { return estimate_step(x, l, h).stages[0].compute_s; };
  BOOST_TEST(compute(w, hw) - compute(theirs, hw) == 0.5 * attention_forward, boost::test_tools::tolerance(1e-9));
  hw.compute_units = 132;  // a GPU's profile
  BOOST_TEST(compute(w, hw) - compute(theirs, hw) == 1.5 * attention_forward, boost::test_tools::tolerance(1e-9));
}

// The element-wise terms of Trident's CUDA kernels: GPT-2 124M's shape with the flash attention,
// two sequences of 1024 (l), in bf16 on round_hardware with a GPU's compute units.
struct GpuElementwise {
  Hardware gpu = round_hardware();
  Workload w;
  Layout l;
  GpuElementwise() {
    gpu.compute_units = 132;
    w.config = {1024, 50257, model::padded_vocab_for(50257), 12, 12, 768};
    w.seq_len = 1024, w.global_batch = 2, w.flash_attention = true;
    l.micro_batch = 2, l.precision = "bf16";
  }
  static double seconds(const Workload& x, const Layout& y, const Hardware& h) {
    return estimate_step(x, y, h).stages[0].elementwise_s;
  }
};

// GPT-2's GELU in its GEMMs' epilogues (a GPU profile, 16 bits, cuda.gelu_epilogues = auto): the
// element-wise term loses the activation's pass (2·4h values a token read and written, 4 bytes each,
// forward, backward twice, and again when recomputed) and keeps the 16-bit pre-activation written
// (again when recomputed), read by DGELU, and dpre read for the bias gradient: 2 bytes a value
// each. A CPU profile, f32, cuda.gelu_epilogues = off and Megatron-LM's bias-GELU kernel keep the pass.
BOOST_FIXTURE_TEST_CASE(gelu_epilogues_leave_the_auxiliary_bytes_alone, GpuElementwise) {
  Workload off = w;
  off.gelu_epilogues = false;
  const double values = 12 * 2 * 1024.0 * 4 * 768;  // the (tokens, 4h) activation of 12 blocks
  BOOST_TEST(seconds(off, l, gpu) - seconds(w, l, gpu) == values * (3 * 2 * 4 - 3 * 2) / gpu.memory_bandwidth,
             boost::test_tools::tolerance(1e-9));
  Layout recomputing = l;
  recomputing.recompute = "full";
  BOOST_TEST(seconds(off, recomputing, gpu) - seconds(w, recomputing, gpu) ==
                 values * (4 * 2 * 4 - 4 * 2) / gpu.memory_bandwidth,
             boost::test_tools::tolerance(1e-9));
  Layout f32 = l;
  f32.precision = "fp32";
  BOOST_TEST(seconds(off, f32, gpu) == seconds(w, f32, gpu));
  BOOST_TEST(seconds(off, l, round_hardware()) == seconds(w, l, round_hardware()));
  Workload megatron = w, megatron_off = off;
  model_implementation(megatron, Implementation::megatron);
  model_implementation(megatron_off, Implementation::megatron);
  BOOST_TEST(seconds(megatron_off, l, gpu) == seconds(megatron, l, gpu));
  model_implementation(megatron, Implementation::trident);
  BOOST_TEST(seconds(megatron, l, gpu) == seconds(w, l, gpu));
}

// cuDNN's attention (cuda.attention_kernel = auto: a GPU profile, 16 bits, whole sequences): its
// backward's two passes of its own in the element-wise term — dy rounded to 16 bits (4 + 2 bytes a
// value of the (tokens, C) output) and dq, dk, dv widened to f32 (2 + 4 bytes a value of the
// (tokens, 3C) input). Not with our kernels (own), in f32, on a CPU profile or on a context ring.
BOOST_FIXTURE_TEST_CASE(cudnn_attention_backward_rounds_and_widens, GpuElementwise) {
  Workload own = w;
  own.library_attention = false;
  const double values = 12 * 2 * 1024.0 * 768;  // the (tokens, C) output of 12 blocks
  BOOST_TEST(seconds(w, l, gpu) - seconds(own, l, gpu) == values * (6 + 3 * 6) / gpu.memory_bandwidth,
             boost::test_tools::tolerance(1e-9));
  Layout f32 = l, ring = l;
  f32.precision = "fp32";
  ring.context = 2;
  for (const Layout& y : {f32, ring}) BOOST_TEST(seconds(w, y, gpu) == seconds(own, y, gpu));
  BOOST_TEST(seconds(w, l, round_hardware()) == seconds(own, l, round_hardware()));
}

// The loss's row passes over the logits on the last stage, Trident's (loss_passes): per logit of
// the (tokens, Vp/t) slice, the row maxima and Σ exp read f32 (4 + 4) and the gradient reads them
// and writes dlogits — 16-bit from the chunked classifier (4 + 2), f32 in place (4 + 4), or f32 in
// place and then narrowed for whole 16-bit logits (4 + 4 + 4 + 2); the chunked classifier on the
// whole vocabulary reads a row once where it fits on chip. Not on a stage without the head, not
// for the implementations gemm_fraction was fitted to.
BOOST_FIXTURE_TEST_CASE(the_loss_reads_and_writes_each_logit, GpuElementwise) {
  Workload none = w;
  none.loss_passes = false;
  const double logits = 2 * 1024.0 * model::padded_vocab_for(50257);  // the micro-batch's
  const auto loss = [&](const Workload& x, const Layout& y) {
    return (seconds(x, y, gpu) - seconds(none, y, gpu)) * gpu.memory_bandwidth / logits;
  };
  Workload chunked = w;
  chunked.classifier_chunk = 256;
  none.classifier_chunk = 256;
  BOOST_TEST(loss(chunked, l) == 14, boost::test_tools::tolerance(1e-9));
  none.classifier_chunk = 0;
  BOOST_TEST(loss(w, l) == 22, boost::test_tools::tolerance(1e-9));
  Layout f32 = l, tensor2 = l;
  f32.precision = "fp32";
  BOOST_TEST(loss(w, f32) == 16, boost::test_tools::tolerance(1e-9));
  tensor2.tensor = 2;  // each rank its half of the vocabulary
  BOOST_TEST(loss(w, tensor2) == 11, boost::test_tools::tolerance(1e-9));
  // One operation on the whole vocabulary where a row stays on chip: read once, dlogits written.
  // GPT-2's 50,257 f32 logits (196 KiB) fit an H100's 227 KiB block, not an A100's 163.
  gpu.shared_memory_bytes = 227 * 1024;
  BOOST_TEST(loss(chunked, l) == 4 + 2, boost::test_tools::tolerance(1e-9));
  Workload chunked_none = none;
  chunked_none.classifier_chunk = 256;
  const auto fused = [&](const Layout& y, const Hardware& h) {
    return (seconds(chunked, y, h) - seconds(chunked_none, y, h)) * h.memory_bandwidth / logits;
  };
  BOOST_TEST(fused(f32, gpu) == 4 + 4, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(fused(tensor2, gpu) == 14 / 2.0, boost::test_tools::tolerance(1e-9));  // the pieces, combined over the group
  BOOST_TEST(fused(l, round_hardware()) == 4 + 2, boost::test_tools::tolerance(1e-9));  // a CPU core's cache
  gpu.shared_memory_bytes = 163 * 1024;
  BOOST_TEST(fused(l, gpu) == 14, boost::test_tools::tolerance(1e-9));
  Layout pipeline2 = l;
  pipeline2.pipeline = 2;
  BOOST_TEST(estimate_step(w, pipeline2, gpu).stages[0].elementwise_s == estimate_step(none, pipeline2, gpu).stages[0].elementwise_s);
  BOOST_TEST(estimate_step(w, pipeline2, gpu).stages[1].elementwise_s > estimate_step(none, pipeline2, gpu).stages[1].elementwise_s);
  Workload megatron = w;
  model_implementation(megatron, Implementation::megatron);
  BOOST_TEST(!megatron.loss_passes);
  model_implementation(megatron, Implementation::trident);
  BOOST_TEST(megatron.loss_passes);
}

// The data-parallel reduction's bytes: one all-reduce of the gradients as comm.grad_dtype sends
// them; under ZeRO a reduce-scatter of those and an all-gather of the parameters (16-bit values
// in bf16), each half an all-reduce's bytes.
BOOST_AUTO_TEST_CASE(gradient_traffic_follows_grad_dtype_and_zero) {
  const Hardware hw = round_hardware();
  Workload w;
  w.config = {1024, 50257, model::padded_vocab_for(50257), 12, 12, 768};
  w.seq_len = 1024, w.global_batch = 8;
  Layout l;
  l.data = 4, l.micro_batch = 2, l.precision = "bf16", l.overlap = false;
  const double n = double(model::num_parameters(w.config));
  const StepEstimate f32 = estimate_step(w, l, hw);
  BOOST_TEST(f32.data_bytes[0] == 1.5 * n * 4, boost::test_tools::tolerance(1e-12));  // 2(n−1)/n of 4-byte values
  l.gradient_bytes = 2;
  const StepEstimate bf16 = estimate_step(w, l, hw);
  BOOST_TEST(bf16.data_bytes[0] == 1.5 * n * 2, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(bf16.data_s < f32.data_s);
  l.zero = 1;  // reduce-scatter of bf16 gradients + all-gather of bf16 parameters: one bf16 all-reduce's bytes
  BOOST_TEST(estimate_step(w, l, hw).data_bytes[0] == 1.5 * n * 2, boost::test_tools::tolerance(1e-12));
  l.gradient_bytes = 4;  // f32 reduce-scatter + bf16 all-gather
  BOOST_TEST(estimate_step(w, l, hw).data_bytes[0] == 1.5 * n * 3, boost::test_tools::tolerance(1e-12));
}

// ZeRO stages in the memory model, on the seed's 175B at tensor 8 × data 4 in bf16: bytes of
// parameters, gradients and optimizer state per parameter of a rank — 2 + 4 + 12 without,
// 2 + 4 + 12/4 with the distributed optimizer, 2 + 4/4 + 12/4 (and two buckets) with ZeRO-2,
// (2 + 4 + 12)/4 (and two gathered blocks) with ZeRO-3: issue 33's ~393, ~197, ~131 and ~98 GB.
// Trident's ZeRO-3 also keeps the embeddings whole with their gradients, and two slots of
// parameters and of gradients: 4.66; FSDP's (Workload::fsdp_prefetch) 4.5.
BOOST_AUTO_TEST_CASE(zero_stages_shard_the_state) {
  Workload w;
  w.config = {2048, 50257, model::padded_vocab_for(50257), 96, 96, 12288};
  w.seq_len = 2048, w.global_batch = 128;
  Layout l;
  l.tensor = 8, l.data = 4, l.micro_batch = 4, l.precision = "bf16", l.recompute = "full";
  const double n = double(model::num_parameters(w.config, model::stage_partition({96}, 0, 0, 8)));
  const double expected[] = {18, 9, 6, 4.66, 4.5};
  for (int zero = 0; zero <= 4; ++zero) {
    l.zero = std::min(zero, 3);
    w.fsdp_prefetch = zero == 4;
    const MemoryEstimate m = estimate_step(w, l, a100()).memory;
    const double state = double(m.bytes[int(MemoryCategory::Parameters)] + m.bytes[int(MemoryCategory::Gradients)] +
                                m.bytes[int(MemoryCategory::OptimizerState)]);
    BOOST_TEST(state / n == expected[zero], boost::test_tools::tolerance(0.03));
    BOOST_TEST_MESSAGE("ZeRO-" << l.zero << (w.fsdp_prefetch ? " (FSDP's)" : "") << ": " << state / 1e9
                                << " GB of state, " << state / n << " bytes a parameter");
  }
}

// ZeRO-2 and 3 in the step model: their reductions inside each micro-batch (StageTime::sharded_s),
// hidden behind the work as far as it reaches; after the step ZeRO-2 gathers the parameters
// (half a 16-bit all-reduce) and reduce-scatters what is outside the blocks; Trident's ZeRO-3
// gathers and reduce-scatters only what is outside the blocks, and FSDP with prefetch nothing.
BOOST_AUTO_TEST_CASE(zero_stages_communicate_inside_the_micro_batches) {
  Workload w;
  w.config = {1024, 50257, model::padded_vocab_for(50257), 12, 12, 768};
  w.seq_len = 1024, w.global_batch = 16;
  Layout l;
  l.data = 4, l.micro_batch = 2, l.precision = "bf16";
  Hardware fast = round_hardware(), slow = round_hardware();
  fast.links = {Link{0, 1e15}, Link{0, 1e15}, Link{0, 1e15}};
  slow.links = {Link{1e-6, 1e8}, Link{1e-6, 1e8}, Link{1e-6, 1e8}};
  const double n = double(model::num_parameters(w.config));
  l.zero = 1;
  const StepEstimate one = estimate_step(w, l, fast);
  BOOST_TEST(one.stages[0].sharded_s == 0);
  l.zero = 2;
  const StepEstimate two = estimate_step(w, l, slow);
  BOOST_TEST(two.stages[0].sharded_s > 0);
  // The parameters' gather, and the reduce-scatter of the f32 gradients outside the blocks.
  const double rest = n - 12.0 * model::block_parameters(w.config, 1);
  BOOST_TEST(two.data_s == all_reduce_seconds(n * 2, group_shape({0, 1, 2, 3}, slow), slow, true) / 2 +
                               all_reduce_seconds(rest * 4, group_shape({0, 1, 2, 3}, slow), slow, true) / 2,
             boost::test_tools::tolerance(1e-9));
  l.zero = 3;
  const StepEstimate three = estimate_step(w, l, slow), free = estimate_step(w, l, fast);
  BOOST_TEST(three.data_s == all_reduce_seconds(rest * 2, group_shape({0, 1, 2, 3}, slow), slow, true) / 2 +
                                 all_reduce_seconds(rest * 4, group_shape({0, 1, 2, 3}, slow), slow, true) / 2,
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(three.stages[0].sharded_s > two.stages[0].sharded_s);  // gathers too, each micro-batch
  BOOST_TEST(free.stages[0].sharded_s < 1e-6);                      // nothing left to expose
  BOOST_TEST(free.step_s <= one.step_s + 1e-6);  // within what ZeRO-3 leaves (< 1e-6 s): ZeRO-1 hides its reduce-scatters too
  // FSDP's prefetch (--as=megatron, torchtitan): the embedding and head every micro-batch, nothing after the step,
  // and the blocks' gathers hidden behind the compute where it is long enough.
  w.fsdp_prefetch = true;
  const StepEstimate prefetched = estimate_step(w, l, slow);
  BOOST_TEST(prefetched.data_s == 0);
  BOOST_TEST(prefetched.stages[0].sharded_s > 0);
}

BOOST_AUTO_TEST_CASE(even_stages_have_the_textbook_bubble) {
  // Equal stages: (m + p − 1)·t, the bubble (p − 1)·t — Narayanan et al. 2021 eq. (1).
  Workload w;
  w.config = {64, 256, 256, 8, 4, 64};
  w.seq_len = 64;
  w.global_batch = 16;
  Layout l;
  l.pipeline = 4, l.micro_batch = 1;
  const Hardware hw = round_hardware();
  const StepEstimate e = estimate_step(w, l, hw);
  BOOST_TEST(e.micro_batches == 16);
  double slowest = 0, sum = 0;
  for (const StageTime& s : e.stages) slowest = std::max(slowest, s.total()), sum += s.total();
  // The middle stages are equal (2 blocks, messages both ways); the last adds the head.
  BOOST_TEST(e.stages[1].total() == e.stages[2].total(), boost::test_tools::tolerance(1e-12));
  BOOST_TEST(slowest == e.stages[3].total());
  BOOST_TEST(e.pipeline_s == 15 * slowest + sum, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(e.bubble_s == sum - slowest, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(e.bubble_s >= 2 * e.stages[1].total() + e.stages[0].total());
}

BOOST_AUTO_TEST_CASE(flops_follow_the_papers_formula) {
  // Narayanan et al. 2021 eq. (3), with full recompute: 96·B·s·l·h²·(1 + s/6h + V/16lh).
  const PaperRow r = paper_rows().at(4);
  const Workload w = paper_workload(r);
  const StepEstimate e = estimate_step(w, paper_layout(r), a100());
  const double B = r.global_batch, s = 2048, l = r.layers, h = r.hidden, V = 51200;
  const double paper = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  // Ours also counts the biases and LayerNorms' weights (6 per weight): within 0.1%.
  BOOST_TEST(e.hardware_flops == paper, boost::test_tools::tolerance(1e-3));
  BOOST_TEST(e.model_flops == paper * 3 / 4, boost::test_tools::tolerance(2e-2));
}

BOOST_AUTO_TEST_CASE(memory_overflow_names_the_categories) {
  Workload w;
  w.config = {2048, 50257, model::padded_vocab_for(50257), 96, 96, 12288};
  w.seq_len = 2048;
  w.global_batch = 1024;
  Layout l;
  l.data = 256, l.micro_batch = 4, l.precision = "bf16";
  const StepEstimate e = estimate_step(w, l, a100());
  // Pure data parallelism of 175B: 2 + 4 + 12 bytes per parameter on every GPU.
  BOOST_TEST(!e.feasible);
  BOOST_TEST(e.memory_total > 3.1e12);
  BOOST_TEST(e.reason.find("optimizer") != std::string::npos);
}

// Beside the tensors a GPU holds the runtime's reservation, NCCL's buffers for each of the
// rank's communicators and the pages its buffers are rounded up to: tensor 8 × data 4 is in the
// world's, its tensor group's and its data group's, 0.6 GB + 3 × 200 MB on the A100 profile, and
// its 4 blocks kept whole in one slot (the first and last stage's: 13 of its own) are 13 + 4 × 13
// buffers beside the bound on the rest, each up
// to 2 MiB more; a profile without the keys (a CPU's) holds none, and a device that fits the
// tensors but not the rest does not fit.
BOOST_AUTO_TEST_CASE(the_runtime_and_nccl_hold_device_memory_too) {
  Workload w;
  w.config = {1024, 50257, model::padded_vocab_for(50257), 4, 8, 512};
  w.seq_len = 1024;
  w.global_batch = 32;
  Layout l;
  l.tensor = 8, l.data = 4;
  Hardware hw = a100();
  StepEstimate e = estimate_step(w, l, hw);
  BOOST_TEST(e.communicators == 3);
  BOOST_TEST(e.memory.buffers == 13 + 4 * kBuffersPerKeptBlock + kBuffersBesideBlocks);
  BOOST_TEST(e.allocation_slack_bytes == double(e.memory.buffers) * (2 << 20));
  BOOST_TEST(e.runtime_bytes == 0.6e9 + 3 * 200e6 + e.allocation_slack_bytes, boost::test_tools::tolerance(1e-12));
  Layout recomputing = l;  // a block's output kept alone, one block's 13 for the recompute
  recomputing.recompute = "full";
  BOOST_TEST(estimate_step(w, recomputing, hw).memory.buffers == 13 + 4 + kBuffersPerKeptBlock + kBuffersBesideBlocks);
  BOOST_TEST(e.headroom_bytes == hw.memory_bytes - double(e.memory_total) - e.runtime_bytes);
  hw.memory_bytes = double(e.memory_total) + e.runtime_bytes / 2;
  e = estimate_step(w, l, hw);
  BOOST_TEST(!e.feasible);
  BOOST_TEST(e.reason.find("the runtime, 3 NCCL communicators and 113 buffers' page rounding 1.4 GB") != std::string::npos, e.reason);
  l.pipeline = 2, l.context = 2;  // + pipeline, embedding and context groups
  BOOST_TEST(estimate_step(w, l, hw).communicators == 6);
  std::string cpu = slurp("inputs/hardware/a100-80gb-dgx.ini");
  for (const char* key : {"reserved_gb", "nccl_mb_per_group", "compute_units"}) {
    const size_t at = cpu.find(key);
    cpu.replace(at, cpu.find('\n', at) - at, "");
  }
  const Hardware without = parse_hardware(cpu, "without");
  BOOST_TEST(without.reserved_bytes == 0);
  BOOST_TEST(estimate_step(w, Layout{}, without).runtime_bytes == 0);
}

// Trident's CUDA kernels' workspaces, what a run on kernels.device = cuda tracks as its workspace:
// cuBLASLt's 32 MiB for the model's stream, and for a 16-bit GPT-2 the biases its epilogues read
// rounded to 16 bits — the qkv GEMM's (3C/t) and, with the GELU in the epilogue, the MLP input
// layer's (4C/t). Not in others' plans (their runtime's are inside the profile's reservation).
BOOST_AUTO_TEST_CASE(the_cuda_kernels_workspaces_are_counted) {
  Workload w;
  w.config = {1024, 50257, model::padded_vocab_for(50257), 12, 12, 768};
  w.seq_len = 1024;
  w.global_batch = 16;
  w.flash_attention = true;
  Layout l;
  l.micro_batch = 4, l.precision = "bf16";
  const auto workspace = [](const MemoryInputs& in) {
    return estimate_stage(in, 0).bytes[static_cast<int>(MemoryCategory::Workspace)];
  };
  const MemoryInputs in = memory_inputs(w, l);
  BOOST_TEST(in.cuda_kernels);
  MemoryInputs without = in;
  without.cuda_kernels = false;
  const int64_t C = 768, MiB32 = int64_t(32) << 20;
  BOOST_TEST(workspace(in) - workspace(without) == MiB32 + (3 * C + 4 * C) * 2);
  MemoryInputs unfused = in;
  unfused.gelu_epilogues = false;
  BOOST_TEST(workspace(unfused) - workspace(without) == MiB32 + 3 * C * 2);
  l.tensor = 2;
  MemoryInputs tensor2 = memory_inputs(w, l), tensor2_without = tensor2;
  tensor2_without.cuda_kernels = false;
  BOOST_TEST(workspace(tensor2) - workspace(tensor2_without) == MiB32 + (3 * C + 4 * C) / 2 * 2);
  l.tensor = 1, l.precision = "fp32";  // f32 outputs: no epilogue's bias of their own
  MemoryInputs f32 = memory_inputs(w, l), f32_without = f32;
  f32_without.cuda_kernels = false;
  BOOST_TEST(workspace(f32) - workspace(f32_without) == MiB32);
  l.cpu_kernels = true;  // this host's profile: the CPU's kernels
  BOOST_TEST(!memory_inputs(w, l).cuda_kernels);
  l.cpu_kernels = false;
  model_implementation(w, Implementation::megatron);
  BOOST_TEST(!memory_inputs(w, l).cuda_kernels);
}

BOOST_AUTO_TEST_CASE(search_ranks_feasible_layouts_by_throughput) {
  const PaperRow r = paper_rows().at(0);
  const auto ranked = search_layouts(paper_workload(r), paper_layout(r), r.gpus, a100());
  BOOST_REQUIRE(best_feasible(ranked));
  for (size_t i = 1; i < ranked.size(); ++i) {
    if (!ranked[i].estimate.feasible) {
      BOOST_TEST(!ranked.back().estimate.feasible);
      break;
    }
    BOOST_TEST(ranked[i - 1].estimate.tokens_per_s >= ranked[i].estimate.tokens_per_s);
  }
}

// The search keeps one EstimateCache for all its layouts (slices by tensor split, shape, packing
// and precision; slots by schedule): every candidate's memory and step are what the layout's own
// estimate gives without one — over tensor, pipeline, data and context splits, ZeRO 0–3, the
// schedules, interleaving and recompute, in fp16 and (a second search) fp32; and one cache
// shared by the two precisions' layouts changes none either.
BOOST_AUTO_TEST_CASE(the_search_cache_changes_no_estimate) {
  const PaperRow r = paper_rows().at(1);  // 3.6B on 64 GPUs
  std::vector<std::vector<Layout>> some(2);  // of each precision's search
  for (const std::string precision : {"fp16", "fp32"}) {
    Workload w = paper_workload(r);
    w.flash_attention = true;  // context splits too
    Layout base = paper_layout(r);
    base.precision = precision;
    const std::vector<Candidate> ranked = search_layouts(w, base, r.gpus, a100());
    BOOST_REQUIRE(ranked.size() > 1000u);
    std::set<std::tuple<int, int, int, int>> splits;
    std::set<int> zero;
    for (size_t i = 0; i < ranked.size(); i += 7) {  // every 7th: a spread, in a fraction of the time
      const Candidate& c = ranked[i];
      const StepEstimate alone = estimate_step(w, c.layout, a100());
      BOOST_TEST(alone.memory.bytes == c.estimate.memory.bytes);
      BOOST_TEST(alone.memory_total == c.estimate.memory_total);
      BOOST_TEST(alone.step_s == c.estimate.step_s);
      splits.insert({c.layout.tensor, c.layout.pipeline, c.layout.data, c.layout.context});
      zero.insert(c.layout.zero);
      if (i % 70 == 0) some[precision == "fp32"].push_back(c.layout);
    }
    BOOST_TEST(splits.size() > 20u);
    BOOST_TEST(zero.size() == 4u);
  }
  Workload w = paper_workload(r);
  w.flash_attention = true;
  EstimateCache shared;
  BOOST_REQUIRE(some[0].size() > 10u && some[1].size() > 10u);
  for (size_t k = 0; k < std::min(some[0].size(), some[1].size()); ++k)
    for (const Layout& l : {some[0][k], some[1][k]})  // fp16's and fp32's alternating
      BOOST_TEST(estimate_step(w, l, a100(), &shared).memory.bytes == estimate_step(w, l, a100()).memory.bytes);
}

// Each stage places its own groups, each profile its own: tensor 6 on nodes of 8 in two stages —
// stage 0's group (ranks 0–5) on one node, stage 1's (6–11) across two — and one cache shared
// by profiles of other node and rack sizes serves each the shapes a fresh one finds.
BOOST_AUTO_TEST_CASE(each_stage_and_profile_places_its_own_groups) {
  Workload w;
  w.config = {1024, 256, 256, 4, 12, 768};
  w.seq_len = 1024;
  w.global_batch = 4;
  Layout l;
  l.tensor = 6, l.pipeline = 2, l.data = 1, l.micro_batch = 1;
  l.hierarchical = false;  // a flat ring: all of a group's bytes at the level it spans
  BOOST_REQUIRE(layout_problem(w, l).empty());
  Hardware eight = round_hardware(), four = round_hardware(), racks = round_hardware();
  eight.devices_per_node = 8, racks.devices_per_node = 8, racks.nodes_per_rack = 1;
  const StepEstimate e = estimate_step(w, l, eight);
  // Stage 0's bytes at the node's level, stage 1's at the rack's.
  BOOST_TEST(e.tensor_bytes[int(Level::Node)] > 0);
  BOOST_TEST(e.tensor_bytes[int(Level::Rack)] > 0);
  BOOST_TEST(e.tensor_bytes[int(Level::CrossRack)] == 0);
  EstimateCache shared;
  for (const Hardware& hw : {eight, four, racks, eight}) {
    const StepEstimate alone = estimate_step(w, l, hw), kept = estimate_step(w, l, hw, &shared);
    BOOST_TEST(kept.tensor_bytes == alone.tensor_bytes);
    BOOST_TEST(kept.step_s == alone.step_s);
  }
  BOOST_TEST(estimate_step(w, l, racks).tensor_bytes[int(Level::CrossRack)] > 0);
}

// The seed's §1: a tensor group that grows past a node onto a slow link makes 8 devices slower
// than 4 — the curve marks it.
BOOST_AUTO_TEST_CASE(curve_marks_negative_scaling) {
  Workload w;
  w.config = {2048, 256, 256, 1, 8, 512};
  w.seq_len = 2048;
  w.global_batch = 1;  // no data parallelism, one block: tensor is the only way to use devices
  Layout base;
  base.hierarchical = false;
  const std::vector<CurvePoint> curve = scaling_curve(w, base, {4, 8}, round_hardware());
  BOOST_REQUIRE(curve[0].best && curve[1].best);
  BOOST_TEST(curve[1].best->layout.tensor == 8);
  BOOST_TEST(curve[1].best->estimate.tokens_per_s < curve[0].best->estimate.tokens_per_s);
  BOOST_TEST(!curve[0].negative);
  BOOST_TEST(curve[1].negative);
  BOOST_TEST(curve_table(curve).find("negative scaling") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(profiles_parse_and_reject_bad_figures) {
  // The names the messages give (TRIDENT_HARDWARE_PROFILES) are the folder's profiles, each of them.
  std::set<std::string> named, shipped;
  std::istringstream list(TRIDENT_HARDWARE_PROFILES);
  for (std::string name; std::getline(list >> std::ws, name, ',');) named.insert(name);
  for (const auto& entry : std::filesystem::directory_iterator("inputs/hardware"))
    if (entry.path().extension() == ".ini") shipped.insert(entry.path().stem().string());
  BOOST_TEST((named == shipped));
  for (const std::string& name : named) {
    const Hardware hw = parse_hardware(slurp("inputs/hardware/" + name + ".ini"), name);
    BOOST_TEST(hw.peak_bf16 > 1e14);
    BOOST_TEST(hw.devices_per_node == (name == "gb200-nvl72" ? 4 : 8), name);  // a tray of 4
    // Written and read back: the same figures.
    const Hardware again = parse_hardware(format_hardware(hw, "# test\n", {}), "again");
    BOOST_TEST(again.peak_bf16 == hw.peak_bf16, boost::test_tools::tolerance(1e-5));
    BOOST_TEST(again.links[2].bandwidth_bytes_per_s == hw.links[2].bandwidth_bytes_per_s, boost::test_tools::tolerance(1e-5));
  }
  const std::string good = slurp("inputs/hardware/a100-80gb-dgx.ini");
  BOOST_CHECK_THROW(parse_hardware(good + "\n[device]\nspeed = 3\n", "x"), std::invalid_argument);
  std::string bad = good;
  bad.replace(bad.find("gemm_fraction = 0.7"), 19, "gemm_fraction = 1.7");
  BOOST_CHECK_THROW(parse_hardware(bad, "x"), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(plan)

// Narayanan et al. 2021, Table 1: every row's model and layout on the A100 profile, predicted
// TFLOP/s per GPU (counted as the paper counts, recompute included) within 10% of the
// published figure; and the search's best layout for the row never predicted slower than the
// published layout. (Against the published measurement itself the best is 0.99x for the 1T
// row, inside the model's -3.9% error there; docs/PLANNER.md.)
BOOST_AUTO_TEST_CASE(ptdp_table1_within_10_percent) {
  const Hardware hw = a100();
  const auto rows = paper_rows();
  BOOST_REQUIRE(rows.size() == 10u);
  std::string table = "\n params(B)  tp  pp   dp  GPUs  published  predicted   error  best layout (t x p x d, mb, recompute, schedule)  best/published tokens/s\n";
  for (const PaperRow& r : rows) {
    const Workload w = paper_workload(r);
    const Layout l = paper_layout(r);
    BOOST_REQUIRE(layout_problem(w, l).empty());
    const StepEstimate e = estimate_step(w, l, hw);
    const double error = e.hardware_tflops_per_device / r.tflops_per_gpu - 1;
    const auto ranked = search_layouts(w, l, r.gpus, hw);
    const Candidate* best = best_feasible(ranked);
    BOOST_REQUIRE(best);
    // The published throughput in tokens/s: its TFLOP/s over the FLOPs per token it counted.
    const double published_tokens = r.tflops_per_gpu * 1e12 * r.gpus / (e.hardware_flops / (w.global_batch * 2048.0));
    char line[300];
    const Layout& b = best->layout;
    const std::string schedule = b.pipeline == 1 ? "-" : pipeline::schedule_name(b.schedule) +
                                 (b.virtual_stages > 1 ? " v" + std::to_string(b.virtual_stages) : "");
    std::snprintf(line, sizeof line, "%10.1f %3d %3d %4d %5d %10.0f %10.1f %+6.1f%%  %3d x %2d x %3d, mb %2d, %-9s %-7s %8.2f\n",
                  r.params_b, r.tp, r.pp, l.data, r.gpus, r.tflops_per_gpu, e.hardware_tflops_per_device, 100 * error,
                  b.tensor, b.pipeline, b.data, b.micro_batch, b.recompute.c_str(), schedule.c_str(),
                  best->estimate.tokens_per_s / published_tokens);
    table += line;
    BOOST_TEST(e.feasible, r.params_b << "B: the published layout must fit: " << e.reason);
    BOOST_TEST(std::fabs(error) <= 0.10, r.params_b << "B: predicted " << e.hardware_tflops_per_device
                                                    << " TFLOP/s, published " << r.tflops_per_gpu);
    BOOST_TEST(best->estimate.tokens_per_s >= e.tokens_per_s * (1 - 1e-12), r.params_b << "B: the best is slower");
  }
  BOOST_TEST_MESSAGE(table);
}

// Korthikanti et al. 2022, Table 5 (tests/data/seqsel_table5.csv), the full-recompute column:
// each row's model and layout on the A100 profile, Megatron-LM's setting as for Table 1, the
// 175B and 530B rows with their interleaved pipeline (3 model chunks per stage): every row within
// 10% (issue 37), and the sequence-parallel column (with selective recompute) too.
namespace {
// Table 5's rows: the model, its published layout with full recompute (the sequence-parallel
// column's is the same with sequence parallelism and selective recompute), both times.
struct SeqselRow {
  std::string name;
  Workload w;
  Layout full;
  double full_s, seqsel_s;
  Layout seqsel() const {
    Layout l = full;
    l.sequence_parallel = true, l.recompute = "selective";
    return l;
  }
};

std::vector<SeqselRow> seqsel_rows() {
  std::istringstream in(slurp("tests/data/seqsel_table5.csv"));
  std::vector<SeqselRow> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("model", 0) == 0) continue;
    char name[16];
    int layers, hidden, heads, seq, vocab, gpus, tp, pp, dp, batch, micro, interleave;
    double full_s, seqsel_s;
    BOOST_REQUIRE(std::sscanf(line.c_str(), "%15[^,],%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%lf,%lf", name, &layers, &hidden,
                              &heads, &seq, &vocab, &gpus, &tp, &pp, &dp, &batch, &micro, &interleave, &full_s,
                              &seqsel_s) == 15);
    const PaperRow r{0, heads, hidden, layers, tp, pp, gpus, batch, micro, 0};
    Layout l = paper_layout(r);
    l.virtual_stages = interleave;
    rows.push_back({name, paper_workload(r), l, full_s, seqsel_s});
  }
  return rows;
}
}  // namespace

BOOST_AUTO_TEST_CASE(seqsel_table5_full_recompute) {
  const Hardware hw = a100();
  std::string table = "\n model  t  pp  v  published(s)  predicted(s)  error  bubble(s)\n";
  int rows = 0;
  for (const SeqselRow& r : seqsel_rows()) {
    const Layout& l = r.full;
    const std::string problem = layout_problem(r.w, l);
    BOOST_REQUIRE_MESSAGE(problem.empty(), r.name << ": " << problem);
    const StepEstimate e = estimate_step(r.w, l, hw);
    const double error = e.step_s / r.full_s - 1;
    char text[160];
    std::snprintf(text, sizeof text, "%6s %2d %3d %2d %13.2f %13.2f %+6.1f%% %9.2f\n", r.name.c_str(), l.tensor,
                  l.pipeline, l.virtual_stages, r.full_s, e.step_s, 100 * error, e.bubble_s);
    table += text;
    BOOST_TEST(std::fabs(error) <= 0.10, r.name << ": predicted " << e.step_s << " s, published " << r.full_s);
    // The other column: sequence parallelism with selective recompute.
    const StepEstimate sp = estimate_step(r.w, r.seqsel(), hw);
    const double sp_error = sp.step_s / r.seqsel_s - 1;
    std::snprintf(text, sizeof text, "%6s %2d %3d %2d %13.2f %13.2f %+6.1f%% %9.2f  (sequence parallel + selective)\n",
                  r.name.c_str(), l.tensor, l.pipeline, l.virtual_stages, r.seqsel_s, sp.step_s, 100 * sp_error, sp.bubble_s);
    table += text;
    BOOST_TEST(std::fabs(sp_error) <= 0.10, r.name << ": predicted " << sp.step_s << " s, published " << r.seqsel_s);
    BOOST_TEST(sp.step_s < e.step_s, r.name << ": sequence parallelism with selective recompute predicted no faster");
    // The planner's best for the row's devices is never predicted slower than either column's
    // layout where that fits (the 530B row's does not with our runtime's buffers, below).
    const std::vector<Candidate> ranked = search_layouts(r.w, l, l.devices(), hw);
    const Candidate* best = best_feasible(ranked);
    for (const StepEstimate* published : {&e, &sp})
      if (published->feasible)
        BOOST_TEST((best && best->estimate.step_s <= published->step_s * (1 + 1e-12)), r.name << ": the best is slower");
    ++rows;
  }
  BOOST_TEST(rows == 4);
  BOOST_TEST_MESSAGE(table);
}

namespace {
// Their 22B model (h 6144, a 64, s 2048), one sequence.
Workload korthikanti_22b() {
  Workload w;
  w.config = {2048, 51200, model::padded_vocab_for(51200), 48, 64, 6144};
  w.seq_len = 2048;
  w.global_batch = 1;
  return w;
}
}  // namespace

// plan --as: Megatron-LM's costs change what its implementation does differently — 16-bit
// activations on the wire, 16-bit element-wise passes, dropout's extra passes, none of our CUDA
// kernels' workspaces (cuBLASLt's 32 MiB and, with the materialized attention here, the GELU
// layer's 16-bit bias of 4C/t values) — and nothing else.
BOOST_AUTO_TEST_CASE(implementations_differ_in_their_own_costs_only) {
  Workload w = korthikanti_22b();
  Layout l;
  l.tensor = 8, l.precision = "bf16";
  const Hardware hw = a100();
  const StepEstimate ours = estimate_step(w, l, hw);
  model_implementation(w, parse_implementation("megatron"));
  const StepEstimate theirs = estimate_step(w, l, hw);
  BOOST_TEST(theirs.stages[0].tensor_s < ours.stages[0].tensor_s);  // half the bytes, the same latencies
  BOOST_TEST(theirs.stages[0].compute_s == ours.stages[0].compute_s);
  BOOST_TEST(ours.memory_total - theirs.memory_total == kernels::kCudaGemmWorkspaceBytes + 4 * 6144 / 8 * 2);
  Workload no_dropout = w;
  no_dropout.dropout = false;
  BOOST_TEST(estimate_step(no_dropout, l, hw).stages[0].elementwise_s < theirs.stages[0].elementwise_s);
  BOOST_TEST(estimate_step(no_dropout, l, hw).stages[0].elementwise_s < ours.stages[0].elementwise_s);  // 2-byte passes
  model_implementation(w, Implementation::trident);
  BOOST_TEST(estimate_step(w, l, hw).step_s == ours.step_s);
  BOOST_TEST(std::string(implementation_name(parse_implementation("trident"))) == "trident");
  BOOST_CHECK_THROW(parse_implementation("deepspeed"), std::invalid_argument);
}

// parallel.tp_comm_overlap in the step model: the rings hide the collectives behind the GEMMs
// up to 1 − 1/t of them — never more than the GEMMs' time, never the first block's transfer —
// and only with sequence parallelism; the GEMMs beside them lose the profile's interference.
BOOST_AUTO_TEST_CASE(tensor_overlap_hides_at_most_the_gemms) {
  const Workload w = korthikanti_22b();
  Layout l;
  l.tensor = 8, l.precision = "bf16", l.sequence_parallel = true;
  const Hardware hw = a100();
  const StageTime plain = estimate_step(w, l, hw).stages[0];
  l.tp_comm_overlap = true;
  const StageTime overlapped = estimate_step(w, l, hw).stages[0];
  BOOST_TEST(overlapped.tensor_s < plain.tensor_s);
  BOOST_TEST(overlapped.tensor_s >= plain.tensor_s / 8 - 1e-12);
  BOOST_TEST(overlapped.tensor_s >= plain.tensor_s - plain.compute_s - 1e-12);
  // The GEMMs slowed by the interference over the hidden part, and by nothing else.
  const double hidden = plain.tensor_s - overlapped.tensor_s;
  BOOST_TEST(hw.comm_interference > 0);
  BOOST_TEST(overlapped.compute_s == plain.compute_s + hw.comm_interference * hidden, boost::test_tools::tolerance(1e-12));
  l.sequence_parallel = false;
  BOOST_TEST(!layout_problem(w, l).empty());
}

// --as=torchtitan's sequence parallelism: DTensor keeps the all-gathered input for the weight
// gradients (the backward's collectives are 2 all-reduces' worth a block, not Trident's and
// Megatron-LM's 3), and async TP leaves the backward's reduce-scatters of dx unfused (PyTorch's
// micro-pipeline pass fuses a reduce-scatter only with the single matmul producing it): of the
// overlapped time at least one all-reduce a block stays exposed, the rest as for Trident.
BOOST_AUTO_TEST_CASE(torchtitan_async_tp_leaves_the_backward_reduce_scatters_exposed) {
  Workload trident_costs = korthikanti_22b(), titan = trident_costs;
  model_implementation(titan, Implementation::torchtitan);
  Workload titan_regathering = titan;
  titan_regathering.sequence_parallel_regathers = true;
  Layout l;
  l.tensor = 8, l.precision = "bf16", l.sequence_parallel = true;
  const Hardware hw = a100();
  const int layers = trident_costs.config.layers;
  // One all-reduce of the (b, T, C) activation: the difference the re-gather makes, per block.
  const double regathering = estimate_step(titan_regathering, l, hw).stages[0].tensor_s;
  const double kept = estimate_step(titan, l, hw).stages[0].tensor_s;
  const double one = (regathering - kept) / layers;
  BOOST_TEST(one > 0);
  // Both: 2 forward + 2 or 3 backward a block, the embedding's and the head's 1 + 1.5.
  BOOST_TEST(kept == one * (4 * layers + 2.5), boost::test_tools::tolerance(1e-9));
  l.tp_comm_overlap = true;
  const StageTime titan_overlapped = estimate_step(titan, l, hw).stages[0];
  BOOST_TEST(titan_overlapped.tensor_s >= layers * one - 1e-12);
  // The rest hidden as Trident hides all of it: what is left over the whole, at most 1/t of it.
  const double rest = kept - layers * one;
  BOOST_TEST(titan_overlapped.tensor_s - layers * one <= std::max(rest / 8, rest - titan_overlapped.compute_s) + 1e-12);
  // With every collective overlapped (Trident's and Megatron-LM's reach), less stays exposed.
  Workload titan_fusing_all = titan;
  titan_fusing_all.tp_overlap_backward_scatters = true;
  BOOST_TEST(estimate_step(titan_fusing_all, l, hw).stages[0].tensor_s < titan_overlapped.tensor_s - 0.5 * layers * one);
}

// Trident's sequence parallelism in 16 bits: its all-gathers carry the stored 16-bit values (the
// GEMMs' inputs, the re-gathers, the row-parallel dY the norms wrote rounded), its reduce-scatters
// f32 — per block 6 AGs at half the bytes and 4 RSs, the head's AG at half, in f32 messages'
// place: (3.5·L + 2.25) all-reduces' worth where f32 gathers would be (5·L + 2.5). In fp32 the same.
BOOST_AUTO_TEST_CASE(trident_sequence_parallel_gathers_16_bit_values) {
  Workload stored = korthikanti_22b();
  model_implementation(stored, Implementation::trident);
  BOOST_TEST(stored.sequence_parallel_gathers_stored);
  Workload f32_gathers = stored;
  f32_gathers.sequence_parallel_gathers_stored = false;
  Layout l;
  l.tensor = 8, l.precision = "bf16", l.sequence_parallel = true;
  const Hardware hw = a100();
  const double L = stored.config.layers;
  const double half = estimate_step(stored, l, hw).stages[0].tensor_s, whole = estimate_step(f32_gathers, l, hw).stages[0].tensor_s;
  BOOST_TEST(half / whole == (3.5 * L + 2.25) / (5 * L + 2.5), boost::test_tools::tolerance(1e-9));
  l.precision = "fp32";
  BOOST_TEST(estimate_step(stored, l, hw).stages[0].tensor_s == estimate_step(f32_gathers, l, hw).stages[0].tensor_s);
  Workload megatron = korthikanti_22b();
  model_implementation(megatron, Implementation::megatron);
  BOOST_TEST(!megatron.sequence_parallel_gathers_stored);  // 16-bit messages throughout already
}

// Korthikanti et al. 2022, Table 2: with sequence parallelism every per-layer tensor is split
// over t, s·b·h·(34 + 5as/h)/t in 16 bit with dropout. Ours with the same named terms out
// (dropout's masks and outputs, now also / t; our LayerNorm statistics of s·b/t rows) within
// 1%, at t = 4 and 8; and against tensor parallelism alone at the same t, the ratio their two
// formulas give: (34 + 5as/h)/t over (10 + 24/t + 5as/(ht)) — not 1/2 at t = 4 (8.5/16 for
// the attention-free part): the 10·s·b·h that sequence parallelism splits is not most of it.
BOOST_AUTO_TEST_CASE(korthikanti_22b_sequence_parallel_activation_memory) {
  const double s = 2048, b = 1, h = 6144, a = 64;
  for (int t : {4, 8}) {
    const Workload w = korthikanti_22b();
    Layout l;
    l.tensor = t, l.micro_batch = 1, l.precision = "bf16", l.sequence_parallel = true;
    const double ours = double(block_activation_bytes(memory_inputs(w, l)));
    const double theirs = s * b * h * (34 + 5 * a * s / h) / t;
    const double dropout = (2 * s * b * h + 3 * a * s * s * b) / t, statistics = 16 * s * b / t;
    BOOST_TEST(ours == theirs - dropout + statistics, boost::test_tools::tolerance(0.01));
    l.sequence_parallel = false;
    const double without = double(block_activation_bytes(memory_inputs(w, l)));
    const double theirs_without = s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t));
    const double ratio_theirs = (theirs - dropout) / (theirs_without - 2 * s * b * h - 3 * a * s * s * b / t);
    BOOST_TEST(ours / without == ratio_theirs, boost::test_tools::tolerance(0.01));
    BOOST_TEST_MESSAGE("22B t=" << t << " sequence parallel: ours " << ours / 1e6 << " MB per layer, Korthikanti "
                                << theirs / 1e6 << " MB (dropout " << dropout / 1e6 << " MB); "
                                << ours / without << " of tensor parallelism alone");
  }
}

// Context parallelism in the planner: a 64K-token sequence of a 4-head, 2-block model. Each
// rank holds a c-th of every activation (the memory model) beside the ring's own gradient blocks
// (in the MLP's output-gradient scratch, which GPT-2's fused GELU layer needs only for them), the ring's messages cost time
// (context_s), and on a device too small for any layout without it — tensor 4 at most (the
// heads), pipeline 2 (the blocks), with sequence parallelism and full recompute — the search
// finds one with it. Layouts the runtime refuses are refused here too.
BOOST_AUTO_TEST_CASE(long_sequences_fit_with_context_parallelism) {
  Workload w;
  w.config = {65536, 8192, model::padded_vocab_for(8192), 2, 4, 512};
  w.seq_len = 65536;
  w.global_batch = 8;
  w.flash_attention = true;
  Layout one, ring;
  one.precision = ring.precision = "bf16";
  one.recompute = ring.recompute = "full";
  ring.context = 8, ring.zero = 1;
  Hardware hw = a100();
  const StepEstimate alone = estimate_step(w, one, hw), split = estimate_step(w, ring, hw);
  const auto act = [](const StepEstimate& e) { return double(e.memory.bytes[static_cast<int>(MemoryCategory::Activations)]); };
  const double ring_gradients = 2.0 * ring.micro_batch * (w.seq_len / ring.context) * 2 * 512 * sizeof(float);  // 2 (B, T/c, 2C)
  BOOST_TEST(act(split) - ring_gradients < act(alone) / 7);
  BOOST_TEST(split.stages[0].context_s > 0);
  BOOST_TEST(alone.stages[0].context_s == 0);
  // The smallest layout without context parallelism, against the c = 8 one.
  Layout best_without = one;
  best_without.tensor = 4, best_without.pipeline = 2, best_without.sequence_parallel = true;
  const StepEstimate without = estimate_step(w, best_without, hw);
  // What each holds on the device: its tensors, the runtime's reservation and its communicators' buffers.
  const auto held = [](const StepEstimate& e) { return double(e.memory_total) + e.runtime_bytes; };
  BOOST_REQUIRE(held(split) < held(without));
  hw.memory_bytes = (held(split) + held(without)) / 2;
  const std::vector<Candidate> ranked = search_layouts(w, one, 8, hw);
  const Candidate* best = best_feasible(ranked);
  BOOST_REQUIRE(best != nullptr);
  const auto name = [](const Layout& l) {
    return "t" + std::to_string(l.tensor) + " c" + std::to_string(l.context) + " p" + std::to_string(l.pipeline) + " d" +
           std::to_string(l.data);
  };
  BOOST_TEST(best->layout.context > 1, name(best->layout));
  for (const Candidate& c : ranked)
    if (c.estimate.feasible) BOOST_TEST(c.layout.context > 1, name(c.layout));
  Workload materialized = w;
  materialized.flash_attention = false;
  BOOST_TEST(!layout_problem(materialized, ring).empty());
  Workload odd = w;
  odd.seq_len = 65536 + 8;  // not a multiple of 2c = 16
  BOOST_TEST(!layout_problem(odd, ring).empty());
}

// Grouped-query attention's ring passes the key/value heads as they are: a Llama of 8 query heads
// over 2 key/value heads spends a quarter of the multi-head one's context time: its messages'
// bytes, on links without latency and where no work hides them (a device of unbounded FLOP/s),
// within a node and across nodes.
BOOST_AUTO_TEST_CASE(the_context_ring_passes_the_key_value_heads) {
  Workload w;
  w.config = {65536, 8192, model::padded_vocab_for(8192), 2, 8, 512};
  w.config.arch = model::Arch::llama, w.config.ffn_hidden = 1376, w.config.tie_embeddings = false;
  w.seq_len = 65536;
  w.global_batch = 8;
  w.flash_attention = true;
  Layout ring;
  ring.precision = "bf16", ring.recompute = "full", ring.context = 8, ring.zero = 1;
  for (const int per_node : {8, 2}) {
    Hardware hw = a100();
    hw.devices_per_node = per_node;
    hw.peak_bf16 *= 1e9;
    for (Link& link : hw.links) link.latency_s = 0;
    Workload grouped = w, multi_head = w;
    grouped.config.kv_heads = 2, multi_head.config.kv_heads = 8;
    const double ratio =
        estimate_step(grouped, ring, hw).stages[0].context_s / estimate_step(multi_head, ring, hw).stages[0].context_s;
    BOOST_TEST(ratio == 0.25, boost::test_tools::tolerance(0.01));
  }
}

// Korthikanti et al. 2022, eq. (1)-(2): per layer, in 16-bit with dropout, s·b·h·(34 + 5as/h)
// without recompute and 34·s·b·h with selective recompute (t = 1; with tensor parallelism
// s·b·h·(10 + 24/t + 5as/(ht))). Our blocks keep no dropout masks and no dropout outputs
// (we have no dropout): their 2·s·b·h bytes of masks and 3·a·s²·b of attention dropout are
// not ours; and we keep the LayerNorm statistics (2 floats per token and LayerNorm, 16·s·b
// bytes) which they do not count. With those named terms taken out, the same tensors must
// give the same bytes within 1%, for their 22B model (h 6144, a 64, s 2048, t 8).
BOOST_AUTO_TEST_CASE(korthikanti_22b_activation_memory) {
  const double s = 2048, b = 1, h = 6144, a = 64;
  for (int t : {1, 8}) {
    const Workload w = korthikanti_22b();
    Layout l;
    l.tensor = t, l.micro_batch = 1, l.precision = "bf16";
    const double ours = double(block_activation_bytes(memory_inputs(w, l)));
    const double theirs = s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t));
    const double dropout = 2 * s * b * h + 3 * a * s * s * b / t, statistics = 16 * s * b;
    BOOST_TEST(ours == theirs - dropout + statistics, boost::test_tools::tolerance(0.01));
    // Selective: no attention probabilities (theirs: 34·s·b·h at t = 1, masks included).
    l.recompute = "selective";
    MemoryInputs in = memory_inputs(w, l);
    const double kept_without_probabilities = ours - a / t * s * s * b * 2;
    const double theirs_selective = s * b * h * (10 + 24.0 / t);
    BOOST_TEST(kept_without_probabilities == theirs_selective - 2 * s * b * h + statistics,
               boost::test_tools::tolerance(0.01));
    BOOST_TEST_MESSAGE("22B t=" << t << ": ours " << ours / 1e6 << " MB per layer, Korthikanti " << theirs / 1e6
                                << " MB, of which dropout " << dropout / 1e6 << " MB");
  }
}

// TorchTitan's published bf16 Llama 3 runs (tests/data/torchtitan_llama3_h100.csv: 8B, 70B and
// 405B on H100 and A100, from pytorch/torchtitan's benchmarks and docs/performance.md): each row's
// model and layout, predicted tokens/s per GPU against the measured. Their layouts as ours come
// nearest: FSDP over `fsdp` ranks as data parallelism with the distributed optimizer (the same
// GEMMs, attention and gradient bytes; the per-block parameter gathers of FSDP are not Trident's
// and are not modelled), tensor parallelism with sequence parallelism (TorchTitan's default with
// TP), per-layer selective recompute as every second block recomputed, per-op selective as our
// selective recompute, full as full; torch.compile's fused element-wise kernels as 16-bit passes.
// Only the speed is compared: FSDP's memory is not ours (docs/PLANNER.md).
struct TitanRow {
  std::string model, gpu, line;
  int gpus, fsdp, tp, local_batch;
  std::string ac;
  bool compiled, async_tp;
  double measured;
};

std::vector<TitanRow> titan_rows() {
  std::istringstream csv(slurp("tests/data/torchtitan_llama3_h100.csv"));
  std::vector<TitanRow> rows;
  for (std::string line; std::getline(csv, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("model,", 0) == 0) continue;
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
    BOOST_REQUIRE(f.size() >= 13);
    rows.push_back({f[0], f[1], line, std::stoi(f[2]), std::stoi(f[3]), std::stoi(f[4]), std::stoi(f[8]), f[9],
                    f[10] == "yes", f[11] == "yes", std::stod(f[12])});
  }
  return rows;
}

Workload titan_workload(const TitanRow& r) {
  Workload w;
  model::GptConfig& c = w.config;
  c.arch = model::Arch::llama;
  if (r.model == "llama3-8b") c.layers = 32, c.heads = 32, c.channels = 4096, c.ffn_hidden = 14336;
  else if (r.model == "llama3-70b") c.layers = 80, c.heads = 64, c.channels = 8192, c.ffn_hidden = 28672;
  else c.layers = 126, c.heads = 128, c.channels = 16384, c.ffn_hidden = 53248;
  c.kv_heads = 8;
  c.vocab = 128256, c.padded_vocab = model::padded_vocab_for(128256), c.max_seq_len = 8192;
  c.tie_embeddings = false;
  w.seq_len = 8192, w.global_batch = int64_t(r.local_batch) * r.fsdp, w.flash_attention = true;
  // Its activation checkpointing and bf16 collectives; its element-wise passes fused in 16 bits
  // only where the row compiled them (eager PyTorch runs each as its own pass).
  model_implementation(w, Implementation::torchtitan);
  w.elementwise_value_bytes_low16 = r.compiled ? 2 : 4;
  return w;
}

Layout titan_layout(const TitanRow& r) {
  Layout l;
  l.tensor = r.tp, l.data = r.fsdp, l.micro_batch = r.local_batch, l.zero = 3, l.precision = "bf16";
  l.sequence_parallel = r.tp > 1;
  l.tp_comm_overlap = r.async_tp;
  if (r.ac == "selective-layer") l.recompute = "every_k", l.recompute_interval = 2;
  else if (r.ac == "selective-op") l.recompute = "selective";
  else l.recompute = "full";
  return l;
}

// The row's devices: the A100s, or the H100s at 500 W.
Hardware titan_hardware(const TitanRow& r) {
  return r.gpu.rfind("a100", 0) == 0 ? a100() : parse_hardware(slurp("inputs/hardware/h100-500w.ini"), "h100-500w.ini");
}

// --as=torchtitan's activation checkpointing (torchtitan/distributed/activation_checkpoint.py):
// per-layer AC with interval 2 recomputes every second block (Trident's every_k recomputes all);
// per-op AC recomputes every second matmul of its order wq, wk, wv, wo, w1, w3, w2 — wk, wo and
// w3, 2·C·(kv + C + F) FLOPs a token and block for Llama 3 8B (C 4096, k and v 1024 wide, F 14336).
BOOST_AUTO_TEST_CASE(torchtitan_checkpointing_recomputes_what_its_policy_saves_not) {
  Workload w;
  model::GptConfig& c = w.config;
  c.arch = model::Arch::llama;
  c.layers = 32, c.heads = 32, c.kv_heads = 8, c.channels = 4096, c.ffn_hidden = 14336;
  c.vocab = 128256, c.padded_vocab = model::padded_vocab_for(128256), c.max_seq_len = 8192;
  c.tie_embeddings = false;
  w.seq_len = 8192, w.global_batch = 8, w.flash_attention = true;
  Layout l;
  l.data = 8, l.zero = 3, l.precision = "bf16";
  const Hardware hw = parse_hardware(slurp("inputs/hardware/h100-500w.ini"), "h100-500w.ini");
  const auto extra_flops = [&](const Workload& x, const std::string& mode) {
    Layout m = l;
    m.recompute = mode, m.recompute_interval = 2;
    const StepEstimate e = estimate_step(x, m, hw);
    return e.hardware_flops - e.model_flops;
  };
  const auto activations = [&](const Workload& x, const std::string& mode) {
    Layout m = l;
    m.recompute = mode, m.recompute_interval = 2;
    return estimate_step(x, m, hw).memory.bytes[int(MemoryCategory::Activations)];
  };
  Workload titan = w;
  model_implementation(titan, parse_implementation("torchtitan"));
  BOOST_TEST(std::string(implementation_name(Implementation::torchtitan)) == "torchtitan");
  const double tokens = 8.0 * 8192, C = 4096, T = 8192;
  const double full = tokens * 32 * (2 * model::block_gemm_weights(c) + 4 * T * C);
  BOOST_TEST(extra_flops(w, "full") == full, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(extra_flops(w, "every_k") == full, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(extra_flops(titan, "every_k") == full / 2, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(extra_flops(titan, "selective") == tokens * 32 * 2 * C * (1024 + 4096 + 14336), boost::test_tools::tolerance(1e-12));
  // Half the blocks keep everything: more than Trident's every_k, less than nothing recomputed.
  BOOST_TEST(activations(titan, "every_k") > activations(w, "every_k"));
  BOOST_TEST(activations(titan, "every_k") < activations(w, "none"));
  BOOST_TEST(activations(titan, "selective") == activations(w, "none"));  // the upper bound it is counted as
  // The op-level recompute runs the element-wise passes again; Trident's selective only the softmax,
  // which the flash attention does not have.
  Layout op = l;
  op.recompute = "selective";
  BOOST_TEST(estimate_step(titan, op, hw).stages[0].elementwise_s > estimate_step(titan, l, hw).stages[0].elementwise_s);
}

BOOST_AUTO_TEST_CASE(torchtitan_llama3_within_20_percent) {
  std::string table = "\n model       gpu              GPUs fsdp tp  ac               compile asyncTP  measured predicted  error\n";
  double sum = 0;
  int rows = 0;
  for (const TitanRow& r : titan_rows()) {
    const Workload w = titan_workload(r);
    const Layout l = titan_layout(r);
    BOOST_REQUIRE_MESSAGE(layout_problem(w, l).empty(), r.line << ": " << layout_problem(w, l));
    const StepEstimate e = estimate_step(w, l, titan_hardware(r));
    const double predicted = e.tokens_per_s / l.devices();
    // FSDP's sharded parameters, gradients and optimizer state: every row fits its devices
    // (TorchTitan's H100s of 95-96 GB where the row says so).
    BOOST_TEST(e.feasible, r.line << ": " << e.reason);
    // The planner's best for the row's devices (every ZeRO stage) is never predicted slower.
    // Without context parallelism, which none of the rows uses (three quarters of the search's
    // time): a best of fewer layouts that is not slower holds for the whole search a fortiori.
    SearchSpace every_stage;
    every_stage.zero_stages = {0, 1, 2, 3};
    every_stage.max_context = 1;
    const std::vector<Candidate> ranked = search_layouts(w, l, l.devices(), titan_hardware(r), every_stage);
    const Candidate* best = best_feasible(ranked);
    BOOST_TEST((best && best->estimate.tokens_per_s >= e.tokens_per_s * (1 - 1e-12)), r.line << ": the best is slower");
    const double error = predicted / r.measured - 1;
    char text[200];
    std::snprintf(text, sizeof text, "%-12s %-16s %4d %4d %2d  %-16s %-7s %-7s %8.0f %9.0f %+6.1f%%\n", r.model.c_str(),
                  r.gpu.c_str(), r.gpus, r.fsdp, r.tp, r.ac.c_str(), r.compiled ? "yes" : "no", r.async_tp ? "yes" : "no",
                  r.measured, predicted, 100 * error);
    table += text;
    BOOST_TEST(std::fabs(error) <= 0.20, r.line << ": predicted " << predicted << " tokens/s per GPU");
    sum += std::fabs(error), ++rows;
  }
  BOOST_TEST(rows == 12);
  char mean[80];
  std::snprintf(mean, sizeof mean, "mean absolute error %.1f%% over %d rows\n", 100 * sum / rows, rows);
  BOOST_TEST_MESSAGE(table + mean);
}

// Issue 37's bar: the mean absolute error over every row of the three tables — Table 1's TFLOP/s,
// both columns of Table 5's iteration times, TorchTitan's tokens/s — at most 7% (Calculon's on
// Table 5: 3.7%). Two figures are fitted to these rows (the A100's and the 500 W H100's
// gemm_fraction, docs/PLANNER.md); everything else is a datasheet's, a paper's or assumed.
BOOST_AUTO_TEST_CASE(validation_mean_absolute_error_within_7_percent) {
  std::vector<double> errors;
  for (const PaperRow& r : paper_rows())
    errors.push_back(estimate_step(paper_workload(r), paper_layout(r), a100()).hardware_tflops_per_device / r.tflops_per_gpu - 1);
  for (const SeqselRow& r : seqsel_rows()) {
    errors.push_back(estimate_step(r.w, r.full, a100()).step_s / r.full_s - 1);
    errors.push_back(estimate_step(r.w, r.seqsel(), a100()).step_s / r.seqsel_s - 1);
  }
  for (const TitanRow& r : titan_rows())
    errors.push_back(estimate_step(titan_workload(r), titan_layout(r), titan_hardware(r)).tokens_per_s /
                         titan_layout(r).devices() / r.measured - 1);
  BOOST_REQUIRE(errors.size() == 10u + 8u + 12u);
  double sum = 0, worst = 0;
  for (double e : errors) sum += std::fabs(e), worst = std::max(worst, std::fabs(e));
  const double mean = sum / errors.size();
  BOOST_TEST_MESSAGE("validation: " << errors.size() << " rows, mean absolute error " << 100 * mean << "%, worst "
                                    << 100 * worst << "%");
  BOOST_TEST(mean <= 0.07);
}

BOOST_AUTO_TEST_SUITE_END()
