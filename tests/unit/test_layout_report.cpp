// Which levels each kind of group spans, and the launch-order warnings.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include "job/layout_report.hpp"

using namespace trident;
using layout::GroupKind;

namespace {

topo::Topology emulated(int ranks, int per_node, int nodes_per_rack) {
  topo::TopologyOptions options;
  options.ranks_per_node = per_node;
  options.nodes_per_rack = nodes_per_rack;
  return topo::Topology::build(std::vector<std::string>(ranks, "h"), std::vector<int>(ranks, 0),
                               options);
}

GroupSpans find(const std::vector<GroupSpans>& all, GroupKind kind) {
  for (const auto& s : all)
    if (s.kind == kind) return s;
  return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(layout_report)

BOOST_AUTO_TEST_CASE(acceptance_layout_4_nodes_2_racks) {
  const layout::Grid grid(2, 2, 2);
  const auto spans = group_spans(grid, emulated(8, 2, 2));
  BOOST_TEST((find(spans, GroupKind::Tensor).by_level == std::array<int, 3>{4, 0, 0}));
  BOOST_TEST((find(spans, GroupKind::Data).by_level == std::array<int, 3>{0, 4, 0}));
  BOOST_TEST((find(spans, GroupKind::Pipeline).by_level == std::array<int, 3>{0, 0, 4}));
  BOOST_TEST(placement_warnings(grid, emulated(8, 2, 2)).empty());
  const std::string table = spans_table(grid, emulated(8, 2, 2));
  BOOST_TEST(table.find("tensor         2      4  4 inside a node") != std::string::npos, table);
}

BOOST_AUTO_TEST_CASE(round_robin_placement_warns_and_names_the_remedy) {
  // Two hosts, ranks alternating between them (mpirun --map-by node): every tensor pair
  // straddles the hosts although each host could hold whole tensor groups.
  const topo::Topology t = topo::Topology::build({"a", "b", "a", "b", "a", "b", "a", "b"},
                                                 {0, 1, 0, 1, 0, 1, 0, 1}, {});
  const auto warnings = placement_warnings(layout::Grid(2, 1, 4), t);
  BOOST_REQUIRE_EQUAL(warnings.size(), 1u);
  BOOST_TEST(warnings[0].find("4 of 4 tensor groups cross nodes") != std::string::npos, warnings[0]);
  BOOST_TEST(warnings[0].find("--distribution=block") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(no_warning_when_no_order_does_better) {
  // tensor = 4 on nodes of 2: every order crosses nodes, so there is nothing to warn about.
  BOOST_TEST(placement_warnings(layout::Grid(4, 1, 2), emulated(8, 2, 0)).empty());
}

BOOST_AUTO_TEST_CASE(data_groups_crossing_racks_needlessly_warn) {
  // Racks as in a topology file that interleaves nodes: node0, node2 in one rack, node1, node3
  // in the other; data groups of 4 consecutive ranks (tp 1) cross racks, block order would not.
  topo::TopologyOptions options;
  options.ranks_per_node = 2;
  options.switches = topo::parse_topology_conf("SwitchName=r0 Nodes=node[0,2]\nSwitchName=r1 Nodes=node[1,3]\n");
  options.use_switches = true;
  const auto t = topo::Topology::build(std::vector<std::string>(8, "h"), std::vector<int>(8, 0), options);
  const auto warnings = placement_warnings(layout::Grid(1, 2, 4), t);
  BOOST_REQUIRE_EQUAL(warnings.size(), 1u);
  BOOST_TEST(warnings[0].find("data groups cross racks") != std::string::npos, warnings[0]);
}

BOOST_AUTO_TEST_SUITE_END()
