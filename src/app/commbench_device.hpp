// trident commbench on the job's device (kernels.device other than cpu): the collectives a job's
// device buffers meet, beside ours on host memory — with comm.backend = nccl NCCL's, with mpi
// ours staged through host copies (comm/wrappers/staged.hpp: a GPU shared by ranks, the guarded
// backend) — the all-reduce flat and, where the world spans nodes, hierarchical over its levels
// (as a job's gradients meet it), the reduce-scatter and the all-gather; and with NCCL each
// level's links by its all-reduce over the level: the links a job's NCCL collectives meet (NVLink
// inside a node), which MPI over host memory does not show.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/commbench_rows.hpp"
#include "comm/group_collectives.hpp"
#include "job/job.hpp"

namespace trident {

class DeviceCommbench {
 public:
  // Collective over the world, whose host communicators `world_group` holds (the same layout and
  // levels): the job's communicators over it, flat and (where it is) hierarchical, and over each
  // level of more than one rank.
  DeviceCommbench(comm::GroupCollectives& world_group, const Job& job);
  // The rows for `count` floats (count > 0) on this rank's device: a buffer of theirs.
  std::vector<CommbenchRow> rows(size_t count);
  // Level `level`'s α and bus bandwidth by NCCL's all-reduce over it (link_figures); {0, 0} for a
  // level of one rank, and without NCCL.
  std::pair<double, double> level_figures(int level);

 private:
  int rank_, size_;
  std::string name_;  // the rows' algorithm: "nccl", or "staged" (MPI through host copies)
  kernels::Context device_;  // the job's: its device, its stream
  std::unique_ptr<comm::Communicator> flat_, hierarchical_;  // hierarchical_: null where flat
  std::array<std::unique_ptr<comm::Communicator>, 3> levels_;  // null for a level of one rank
};

}  // namespace trident
