// The bundle of a run's collectives.
#include "train/run_collectives.hpp"

#include "comm/traffic.hpp"

namespace trident {

RunCollectives::RunCollectives(const comm::ProcessGroups& groups, const topo::Topology& topology,
                               const comm::CollectiveSettings& settings) {
  using comm::make_group_communicator;
  using comm::Traffic;
  tensor = make_group_communicator(groups.tensor(), topology, "tensor", settings, Traffic::Tensor);
  data = make_group_communicator(groups.data(), topology, "data", settings, Traffic::Data);
  // The world group carries host values only (the step's agreements, figures, a gathered model):
  // no NCCL communicator for it, which would cost device memory and start-up time for nothing.
  comm::CollectiveSettings host_only = settings;
  host_only.backend = "mpi";
  world = make_group_communicator(groups.world(), topology, "world", host_only);
  pipeline = make_group_communicator(groups.pipeline(), topology, "pipeline", settings, Traffic::Pipeline);
  if (groups.member_of(layout::GroupKind::Embedding))
    embedding = make_group_communicator(groups.embedding(), topology, "embedding", settings, Traffic::Embedding);
}

}  // namespace trident
