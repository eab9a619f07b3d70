// The bundle of a run's collectives.
#include "train/run_collectives.hpp"

#include "comm/traffic.hpp"

namespace trident {

RunCollectives::RunCollectives(const comm::ProcessGroups& groups, const topo::Topology& topology,
                               const comm::CollectiveSettings& settings) {
  using comm::GroupCollectives;
  using comm::Traffic;
  tensor = std::make_unique<GroupCollectives>(groups.tensor(), topology, "tensor", settings, Traffic::Tensor);
  data = std::make_unique<GroupCollectives>(groups.data(), topology, "data", settings, Traffic::Data);
  world = std::make_unique<GroupCollectives>(MPI_COMM_WORLD, topology, "world", settings);
  pipeline = std::make_unique<GroupCollectives>(groups.pipeline(), topology, "pipeline", settings,
                                                Traffic::Pipeline);
  if (groups.embedding() != MPI_COMM_NULL)
    embedding = std::make_unique<GroupCollectives>(groups.embedding(), topology, "embedding", settings,
                                                   Traffic::Embedding);
}

}  // namespace trident
