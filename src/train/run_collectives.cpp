// The bundle of a run's collectives.
#include "train/run_collectives.hpp"

namespace trident {

RunCollectives::RunCollectives(const comm::JobGroups& groups, const topo::Topology& topology,
                               const comm::CollectiveSettings& settings) {
  using layout::GroupKind;
  using comm::Traffic;
  tensor = groups.communicator(GroupKind::Tensor, topology, "tensor", settings, Traffic::Tensor);
  data = groups.communicator(GroupKind::Data, topology, "data", settings, Traffic::Data);
  context = groups.communicator(GroupKind::Context, topology, "context", settings, Traffic::Context);
  // The world group carries host values only (the step's agreements, figures, a gathered model):
  // no NCCL communicator for it, which would cost device memory and start-up time for nothing.
  comm::CollectiveSettings host_only = settings;
  host_only.backend = "mpi";
  world = groups.world(topology, host_only);
  pipeline = groups.communicator(GroupKind::Pipeline, topology, "pipeline", settings, Traffic::Pipeline);
  if (groups.member_of(GroupKind::Embedding))
    embedding = groups.communicator(GroupKind::Embedding, topology, "embedding", settings, Traffic::Embedding);
}

}  // namespace trident
