// Creating and checking the job's communicators.
#include "comm/mpi/groups.hpp"

#include <vector>

#include "comm/agreement.hpp"
#include "comm/mpi/native_handle.hpp"
#include "core/error.hpp"
#include "core/mpi_util.hpp"

namespace trident::comm {
namespace {

using layout::GroupKind;

// MPI_Comm_split with the world rank as key: members keep world-rank order.
MPI_Comm split_world(int color) {
  MPI_Comm result = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, world_rank(), &result));
  return result;
}

void free_comm(MPI_Comm& comm) {
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

// World ranks of the members of `comm`, in communicator order (empty for MPI_COMM_NULL).
std::vector<int> members_of(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return {};
  int size = 0, me = world_rank();
  MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<int> members(size);
  MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, members.data(), 1, MPI_INT, comm));
  return members;
}

// World ranks that the topology puts in the same level group as `rank`.
std::vector<int> expected_level_members(const topo::Topology& topology, int rank,
                                        const char* level) {
  const topo::RankPlace& me = topology.place(rank);
  std::vector<int> members;
  for (int r = 0; r < topology.world_size(); ++r) {
    const topo::RankPlace& p = topology.place(r);
    const bool same = std::string(level) == "node"         ? p.node == me.node
                      : std::string(level) == "rack"       ? p.rack == me.rack
                      : std::string(level) == "cross-rack" ? p.rank_in_rack == me.rank_in_rack
                                                           : p.local_rank == 0 && me.local_rank == 0;
    if (same) members.push_back(r);
  }
  return members;
}

std::string describe(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return "[" + text + "]";
}

}  // namespace

ProcessGroups::ProcessGroups(const layout::Grid& grid, const topo::Topology& topology) {
  const int me = world_rank();
  auto color_of = [&](GroupKind kind) {
    const std::vector<int> members = grid.group(kind, me);
    return members.empty() ? MPI_UNDEFINED : members.front();
  };
  tensor_ = split_world(color_of(GroupKind::Tensor));
  pipeline_ = split_world(color_of(GroupKind::Pipeline));
  data_ = split_world(color_of(GroupKind::Data));
  embedding_ = split_world(color_of(GroupKind::Embedding));
  context_ = split_world(color_of(GroupKind::Context));
  const topo::RankPlace& place = topology.place(me);
  node_ = split_world(place.node);
  rack_ = split_world(place.rack);
  cross_rack_ = split_world(place.rank_in_rack);
  leaders_ = split_world(place.local_rank == 0 ? 0 : MPI_UNDEFINED);
}

ProcessGroups::~ProcessGroups() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm* comm : {&tensor_, &pipeline_, &data_, &embedding_, &context_, &node_, &rack_, &cross_rack_,
                         &leaders_})
    free_comm(*comm);
}

MPI_Comm ProcessGroups::group(GroupKind kind) const {
  switch (kind) {
    case GroupKind::Tensor: return tensor_;
    case GroupKind::Pipeline: return pipeline_;
    case GroupKind::Data: return data_;
    case GroupKind::Embedding: return embedding_;
    case GroupKind::Context: return context_;
  }
  return MPI_COMM_NULL;
}

std::string verify_groups(const ProcessGroups& groups, const layout::Grid& grid,
                          const topo::Topology& topology) {
  const int me = world_rank();
  std::string problem;
  for (GroupKind kind : {GroupKind::Tensor, GroupKind::Pipeline, GroupKind::Data,
                         GroupKind::Embedding, GroupKind::Context}) {
    const std::vector<int> actual = members_of(groups.group(kind));
    const std::vector<int> expected = grid.group(kind, me);
    if (problem.empty() && actual != expected)
      problem = std::string(layout::group_kind_name(kind)) + " communicator of rank " +
                std::to_string(me) + " holds " + describe(actual) + ", expected " +
                describe(expected);
  }
  const std::pair<const char*, MPI_Comm> levels[] = {{"node", groups.node()},
                                                     {"rack", groups.rack()},
                                                     {"cross-rack", groups.cross_rack()},
                                                     {"leaders", groups.leaders()}};
  for (const auto& [level, comm] : levels) {
    std::vector<int> expected = expected_level_members(topology, me, level);
    if (std::string(level) == "leaders" && topology.place(me).local_rank != 0) expected.clear();
    const std::vector<int> actual = members_of(comm);
    if (problem.empty() && actual != expected)
      problem = std::string(level) + " communicator of rank " + std::to_string(me) + " holds " +
                describe(actual) + ", expected " + describe(expected);
  }
  // Every rank must return the same verdict: the lowest rank's problem, if any.
  return first_error(*over_native(MPI_COMM_WORLD, "world"), problem);
}

}  // namespace trident::comm
