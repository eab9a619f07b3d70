// The parallel groups of a job — tensor, pipeline, data, embedding, and the world — as the
// code above comm/ sees them: which groups this rank belongs to, and the communicator of each,
// made by the settings (comm/group_collectives.hpp: hierarchical, NCCL, link emulation). The
// MPI communicators under them (comm/mpi/groups.hpp) stay inside comm/.
#pragma once

#include <memory>
#include <string>

#include "comm/collective_settings.hpp"
#include "comm/communicator.hpp"
#include "comm/traffic.hpp"
#include "layout/grid.hpp"
#include "topo/topology.hpp"

namespace trident::comm {

class ProcessGroups;

class JobGroups {
 public:
  // Collective over every rank of the job. Within every group, ranks keep world-rank order, so
  // a rank's position in its tensor group is its tp_rank, in its pipeline group its stage, in
  // its data group its dp_rank.
  JobGroups(const layout::Grid& grid, const topo::Topology& topology);
  ~JobGroups();
  JobGroups(const JobGroups&) = delete;
  JobGroups& operator=(const JobGroups&) = delete;

  // Collective: "" when every group holds exactly the world ranks the grid and the topology
  // say, in that order, on every rank; else the first mismatch (the same text on every rank).
  std::string verify(const layout::Grid& grid, const topo::Topology& topology) const;

  bool member_of(layout::GroupKind kind) const;  // false: not a member (embedding)
  // Collective over the group (every member must call it): its communicator, by `settings`;
  // `traffic`: the per-group counter its transfers count into (Count: none).
  std::unique_ptr<Communicator> communicator(layout::GroupKind kind, const topo::Topology& topology,
                                             const std::string& name, const CollectiveSettings& settings,
                                             Traffic traffic) const;
  // Collective over every rank: the world's, by `settings`.
  std::unique_ptr<Communicator> world(const topo::Topology& topology, const CollectiveSettings& settings) const;

 private:
  std::unique_ptr<ProcessGroups> groups_;
};

}  // namespace trident::comm
