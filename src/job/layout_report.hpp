// What `trident layout` prints: the rank table, the levels every kind of parallel group spans,
// and warnings where the launch order puts groups across nodes or racks needlessly.
// Pure functions of the grid and the topology (unit-tested without MPI).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "layout/grid.hpp"
#include "topo/topology.hpp"

namespace trident {

struct GroupSpans {
  layout::GroupKind kind;
  int group_size = 0;
  int groups = 0;
  std::array<int, 3> by_level{};  // groups whose widest level is node, rack, cross-rack
};

std::vector<GroupSpans> group_spans(const layout::Grid& grid, const topo::Topology& topology);

// Warnings: tensor groups crossing nodes, data groups crossing racks, when numbering the ranks
// node by node (a block distribution) would make fewer of them cross.
std::vector<std::string> placement_warnings(const layout::Grid& grid,
                                            const topo::Topology& topology);

std::string rank_table(const layout::Grid& grid, const topo::Topology& topology);
std::string spans_table(const layout::Grid& grid, const topo::Topology& topology);

}  // namespace trident
