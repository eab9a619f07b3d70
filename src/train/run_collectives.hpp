// The collectives of one training run, made together: one per parallel group this rank
// belongs to and one over all ranks, each under the watchdog. The model (tensor, and context
// for ring attention), the pipeline runner (pipeline), the gradient reducer (data: data ×
// context), the tied embedding (embedding) and the step-boundary agreements (world) hold
// references into this bundle, which therefore is built before and outlives all of them.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "comm/job_groups.hpp"
#include "topo/topology.hpp"

namespace trident {

struct RunCollectives {
  // Collective over every group of `groups`.
  RunCollectives(const comm::JobGroups& groups, const topo::Topology& topology,
                 const comm::CollectiveSettings& settings);

  // The step-boundary agreements over all ranks (NaN skip, stop signal, checkpoint due): under
  // the watchdog, so that a rank that died cannot leave the others waiting in them.
  std::unique_ptr<comm::Communicator> world;
  std::unique_ptr<comm::Communicator> tensor, pipeline, data, context;
  std::unique_ptr<comm::Communicator> embedding;  // the first and last stage's ranks; else null

  // This rank's position in its data and pipeline groups (groups keep world-rank order).
  int dp_rank() const { return data->rank(); }
  int dp_size() const { return data->size(); }
  int pp_rank() const { return pipeline->rank(); }
  int pp_size() const { return pipeline->size(); }
};

}  // namespace trident
