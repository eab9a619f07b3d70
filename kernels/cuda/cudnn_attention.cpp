// cuDNN's fused attention (its SDPA operation, built through cudnn-frontend's graph API) for the
// whole causal sequence of a 16-bit model — the flash attention the CUDA backend runs by default
// where cuDNN takes the sizes (cuda.attention_kernel = auto); our tiled kernels
// (flash_attention_mma.cu) run what it does not take: ring attention's blocks, f32 models or
// products (cuda.attention_products = f32), a build without cuDNN, sizes whose graph cuDNN
// refuses, and cuda.attention_kernel = own.
//
// The operands are read where the model keeps them, as strided (B, heads, T, hs) views: q (NH
// heads), k and v (KV heads each: grouped-query attention as cuDNN takes it, KV = NH multi-head)
// out of the fused (B, T, (NH + 2·KV)·hs) activation (head stride hs), y (B, T, C). The
// statistics cuDNN keeps for backward ("Stats", (B, NH, T, 1) f32) are each query's natural
// log-sum-exp of its scaled scores: our kernels' lse, so either backward reads either forward's.
// Backward takes dy in the 16-bit type (dout arrives in f32: rounded into a stream-ordered
// scratch first, one pass) and writes dq, dk, dv in it, into the fused-rows copy the qkv GEMM's
// backward reads; the f32 dqkv is that copy widened (one pass): the bias gradient and anything
// else reading f32 see exactly the values the GEMM reads.
//
// Deterministic: the backward's algorithm is asked to be (cudnn-frontend's
// set_deterministic_algorithm), so a run's gradients are the same bits every time, as our kernels'.
// The arithmetic is FlashAttention's (operands 16-bit, sums f32), as our tensor-core kernels':
// tests/gpu's flash_attention_cudnn_* and flash_attention_bf16 / _fp16 hold the two to the CPU's
// f32 products; the unit tests (cudnn_attention/*) run cudnn-frontend's validation of these graphs
// for sm_90 and sm_80 without a GPU (cuDNN refuses T = 1: ours run it).
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

#include "core/version.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/cuda_libraries.hpp"

#if TRIDENT_CUDNN
#include <cudnn_frontend.h>
#endif

