// The step's timeline of a schedule: sweeps over the stages, each running its next action once
// its inputs exist, until no stage can go on.
#include "pipeline/timeline.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

namespace trident::pipeline {
namespace {

constexpr double kNotYet = std::numeric_limits<double>::infinity();

const char* pass_letter(Pass pass) {
  switch (pass) {
    case Pass::Forward: return "F";
    case Pass::Backward: return "B+W";
    case Pass::InputGradient: return "B";
    case Pass::WeightGradient: return "W";
  }
  return "?";
}

std::string describe(int stage, const Action& a) {
  return "stage " + std::to_string(stage) + ", " + pass_letter(a.pass) + " of micro-batch " +
         std::to_string(a.micro_batch) + (a.chunk ? " in chunk " + std::to_string(a.chunk) : "");
}

// Finish times per micro-batch of one virtual stage's passes.
struct VirtualStage {
  std::vector<double> forward_done, input_done, weights_done;
};

struct StageState {
  size_t next = 0;
  double free_at = 0, first_start = kNotYet;
  std::vector<int> held;  // per chunk
};

}  // namespace

double implied_bubble(Schedule schedule, int micro_batches, const std::vector<PassTimes>& stage_times, int chunks) {
  const int stages = static_cast<int>(stage_times.size());
  std::vector<std::vector<Action>> lists;
  for (int s = 0; s < stages; ++s) lists.push_back(stage_actions(schedule, s, stages, micro_batches, chunks));
  return simulate(lists, micro_batches, stage_times).bubble();
}

double Timeline::bubble() const {
  if (busy.empty() || span <= 0) return 0.0;
  return 1.0 - std::accumulate(busy.begin(), busy.end(), 0.0) / (static_cast<double>(busy.size()) * span);
}

Timeline simulate(const std::vector<std::vector<Action>>& lists, int m, const PassTimes& times) {
  return simulate(lists, m, std::vector<PassTimes>(lists.size(), times));
}

Timeline simulate(const std::vector<std::vector<Action>>& lists, int m, const std::vector<PassTimes>& stage_times) {
  const int stages = static_cast<int>(lists.size());
  if (stage_times.size() != lists.size()) throw std::logic_error("simulate: pass times for each stage, and only those");
  int chunks = 1;
  for (const auto& list : lists)
    for (const Action& a : list) {
      if (a.chunk < 0) throw std::runtime_error("a negative chunk");
      chunks = std::max(chunks, a.chunk + 1);
    }
  const int virtual_stages = stages * chunks;
  std::vector<VirtualStage> vs(virtual_stages);
  for (VirtualStage& v : vs) v.forward_done = v.input_done = v.weights_done = std::vector<double>(m, kNotYet);
  std::vector<StageState> state(stages);
  for (StageState& st : state) st.held.assign(chunks, 0);
  Timeline t;
  t.busy.assign(stages, 0.0);
  t.peak_held.assign(stages, 0);
  auto ready_at = [&](int v, const Action& a) {  // when its inputs exist (kNotYet: not yet)
    const int i = a.micro_batch;
    switch (a.pass) {
      case Pass::Forward: return v == 0 ? 0.0 : vs[v - 1].forward_done[i];
      case Pass::Backward:
      case Pass::InputGradient:
        return std::max(vs[v].forward_done[i], v == virtual_stages - 1 ? 0.0 : vs[v + 1].input_done[i]);
      case Pass::WeightGradient: return vs[v].input_done[i];
    }
    return kNotYet;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      StageState& st = state[s];
      const PassTimes& times = stage_times[s];
      while (st.next < lists[s].size()) {
        const Action& a = lists[s][st.next];
        if (a.micro_batch < 0 || a.micro_batch >= m) throw std::runtime_error(describe(s, a) + ": no such micro-batch");
        const int v = a.chunk * stages + s;
        const double ready = ready_at(v, a);
        if (ready == kNotYet) break;
        const int i = a.micro_batch;
        double duration = 0;
        std::vector<double>* done = nullptr;
        switch (a.pass) {
          case Pass::Forward: duration = times.forward, done = &vs[v].forward_done; break;
          case Pass::InputGradient: duration = times.input_gradient, done = &vs[v].input_done; break;
          case Pass::WeightGradient: duration = times.weight_gradient, done = &vs[v].weights_done; break;
          case Pass::Backward: duration = times.input_gradient + times.weight_gradient, done = &vs[v].input_done; break;
        }
        duration /= chunks;  // a chunk's share of the stage's pass
        if ((*done)[i] != kNotYet) throw std::runtime_error(describe(s, a) + " runs twice");
        const double start = std::max(st.free_at, ready);
        st.first_start = std::min(st.first_start, start);
        st.free_at = start + duration;
        (*done)[i] = st.free_at;
        if (a.pass == Pass::Backward) vs[v].weights_done[i] = st.free_at;
        st.held[a.chunk] += a.pass == Pass::Forward ? 1 : a.pass == Pass::InputGradient ? 0 : -1;
        t.peak_held[s] = std::max(t.peak_held[s], st.held[a.chunk]);
        t.busy[s] += duration;
        ++st.next;
        progress = true;
      }
    }
  }
  double first = kNotYet, last = 0;
  for (int s = 0; s < stages; ++s) {
    const StageState& st = state[s];
    if (st.next < lists[s].size()) throw std::runtime_error(describe(s, lists[s][st.next]) + " waits forever (deadlock)");
    first = std::min(first, st.first_start);
    last = std::max(last, st.free_at);
  }
  for (int v = 0; v < virtual_stages; ++v)
    for (int i = 0; i < m; ++i)
      if (vs[v].forward_done[i] == kNotYet || vs[v].weights_done[i] == kNotYet)
        throw std::runtime_error("stage " + std::to_string(v % stages) + " never runs all passes of micro-batch " +
                                 std::to_string(i) + (chunks > 1 ? " in chunk " + std::to_string(v / stages) : ""));
  t.span = stages > 0 ? last - first : 0.0;
  return t;
}

}  // namespace trident::pipeline
