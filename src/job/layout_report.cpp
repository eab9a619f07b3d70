// The layout report.
#include "job/layout_report.hpp"

#include <cstdio>

namespace trident {
namespace {

using layout::GroupKind;
using topo::Level;

constexpr const char* kSpanWords[] = {"inside a node", "across nodes within a rack",
                                      "across racks"};
constexpr GroupKind kKinds[] = {GroupKind::Tensor, GroupKind::Context, GroupKind::Data, GroupKind::Pipeline,
                                GroupKind::Embedding};

GroupSpans spans_of(GroupKind kind, const layout::Grid& grid, const topo::Topology& topology) {
  GroupSpans spans{kind};
  for (const auto& members : grid.all_groups(kind)) {
    spans.group_size = static_cast<int>(members.size());
    ++spans.groups;
    ++spans.by_level[static_cast<int>(topology.span(members))];
  }
  return spans;
}

// Groups of `kind` wider than `allowed` under the job's numbering and under a block numbering.
std::string crossing_warning(GroupKind kind, Level allowed, const layout::Grid& grid,
                             const topo::Topology& topology) {
  auto crossing = [&](const topo::Topology& t) {
    const GroupSpans s = spans_of(kind, grid, t);
    int count = 0;
    for (int level = static_cast<int>(allowed) + 1; level < 3; ++level) count += s.by_level[level];
    return count;
  };
  const int now = crossing(topology);
  const int block = crossing(topology.reordered(topology.block_order()));
  if (now == 0 || block >= now) return "";
  const char* boundary = allowed == Level::Node ? "nodes" : "racks";
  return std::to_string(now) + " of " + std::to_string(spans_of(kind, grid, topology).groups) +
         " " + layout::group_kind_name(kind) + " groups cross " + boundary +
         ", but with ranks numbered node by node only " + std::to_string(block) +
         " would: launch with a block distribution (srun --distribution=block, "
         "mpirun --map-by core) so that consecutive ranks share a node";
}

}  // namespace

std::vector<GroupSpans> group_spans(const layout::Grid& grid, const topo::Topology& topology) {
  std::vector<GroupSpans> result;
  for (GroupKind kind : kKinds)
    if (kind != GroupKind::Context || grid.cp_size() > 1) result.push_back(spans_of(kind, grid, topology));
  return result;
}

std::vector<std::string> placement_warnings(const layout::Grid& grid,
                                            const topo::Topology& topology) {
  std::vector<std::string> warnings;
  for (const auto& [kind, allowed] : {std::pair{GroupKind::Tensor, Level::Node},
                                      std::pair{GroupKind::Context, Level::Node},
                                      std::pair{GroupKind::Data, Level::Rack}}) {
    std::string warning = crossing_warning(kind, allowed, grid, topology);
    if (!warning.empty()) warnings.push_back(warning);
  }
  return warnings;
}

// With context parallelism a cp column (the rank's chunks) and dp the replica; else dp is the
// data rank.
std::string rank_table(const layout::Grid& grid, const topo::Topology& topology) {
  const bool context = grid.cp_size() > 1;
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%6s  %-20s %5s %5s %6s %4s%s %4s %4s\n", "rank", "host", "node",
                "rack", "local", "tp", context ? "   cp" : "", "dp", "pp");
  out += line;
  for (int r = 0; r < grid.world_size(); ++r) {
    const topo::RankPlace& p = topology.place(r);
    const layout::Coord c = grid.coord_of(r);
    char cp[16] = "";
    if (context) std::snprintf(cp, sizeof cp, " %4d", grid.context_rank(c));
    std::snprintf(line, sizeof line, "%6d  %-20s %5d %5d %6d %4d%s %4d %4d\n", r, p.host.c_str(),
                  p.node, p.rack, p.local_rank, c.tp, cp, context ? grid.replica(c) : c.dp, c.pp);
    out += line;
  }
  return out;
}

std::string spans_table(const layout::Grid& grid, const topo::Topology& topology) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-10s %5s %6s  %s\n", "group", "size", "groups",
                "where the groups lie");
  out += line;
  for (const GroupSpans& s : group_spans(grid, topology)) {
    std::string levels;
    for (int level = 0; level < 3; ++level)
      if (s.by_level[level] > 0)
        levels += (levels.empty() ? "" : ", ") + std::to_string(s.by_level[level]) + " " +
                  kSpanWords[level];
    std::snprintf(line, sizeof line, "%-10s %5d %6d  %s\n", layout::group_kind_name(s.kind),
                  s.group_size, s.groups, levels.c_str());
    out += line;
  }
  return out;
}

}  // namespace trident