namespace trident::kernels::cuda {

#if TRIDENT_CUDNN
namespace {

namespace fe = cudnn_frontend;

// The graphs' tensors, named by their uid in the variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kScale, kO, kStats, kDO, kDQ, kDK, kDV };

// The graphs of one size of attention: forward (with its statistics) and backward, built together
// so that a refusal of either is known before a forward pass commits to cuDNN's.
struct Graphs {
  std::shared_ptr<fe::graph::Graph> forward, backward;
  bool taken = false;
};

// (B, T, NH, KV, hs, fp16)
using Key = std::tuple<int, int, int, int, int, bool>;

// The elements of a fused (q, k, v) row: (NH + 2·KV)·hs.
int64_t fused_row(const Key& key) {
  const auto [B, T, NH, KV, hs, fp16] = key;
  return (int64_t(NH) + 2 * int64_t(KV)) * hs;
}

std::mutex g_mutex;

// The process's cuDNN handle (a process drives one device), created on first use; its stream is
// set before each execution.
cudnnHandle_t handle() {
  static cudnnHandle_t h = [] {
    cudnnHandle_t made = nullptr;
    const cudnnStatus_t status = cudnnCreate(&made);
    if (status != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error(std::string("cudnnCreate: ") + cudnnGetErrorString(status));
    return made;
  }();
  return h;
}

// A (B, NH, T, hs) view of NH heads in rows of `row` elements: batch stride T·row, head stride
// hs — an input named so, or (as_heads on a node's output) where the node writes.
fe::graph::Tensor_attributes& as_heads(fe::graph::Tensor_attributes& t, Uid uid, int B, int NH, int T, int hs,
                                        int64_t row) {
  return t.set_uid(uid).set_dim({B, NH, T, hs}).set_stride({int64_t(T) * row, hs, row, 1});
}
fe::graph::Tensor_attributes heads(const char* name, Uid uid, int B, int NH, int T, int hs, int64_t row) {
  fe::graph::Tensor_attributes t;
  return as_heads(t.set_name(name), uid, B, NH, T, hs, row);
}

// (B, NH, T, 1) f32: each query's log-sum-exp, as our lse (B, NH, T) — forward's output,
// backward's input.
fe::graph::Tensor_attributes& as_statistics(fe::graph::Tensor_attributes& t, int B, int NH, int T) {
  return t.set_uid(kStats).set_dim({B, NH, T, 1}).set_stride({int64_t(NH) * T, T, 1, 1}).set_data_type(
      fe::DataType_t::FLOAT);
}

fe::graph::Tensor_attributes scale_value() {
  return fe::graph::Tensor_attributes()
      .set_name("attn_scale")
      .set_uid(kScale)
      .set_dim({1, 1, 1, 1})
      .set_stride({1, 1, 1, 1})
      .set_is_pass_by_value(true)
      .set_data_type(fe::DataType_t::FLOAT);
}

// A graph of the key's 16-bit type (f32 sums) and its inputs q (B, NH, T, hs), k and v
// (B, KV, T, hs): views of the fused rows. sm_version: the GPU architecture it is for (0: the current device's, as
// cuDNN reads it; set before any node, which copies the graph's context).
struct Started {
  std::shared_ptr<fe::graph::Graph> graph;
  std::shared_ptr<fe::graph::Tensor_attributes> q, k, v;
};

Started start_graph(const Key& key, int sm_version) {
  const auto [B, T, NH, KV, hs, fp16] = key;
  const int64_t row = fused_row(key);
  Started s;
  s.graph = std::make_shared<fe::graph::Graph>();
  if (sm_version > 0) s.graph->set_sm_version(sm_version);
  s.graph->set_io_data_type(fp16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  s.q = s.graph->tensor(heads("q", kQ, B, NH, T, hs, row));
  s.k = s.graph->tensor(heads("k", kK, B, KV, T, hs, row));
  s.v = s.graph->tensor(heads("v", kV, B, KV, T, hs, row));
  return s;
}

// Validates the graph, lets cuDNN's heuristics choose its plans and builds them; the error of the
// first step that fails.
fe::error_object build(fe::graph::Graph& graph) {
  if (fe::error_object e = graph.validate(); !e.is_good()) return e;
  if (fe::error_object e = graph.build_operation_graph(handle()); !e.is_good()) return e;
  if (fe::error_object e = graph.create_execution_plans({fe::HeurMode_t::A}); !e.is_good()) return e;
  if (fe::error_object e = graph.check_support(handle()); !e.is_good()) return e;
  return graph.build_plans(handle());
}

// out (B, NH, T, hs) of the (B, T, C) rows and the statistics, from q, k, v of the fused rows.
std::shared_ptr<fe::graph::Graph> forward_graph(const Key& key, int sm_version = 0) {
  const auto [B, T, NH, KV, hs, fp16] = key;
  const int64_t C = int64_t(NH) * hs;
  auto [graph, q, k, v] = start_graph(key, sm_version);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("flash_attention")
                     .set_generate_stats(true)
                     .set_causal_mask(true)
                     .set_attn_scale(graph->tensor(scale_value()));
  auto [o, stats] = graph->sdpa(q, k, v, options);
  as_heads(o->set_output(true), kO, B, NH, T, hs, C);
  as_statistics(stats->set_output(true), B, NH, T);
  return graph;
}

// dq, dk, dv into the fused rows of the gradients' 16-bit copy (dk and dv summed over each
// key/value head's group), from what forward kept and dO.
std::shared_ptr<fe::graph::Graph> backward_graph(const Key& key, int sm_version = 0) {
  const auto [B, T, NH, KV, hs, fp16] = key;
  const int64_t C = int64_t(NH) * hs, row = fused_row(key);
  auto [graph, q, k, v] = start_graph(key, sm_version);
  auto o = graph->tensor(heads("o", kO, B, NH, T, hs, C));
  auto dO = graph->tensor(heads("dO", kDO, B, NH, T, hs, C));
  fe::graph::Tensor_attributes stats_input;
  auto stats = graph->tensor(as_statistics(stats_input.set_name("stats"), B, NH, T));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("flash_attention_backward")
                     .set_deterministic_algorithm(true)
                     .set_causal_mask(true)
                     .set_attn_scale(graph->tensor(scale_value()));
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, dO, stats, options);
  as_heads(dq->set_output(true), kDQ, B, NH, T, hs, row);  // into the fused rows, as q, k, v
  as_heads(dk->set_output(true), kDK, B, KV, T, hs, row);
  as_heads(dv->set_output(true), kDV, B, KV, T, hs, row);
  return graph;
}

std::string describe(const Key& key) {
  const auto [B, T, NH, KV, hs, fp16] = key;
  return "B " + std::to_string(B) + ", T " + std::to_string(T) + ", " + std::to_string(NH) + " heads of " +
         std::to_string(hs) + (KV != NH ? " over " + std::to_string(KV) + " key/value heads" : std::string()) + ", " +
         (fp16 ? "fp16" : "bf16");
}

// The graphs of `key`, built on first use (a second or so each: cuDNN compiles or loads its
// kernels), and said once on stderr: which kernels run this size of attention, and why.
Graphs& graphs_for(const Key& key) {
  static std::map<Key, Graphs> cache;
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  Graphs g;
  std::string why;  // cuDNN's reason for refusing, where it does
  try {                // a handle cuDNN cannot create (no engine library for this GPU, ...) refuses too
    g = Graphs{forward_graph(key), backward_graph(key)};
    const fe::error_object forward = build(*g.forward);
    const fe::error_object e = forward.is_good() ? build(*g.backward) : forward;
    g.taken = e.is_good();
    why = e.err_msg;
  } catch (const std::exception& error) {
    g.taken = false;
    why = error.what();
  }
  if (g.taken)
    std::fprintf(stderr,
                 "kernels::cuda: the flash attention (%s) runs on cuDNN %s's fused attention (workspace: forward "
                 "%lld bytes, backward %lld)\n",
                 describe(key).c_str(), dotted_version(cudnnGetVersion()).c_str(), static_cast<long long>(g.forward->get_workspace_size()),
                 static_cast<long long>(g.backward->get_workspace_size()));
  else
    std::fprintf(stderr,
                 "kernels::cuda: the flash attention (%s) runs on our tensor-core kernels: cuDNN %s refused its "
                 "graph (%s)\n",
                 describe(key).c_str(), dotted_version(cudnnGetVersion()).c_str(), why.c_str());
  return cache.emplace(key, std::move(g)).first->second;
}

// cuDNN's attention kernels move their operands in 16-byte vectors and TMA tiles, so
// cudnn-frontend refuses a pointer not 16-byte aligned at execution (Hopper would compute wrong
// values from one): such a call goes to our kernels, said once.
bool aligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
      static const bool said = (std::fprintf(stderr, "kernels::cuda: a flash attention operand not 16-byte aligned "
                                                     "runs on our kernels (cuDNN's needs 16-byte alignment)\n"),
                                true);
      (void)said;
      return false;
    }
  return true;
}

// The variant pack's q, k, v (heads at columns 0, C and C + KV·hs of the fused rows) and the
// scale (passed by value: cuDNN reads it from `scale` at execution).
std::unordered_map<int64_t, void*> inputs(const FusedAttention& a, float& scale) {
  void* qkv = const_cast<void*>(a.qkv);
  const size_t C = size_t(a.NH) * a.hs, Ckv = size_t(a.KV) * a.hs;
  scale = a.scale;
  return {{kQ, qkv},
          {kK, static_cast<low16*>(qkv) + C},
          {kV, static_cast<low16*>(qkv) + C + Ckv},
          {kScale, &scale}};
}

Key key_of(const FusedAttention& a) { return {a.B, a.T, a.NH, a.KV, a.hs, a.values == Precision::fp16}; }

// cuDNN's workspace for one execution: stream-ordered, released behind it on the stream.
void execute(Context& ctx, fe::graph::Graph& graph, std::unordered_map<int64_t, void*>& pack, const char* what) {
  const cudnnStatus_t set = cudnnSetStream(handle(), stream_of(ctx));
  if (set != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string("cudnnSetStream: ") + cudnnGetErrorString(set));
  const int64_t bytes = graph.get_workspace_size();
  float* workspace = bytes > 0 ? stream_scratch(ctx, size_t(bytes + 3) / 4, "cudaMallocAsync (cuDNN's workspace)") : nullptr;
  const fe::error_object e = graph.execute(handle(), pack, workspace);
  if (workspace != nullptr) release_scratch(ctx, workspace);
  if (!e.is_good()) throw std::runtime_error(std::string(what) + ": cuDNN: " + e.err_msg);
  check_launch(what);
}

// cuDNN, opened by the first attention it could take; where it cannot be, that is said once and
// every attention runs on our kernels.
bool cudnn_loadable() {
  static const bool loadable = [] {
    const std::string& why = cudnn_library().problem();
    if (!why.empty())
      std::fprintf(stderr, "kernels::cuda: the flash attention runs on our tensor-core kernels: %s\n", why.c_str());
    return why.empty();
  }();
  return loadable;
}

}  // namespace

