// The job's groups over the MPI communicators of comm/mpi/groups.hpp.
#include "comm/job_groups.hpp"

#include "comm/group_collectives.hpp"
#include "comm/mpi/groups.hpp"

namespace trident::comm {

JobGroups::JobGroups(const layout::Grid& grid, const topo::Topology& topology)
    : groups_(std::make_unique<ProcessGroups>(grid, topology)) {}

JobGroups::~JobGroups() = default;

std::string JobGroups::verify(const layout::Grid& grid, const topo::Topology& topology) const {
  return verify_groups(*groups_, grid, topology);
}

bool JobGroups::member_of(layout::GroupKind kind) const { return groups_->member_of(kind); }

std::unique_ptr<Communicator> JobGroups::communicator(layout::GroupKind kind, const topo::Topology& topology,
                                                      const std::string& name,
                                                      const CollectiveSettings& settings, Traffic traffic) const {
  return make_group_communicator(groups_->group(kind), topology, name, settings, traffic);
}

std::unique_ptr<Communicator> JobGroups::world(const topo::Topology& topology,
                                               const CollectiveSettings& settings) const {
  return make_group_communicator(groups_->world(), topology, "world", settings);
}

}  // namespace trident::comm
