// The communicator of one group: the router between the host's collectives (MPI, flat or over
// the cluster's levels: comm/algorithms/hierarchical.hpp) and the device's (NCCL, flat or over
// the same levels), by the stream an operation is ordered on; and make_group_communicator, the
// factory that wraps it in the link emulation and the device staging the settings ask for.
#pragma once

#include <memory>
#include <string>

#include "comm/algorithms/hierarchical.hpp"
#include "comm/collective_settings.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "topo/topology.hpp"

namespace trident::comm {

// The communicator of one group that knows the cluster's levels: its all-reduce is the
// hierarchical one (HostLevels, or flat, by the settings) for f32, and the flat ring with 16-bit
// messages for 16-bit values (comm/mpi/mpi_communicator.hpp); its other operations are the flat communicator's
// (reduce-scatter and all-gather: the ring). With backend = nccl, operations
// on a device stream go to the NCCL communicators of the same group and levels (the same
// hierarchy, through hierarchical_all_reduce), those on the CPU's stream to MPI.
class GroupCollectives final : public Communicator {
 public:
  // Collective over `group` (its ranks in any order). Builds the flat communicator and, when
  // every node holds the same number of the group's members, the per-level ones.
  // kind: the per-group traffic counter every transfer also counts into (Count: none).
  GroupCollectives(MPI_Comm group, const topo::Topology& topology, const std::string& name,
                   const CollectiveSettings& settings, Traffic kind = Traffic::Count);
  // The same over the ranks of a plain MPI communicator (comm/world.hpp), which outlives it.
  GroupCollectives(Communicator& group, const topo::Topology& topology, const std::string& name,
                   const CollectiveSettings& settings, Traffic kind = Traffic::Count);
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
  Work send_recv(const void* out, void* in, size_t count, DType dtype, int to, int from, int tag,
                 Stream stream) override;
  Work gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) override;
  Work all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) override;
  Work barrier(Stream stream) override;
  Work fence(Stream stream) override;  // the device communicator's, on a device stream
  void observe_steps(StepObserver observer) override;  // every level's communicator reports

  MpiCommunicator& flat() { return *flat_; }
  MpiCommunicator& level(int level) { return levels_->level(level); }
  bool hierarchical() const { return use_hierarchy_; }
  topo::Level span() const { return span_; }  // the widest level between the group's members
  std::string describe() const;             // "hierarchical: node 2 × rack 2 × cross-rack 2"

 private:
  void all_reduce_f32(float* data, size_t n, Op op);
  // backend = nccl: the NCCL communicators over the flat group and (hierarchical) its levels.
  void make_device_communicators(MPI_Comm group, const topo::Topology& t, Traffic kind);
  Communicator& device(const char* operation);  // the flat one; a fault without backend = nccl
  Work device_all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream);
  CollectiveSettings settings_;
  topo::Level span_ = topo::Level::Node;
  std::unique_ptr<MpiCommunicator> flat_;
  std::unique_ptr<HostLevels> levels_;  // split for every group: the splits are collective
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
// The same over the ranks of a plain MPI communicator (comm/world.hpp), which outlives it.
std::unique_ptr<Communicator> make_group_communicator(Communicator& group, const topo::Topology& topology,
                                                      const std::string& name,
                                                      const CollectiveSettings& settings,
                                                      Traffic kind = Traffic::Count);

}  // namespace trident::comm