bool cudnn_attention_takes(Context& ctx, const FusedAttention& a) {
  if (!ctx.library_attention || a.values == Precision::fp32 || a.values != ctx.attention_operands || a.hs % 8 != 0 ||
      size_t(a.B) * a.T == 0 || !cudnn_loadable())
    return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  return graphs_for(key_of(a)).taken;
}

bool cudnn_attention_forward(Context& ctx, const FusedAttention& a, void* out, float* lse) {
  if (!aligned({a.qkv, out, lse})) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  Graphs& g = graphs_for(key_of(a));
  float scale;
  std::unordered_map<int64_t, void*> pack = inputs(a, scale);
  pack.insert({{kO, out}, {kStats, lse}});
  execute(ctx, *g.forward, pack, "flash_attention_forward (cuDNN)");
  return true;
}

bool cudnn_attention_backward(Context& ctx, const FusedAttention& a, float* dqkv, low16* dqkv_low, const float* dout,
                              const void* out, const float* lse) {
  if (!aligned({a.qkv, out, lse, dqkv_low})) return false;  // (the scratches are: cudaMallocAsync's)
  std::lock_guard<std::mutex> lock(g_mutex);
  Graphs& g = graphs_for(key_of(a));
  const size_t C = size_t(a.NH) * a.hs, Ckv = size_t(a.KV) * a.hs, n_out = size_t(a.B) * a.T * C;
  const size_t n_qkv = size_t(a.B) * a.T * (C + 2 * Ckv);
  // dy in the operand type (the f32 dout rounded, as our kernels round each tile of it).
  float* dy_scratch = stream_scratch(ctx, (n_out + 1) / 2, "cudaMallocAsync (cuDNN attention's dy)");
  low16* dy = reinterpret_cast<low16*>(dy_scratch);
  to_low(ctx, a.values, dy, dout, n_out);
  // dq, dk, dv in the operand type: into the copy the qkv GEMM reads, or a scratch where there is none.
  float* copy_scratch =
      dqkv_low == nullptr ? stream_scratch(ctx, (n_qkv + 1) / 2, "cudaMallocAsync (cuDNN attention's dqkv)") : nullptr;
  low16* gradients = dqkv_low != nullptr ? dqkv_low : reinterpret_cast<low16*>(copy_scratch);
  float scale;
  std::unordered_map<int64_t, void*> pack = inputs(a, scale);
  pack.insert({{kO, const_cast<void*>(out)},
               {kDO, dy},
               {kStats, const_cast<float*>(lse)},
               {kDQ, gradients},
               {kDK, gradients + C},
               {kDV, gradients + C + Ckv}});
  execute(ctx, *g.backward, pack, "flash_attention_backward (cuDNN)");
  release_scratch(ctx, dy_scratch);
  from_low(ctx, a.values, dqkv, gradients, n_qkv);  // the f32 gradients: the copy's values
  if (copy_scratch != nullptr) release_scratch(ctx, copy_scratch);
  return true;
}

