// parallel.layout = auto: the planner's best feasible layout for the job's ranks.
#include "job/auto_layout.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "core/log.hpp"
#include "job/plan_inputs.hpp"
#include "pipeline/schedule.hpp"
#include "plan/search.hpp"

namespace trident {
namespace {

// "tensor 2 x pipeline 2 x data 1, micro-batch 2, recompute none, 1f1b, ..." as the deck keys say it.
std::string describe(const plan::Candidate& c) {
  const plan::Layout& l = c.layout;
  char text[400];
  std::snprintf(text, sizeof text,
                "tensor %d x pipeline %d x data %d x context %d, micro-batch %d, recompute %s, schedule %s%s%s%s, "
                "ZeRO-%d: %.4g tokens/s, %.3g %s per device",
                l.tensor, l.pipeline, l.data, l.context, l.micro_batch, l.recompute.c_str(),
                pipeline::schedule_name(l.schedule).c_str(),
                l.virtual_stages > 1 ? (", " + std::to_string(l.virtual_stages) + " chunks per stage").c_str() : "",
                l.sequence_parallel ? ", sequence parallel" : "", l.tp_comm_overlap ? " with overlap" : "",
                l.zero, c.estimate.tokens_per_s,
                c.estimate.memory_total >= 1e9 ? c.estimate.memory_total / 1e9 : c.estimate.memory_total / 1e6,
                c.estimate.memory_total >= 1e9 ? "GB" : "MB");
  return text;
}

}  // namespace

std::vector<deck::Override> choose_layout(comm::Communicator& world, const RunSettings& settings,
                                          const deck::Record& deck) {
  const std::string& profile = settings.parallel.hardware;
  const plan::Hardware hw = load_hardware(world, profile, deck.cite("parallel.hardware"));
  const plan::Workload w = workload_from(settings, deck);
  const int ranks = world.size();
  const std::vector<plan::Candidate> ranked = plan::search_layouts(w, layout_from(settings, hw), ranks, hw);
  const plan::Candidate* best = plan::best_feasible(ranked);
  if (best == nullptr)
    fatal_all(deck.cite("parallel.layout") + ", but no layout of " + count_of(ranks, "rank") + " fits " + hw.name +
              "'s memory" + (ranked.empty() ? " (none is runnable: see trident plan)"
                                            : "; the least memory needs " +
                                                  std::to_string(ranked.front().estimate.memory_total / 1e9) +
                                                  " GB per device (" + ranked.front().estimate.reason + ")") +
              "; launch more ranks or make the model smaller");
  int feasible = 0;
  for (const plan::Candidate& c : ranked) feasible += c.estimate.feasible ? 1 : 0;
  print0("parallel.layout = auto: " + describe(*best) + " — predicted the best of " + std::to_string(feasible) +
         " feasible layouts of " + count_of(ranks, "rank") + " on " + hw.name + " (" + profile_path(profile) + ")");
  if (feasible > 1) print0("  the runner-up: " + describe(ranked[1]));
  return layout_overrides(best->layout);
}

}  // namespace trident
