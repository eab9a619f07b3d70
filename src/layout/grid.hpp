// The parallel grid: world = tensor x pipeline x data, and the arithmetic between a world rank,
// its (tp, dp, pp) coordinates and the members of its groups. Pure arithmetic, no MPI.
//
// A rank is the mixed-radix number  world_rank = tp_rank + tp * (dp_rank + dp * pp_rank):
// tensor fastest, then data, then pipeline. Why this order: launchers number ranks node by node
// (srun --distribution=block, mpirun --map-by core), so consecutive ranks share a node.
//  - Tensor groups communicate most and cannot hide it (two all-reduces per block in forward and
//    two in backward, on the critical path): they get consecutive ranks, i.e. one node.
//  - Data groups move the most bytes but once per step and overlapped with backward, through a
//    hierarchical all-reduce: next, so a data group stays within as few nodes / racks as possible.
//  - Pipeline groups exchange one activation per micro-batch point-to-point, latency-tolerant
//    and overlappable: outermost, free to cross racks.
// This is Megatron-LM's default order (tp-dp-pp).
//
// Context parallelism (parallel.context = c) splits each replica's sequences over c ranks,
// which hold the same parameters: the data group is then data × context — its dp_size() = d·c
// ranks sum the gradients — and a replica's context ranks are its c consecutive dp ranks:
// dp = context_rank + c · replica. So the order is tensor, context, data, pipeline, and the
// context group, which passes keys and values every layer, sits next to the tensor group.
#pragma once

#include <string>
#include <vector>

namespace trident::layout {

struct Coord {
  int tp = 0;  // tensor rank
  int dp = 0;  // data rank
  int pp = 0;  // pipeline stage
  bool operator==(const Coord& o) const { return tp == o.tp && dp == o.dp && pp == o.pp; }
};

enum class GroupKind { Tensor, Pipeline, Data, Embedding, Context };
const char* group_kind_name(GroupKind kind);  // "tensor", "pipeline", "data", "embedding", "context"

class Grid {
 public:
  // Each >= 1; dp_size the data group's ranks (data × context), a multiple of cp_size.
  Grid(int tp_size, int pp_size, int dp_size, int cp_size = 1);

  int tp_size() const { return tp_size_; }
  int pp_size() const { return pp_size_; }
  int dp_size() const { return dp_size_; }
  int cp_size() const { return cp_size_; }
  int replicas() const { return dp_size_ / cp_size_; }  // the data replicas: sequences split d ways
  int world_size() const { return tp_size_ * pp_size_ * dp_size_; }
  // Of a data rank: its context rank (which chunks of the sequence) and its replica (which sequences).
  int context_rank(const Coord& c) const { return c.dp % cp_size_; }
  int replica(const Coord& c) const { return c.dp / cp_size_; }

  Coord coord_of(int world_rank) const;
  int rank_of(const Coord& coord) const;

  // Members of world_rank's group of that kind, in world-rank order (which is also the order of
  // the varying coordinate: tensor group by tp_rank, pipeline group by stage, data group by
  // dp_rank, context group by context rank, embedding group first stage then last). The embedding group (the tied token
  // embedding's copies on the first and last stage) is empty for ranks on middle stages, and
  // is a single rank when pipeline = 1.
  std::vector<int> group(GroupKind kind, int world_rank) const;

  // Every group of that kind, each once, ordered by its lowest member.
  std::vector<std::vector<int>> all_groups(GroupKind kind) const;

  // Index of world_rank's group among all_groups(kind); -1 when it belongs to none.
  int group_index(GroupKind kind, int world_rank) const;

 private:
  int tp_size_, pp_size_, dp_size_, cp_size_;
};

}  // namespace trident::layout