std::string cudnn_attention_graph_check(const FusedAttention& a, int sm_version) {
  const Key key = key_of(a);
  for (const std::shared_ptr<fe::graph::Graph>& graph : {forward_graph(key, sm_version), backward_graph(key, sm_version)}) {
    if (fe::error_object e = graph->validate(); !e.is_good()) return e.err_msg;
  }
  return "";
}

bool cudnn_attention_built_in() { return true; }

std::string cudnn_attention_build() {
  if (const std::string& why = cudnn_library().problem(); !why.empty())
    return "our tensor-core kernels (cuDNN's fused attention is built in, but " + why + ")";
  return "cuDNN " + dotted_version(cudnnGetVersion()) + "'s fused attention (cudnn-frontend " +
         dotted_version(CUDNN_FRONTEND_VERSION) + "), our tensor-core kernels where it declines";
}

#else  // built without cuDNN's frontend (CUDNN=0, or make deps could not fetch it)

bool cudnn_attention_takes(Context&, const FusedAttention&) { return false; }
bool cudnn_attention_forward(Context&, const FusedAttention&, void*, float*) { return false; }
bool cudnn_attention_backward(Context&, const FusedAttention&, float*, low16*, const float*, const void*,
                              const float*) {
  return false;
}
bool cudnn_attention_built_in() { return false; }
std::string cudnn_attention_graph_check(const FusedAttention&, int) { return "built without cuDNN's frontend"; }
std::string cudnn_attention_build() { return "our tensor-core kernels (built without cuDNN's frontend)"; }

#endif

}  // namespace trident::kernels::cuda
