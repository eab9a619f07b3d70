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
  world = make_group_communicator(groups.world(), topology, "world", settings);
  pipeline = make_group_communicator(groups.pipeline(), topology, "pipeline", settings, Traffic::Pipeline);
  if (groups.member_of(layout::GroupKind::Embedding))
    embedding = make_group_communicator(groups.embedding(), topology, "embedding", settings, Traffic::Embedding);
}

}  // namespace trident
