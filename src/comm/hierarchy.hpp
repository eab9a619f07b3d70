// Collectives over a group that know the three levels of the cluster. The hierarchical
// all-reduce of S bytes over a group with k members per node, r nodes per rack and q racks:
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

#include "comm/wrappers/emulated_links.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "comm/nccl/nccl_settings.hpp"
#include "comm/wrappers/staged.hpp"
#include "topo/topology.hpp"

namespace trident::comm {

struct CollectiveSettings {
  std::string algo = "auto";  // flat | hierarchical | auto | mpi
  Algo node_algo = Algo::Tree, rack_algo = Algo::Tree, cross_rack_algo = Algo::Ring;
  double timeout_s = 300;
  LinkModel links;  // emulated link speeds per level (off by default): make_group_communicator
  // mpi: MPI only. nccl: also an NCCL communicator per group and per level, which the
  // operations on device streams go to (comm.backend resolved: comm/nccl/nccl_settings.hpp).
  std::string backend = "mpi";
  NcclSettings nccl;  // the NCCL choices per level (backend = nccl)
  // backend = mpi with the model on a device: how its buffers are staged through host memory
  // (comm/wrappers/staged.hpp). Unset: the model is in host memory.
  DeviceCopies staging;
};

// Whether every node holds the same number of `members` (world ranks) and every rack the same
// number of their nodes: the condition of the hierarchical all-reduce.
bool regular_layout(const topo::Topology& t, const std::vector<int>& members);
// Whether the all-reduces of rank `me` over `members` go through a shared window
// (node_algo = shm): the whole group on one node, or its node level in the hierarchical
// all-reduce with more than one member on me's node. What the memory model counts.
bool uses_shared_window(const topo::Topology& t, const std::vector<int>& members, int me,
                        const CollectiveSettings& settings);

// The hierarchical all-reduce (sum) over level communicators, against the interface alone:
// reduce-scatter over `node`, all-reduce of this rank's segment over `rack`, then `cross`,
// all-gather over `node` — each started on `stream` after the one before (a device stream
// orders them; on the CPU each completes in its call). A null level has one member.
Work hierarchical_all_reduce(Communicator* node, Communicator* rack, Communicator* cross, void* data,
                             size_t count, DType dtype, Stream stream);

// The communicator of one group that knows the cluster's levels: its all-reduce is the
// hierarchical one above (or flat, by the settings); its other operations are the flat
// communicator's (reduce-scatter and all-gather: the ring). With backend = nccl, operations
// on a device stream go to the NCCL communicators of the same group and levels (the same
// hierarchy, through hierarchical_all_reduce), those on the CPU's stream to MPI.
class GroupCollectives final : public Communicator {
 public:
  // Collective over `group` (its ranks in any order). Builds the flat communicator and, when
  // every node holds the same number of the group's members, the per-level ones.
  // kind: the per-group traffic counter every transfer also counts into (Count: none).
  GroupCollectives(MPI_Comm group, const topo::Topology& topology, const std::string& name,
                   const CollectiveSettings& settings, Traffic kind = Traffic::Count);
  ~GroupCollectives();
  GroupCollectives(const GroupCollectives&) = delete;
  GroupCollectives& operator=(const GroupCollectives&) = delete;

  int rank() const override { return flat_->rank(); }
  int size() const override { return flat_->size(); }
  const std::string& name() const override { return flat_->name(); }
  LevelBytes traffic() const override;  // everything this rank sent and received, all levels
  // Sum (or maximum), by the algorithm the settings choose; 16-bit summed in f32.
  Work all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) override;
  Work reduce_scatter(void* data, size_t count, DType dtype, Op op, Stream stream) override;
  Work all_gather(void* data, size_t count, DType dtype, Stream stream) override;
  Work broadcast(void* data, size_t count, DType dtype, int root, Stream stream) override;
  Work send(const void* data, size_t count, DType dtype, int peer, int tag, Stream stream) override;
  Work recv(void* data, size_t count, DType dtype, int peer, int tag, Stream stream) override;
  Work gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) override;
  Work all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) override;
  Work barrier(Stream stream) override;
  Work fence(Stream stream) override;  // the device communicator's, on a device stream
  void observe_steps(StepObserver observer) override;  // every level's communicator reports

  MpiCommunicator& flat() { return *flat_; }
  MpiCommunicator& level(int level) { return level == 0 ? *node_ : level == 1 ? *rack_ : *cross_; }
  bool hierarchical() const { return use_hierarchy_; }
  topo::Level span() const { return span_; }  // the widest level between the group's members
  std::string describe() const;             // "hierarchical: node 2 × rack 2 × cross-rack 2"

 private:
  void all_reduce_f32(float* data, size_t n, Op op);
  void across_nodes(float* shard, size_t len);  // rack, then cross-rack (pipelined when large)
  // backend = nccl: the NCCL communicators over the flat group and (hierarchical) its levels.
  void make_device_communicators(MPI_Comm group, const topo::Topology& t, Traffic kind);
  Communicator& device(const char* operation);  // the flat one; a fault without backend = nccl
  Work device_all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream);
  CollectiveSettings settings_;
  topo::Level span_ = topo::Level::Node;
  std::unique_ptr<MpiCommunicator> flat_, node_, rack_, cross_;
  std::vector<float> wide_;  // a 16-bit buffer widened to f32 for its all-reduce
  MPI_Comm node_comm_ = MPI_COMM_NULL, rack_comm_ = MPI_COMM_NULL, cross_comm_ = MPI_COMM_NULL;
  bool use_hierarchy_ = false;
  // Null without backend = nccl, and for a level of one member.
  std::unique_ptr<Communicator> device_flat_, device_node_, device_rack_, device_cross_;
};

// The group's communicator as the settings make it: GroupCollectives, wrapped in EmulatedLinks
// when the link model slows a level.
std::unique_ptr<Communicator> make_group_communicator(MPI_Comm group, const topo::Topology& topology,
                                                      const std::string& name,
                                                      const CollectiveSettings& settings,
                                                      Traffic kind = Traffic::Count);

}  // namespace trident::comm
