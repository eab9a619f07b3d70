// A step's timeline from the stages' action lists (pipeline/schedule.hpp), given how long each
// pass takes and transfers taking no time: each stage runs its actions in order, each as soon as
// the stage is free and its inputs exist (F i on virtual stage u = chunk·p + s needs F i on
// u − 1; B i needs F i on u and B i on u + 1; W i needs B i on u). A chunk's pass takes its
// stage's time over the number of chunks. What the schedule tests check the lists with (every
// action runs: no deadlock; the dependencies; the slots), and what bubble_fraction's closed
// forms are checked against.
#pragma once

#include <stdexcept>
#include <vector>

#include "pipeline/schedule.hpp"

namespace trident::pipeline {

struct PassTimes {
  double forward = 1, input_gradient = 1, weight_gradient = 1;  // a whole backward: the last two
};

struct Timeline {
  double span = 0;                  // first start to last finish over all stages
  std::vector<double> busy;         // per stage: the sum of its passes' times
  std::vector<int> peak_held;       // per stage: micro-batches one chunk holds at once (F done, last backward pass not)
  double bubble() const;            // 1 − Σ busy / (stages · span)
};

// std::runtime_error naming the stage and its action when the lists deadlock, or when an action
// repeats or is missing (every stage runs F, and B + W or a whole backward, of every micro-batch
// once).
Timeline simulate(const std::vector<std::vector<Action>>& stage_lists, int micro_batches, const PassTimes& times);
// Each stage's own pass times (stage_times[s]).
Timeline simulate(const std::vector<std::vector<Action>>& stage_lists, int micro_batches,
                  const std::vector<PassTimes>& stage_times);
// The bubble of `schedule` over stage_times.size() stages with each stage's own pass times: what
// a run's measured stage times imply (with equal stages, bubble_fraction's). A schedule that does
// not split the backward runs input_gradient + weight_gradient as one pass.
double implied_bubble(Schedule schedule, int micro_batches, const std::vector<PassTimes>& stage_times,
                      int chunks = 1);

}  // namespace trident::pipeline
