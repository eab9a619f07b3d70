// The MPI communicators of a job: one for each parallel group this rank belongs to (tensor,
// pipeline, data, embedding, context) and one for each level of the cluster (node, rack, cross-rack,
// node leaders). Created together, collectively over MPI_COMM_WORLD, and freed together.
#pragma once

#include <mpi.h>

#include <string>

#include "layout/grid.hpp"
#include "topo/topology.hpp"

namespace trident::comm {

class ProcessGroups {
 public:
  // Collective over MPI_COMM_WORLD. Within every communicator, ranks keep world-rank order, so
  // a rank's position in its tensor group is its tp_rank, in its pipeline group its stage, in
  // its data group its dp_rank.
  ProcessGroups(const layout::Grid& grid, const topo::Topology& topology);
  ~ProcessGroups();
  ProcessGroups(const ProcessGroups&) = delete;
  ProcessGroups& operator=(const ProcessGroups&) = delete;

  MPI_Comm group(layout::GroupKind kind) const;  // MPI_COMM_NULL: not a member (embedding)
  bool member_of(layout::GroupKind kind) const { return group(kind) != MPI_COMM_NULL; }
  MPI_Comm world() const { return MPI_COMM_WORLD; }  // every rank of the job
  MPI_Comm tensor() const { return tensor_; }
  MPI_Comm pipeline() const { return pipeline_; }
  MPI_Comm data() const { return data_; }
  MPI_Comm embedding() const { return embedding_; }

  MPI_Comm node() const { return node_; }              // ranks of this node
  MPI_Comm rack() const { return rack_; }              // ranks of this rack
  MPI_Comm cross_rack() const { return cross_rack_; }  // same position in every rack
  MPI_Comm leaders() const { return leaders_; }        // local rank 0 of every node, else NULL

 private:
  MPI_Comm tensor_ = MPI_COMM_NULL, pipeline_ = MPI_COMM_NULL, data_ = MPI_COMM_NULL;
  MPI_Comm embedding_ = MPI_COMM_NULL, context_ = MPI_COMM_NULL;
  MPI_Comm node_ = MPI_COMM_NULL, rack_ = MPI_COMM_NULL, cross_rack_ = MPI_COMM_NULL;
  MPI_Comm leaders_ = MPI_COMM_NULL;
};

// Collective: checks that every communicator holds exactly the world ranks the grid and the
// topology say, in that order. Returns "" when all agree on every rank, else the first mismatch
// (the same text on every rank).
std::string verify_groups(const ProcessGroups& groups, const layout::Grid& grid,
                          const topo::Topology& topology);

}  // namespace trident::comm
