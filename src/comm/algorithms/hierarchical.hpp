// The hierarchical all-reduce over a group's three levels of the cluster. Of S bytes, over a group with k members per node, r nodes per rack and q racks:
//   1. reduce-scatter inside the node (ring, or shared memory with comm.node_algo = shm):
//      member j ends with the node's sum of segment j
//   2. all-reduce of segment j among the members j of the rack's other nodes (comm.rack_algo)
//   3. all-reduce of segment j among the members j at the same place in the other racks
//      (comm.cross_rack_algo)
//   4. all-gather inside the node (ring, or shared memory)
// Bytes each rank sends (S divisible by k, rings): node 2(k−1)/k·S, rack 2(r−1)/r·S/k,
// cross-rack 2(q−1)/q·S/k — what crosses the rack boundary is S/k, against 2(n−1)/n·S of a
// flat ring over all n = k·r·q members, most of which crosses racks. With a tree at a level a
// member sends S/k up (all but the root) and S/k to each of its children.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/collective_settings.hpp"
#include "comm/communicator.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "topo/topology.hpp"

namespace trident::comm {

// Whether every node holds the same number of `members` (world ranks) and every rack the same
// number of their nodes: the condition of the hierarchical all-reduce.
bool regular_layout(const topo::Topology& t, const std::vector<int>& members);
// Whether the all-reduces of rank `me` over `members` go through a shared window
// (node_algo = shm): the whole group on one node, or its node level in the hierarchical
// all-reduce with more than one member on me's node. What the memory model counts.
bool uses_shared_window(const topo::Topology& t, const std::vector<int>& members, int me,
                        const CollectiveSettings& settings);

// Collective over `group`: the world ranks of its members in group order, and the level at
// which each of them is from this rank.
std::vector<int> world_ranks_of(MPI_Comm group);
std::vector<topo::Level> levels_of(MPI_Comm group, const topo::Topology& t);

// The hierarchical all-reduce (sum) over level communicators, against the interface alone:
// reduce-scatter over `node`, all-reduce of this rank's segment over `rack`, then `cross`,
// all-gather over `node` — each started on `stream` after the one before (a device stream
// orders them; on the CPU each completes in its call). A null level has one member. What the
// NCCL level communicators run.
Work hierarchical_all_reduce(Communicator* node, Communicator* rack, Communicator* cross, void* data,
                             size_t count, DType dtype, Stream stream);

// A group's MPI communicators per level, split from the group — node (the members on this
// rank's node), rack (the members at this rank's place on the other nodes of its rack) and
// cross-rack (those at this rank's place in the other racks) — and the host all-reduce over
// them: steps 1-4 above, the rack and cross-rack steps pipelined in pieces when the shard is
// large.
class HostLevels {
 public:
  // Collective over `group`: every member takes part in the splits, regular layout or not.
  HostLevels(MPI_Comm group, const std::vector<int>& members, const topo::Topology& t, const std::string& name,
             const CollectiveSettings& settings, Traffic kind);
  ~HostLevels();
  HostLevels(const HostLevels&) = delete;
  HostLevels& operator=(const HostLevels&) = delete;

  MpiCommunicator& level(int level) { return level == 0 ? *node_ : level == 1 ? *rack_ : *cross_; }
  const MpiCommunicator& level(int level) const { return level == 0 ? *node_ : level == 1 ? *rack_ : *cross_; }
  MPI_Comm handle(int level) const { return level == 0 ? node_comm_ : level == 1 ? rack_comm_ : cross_comm_; }
  // The sum over the group of `n` floats at `data`, in place.
  void all_reduce_f32(float* data, size_t n);
  std::string describe() const;  // "hierarchical: node 2 x rack 2 x cross-rack 2"

 private:
  void across_nodes(float* shard, size_t len);  // rack, then cross-rack (pipelined when large)
  Algo node_algo_, rack_algo_, cross_rack_algo_;
  MPI_Comm node_comm_ = MPI_COMM_NULL, rack_comm_ = MPI_COMM_NULL, cross_comm_ = MPI_COMM_NULL;
  std::unique_ptr<MpiCommunicator> node_, rack_, cross_;
};

// An MPI communicator over `comm`, its members' levels from the topology.
std::unique_ptr<MpiCommunicator> make_mpi_communicator(MPI_Comm comm, const topo::Topology& t, const std::string& name,
                                                       const CollectiveSettings& settings, Traffic kind);

}  // namespace trident::comm
