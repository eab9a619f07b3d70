// Host lists, topology.conf, and the assignment of ranks to nodes and racks.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include "topo/topology.hpp"

using namespace trident::topo;

namespace {

using Names = std::vector<std::string>;

std::string span(const Topology& t, const std::vector<int>& ranks) { return level_name(t.span(ranks)); }

// n ranks on `hosts` hosts, numbered in blocks (ranks 0..k-1 on host 0, ...).
Topology block_hosts(int ranks, int hosts, TopologyOptions options = {}) {
  Names names;
  std::vector<int> keys;
  const int per_host = ranks / hosts;
  for (int r = 0; r < ranks; ++r) {
    names.push_back("h" + std::to_string(r / per_host));
    keys.push_back(r / per_host * per_host);
  }
  return Topology::build(names, keys, options);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(topology)

BOOST_AUTO_TEST_CASE(hostlists_expand_like_slurm) {
  BOOST_TEST((expand_hostlist("gpu[01-03,7],login") == Names{"gpu01", "gpu02", "gpu03", "gpu7", "login"}));
  BOOST_TEST((expand_hostlist("r[1-2]n[0-1]") == Names{"r1n0", "r1n1", "r2n0", "r2n1"}));
  BOOST_TEST((expand_hostlist("node[8-10]") == Names{"node8", "node9", "node10"}));
  BOOST_TEST((expand_hostlist("single") == Names{"single"}));
  BOOST_CHECK_THROW(expand_hostlist("bad[1-"), std::invalid_argument);
  BOOST_CHECK_THROW(expand_hostlist("bad[3-1]"), std::invalid_argument);
  BOOST_CHECK_THROW(expand_hostlist("bad[a-b]"), std::invalid_argument);
  BOOST_CHECK_THROW(expand_hostlist("a,,b"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(topology_conf_parses_leaf_and_upper_switches) {
  const auto switches = parse_topology_conf(
      "# racks\nSwitchName=s0 Nodes=node[0-1] LinkSpeed=100\n"
      "SwitchName=s1 Nodes=node[2-3]\nswitchname=top switches=s[0-1]\n");
  BOOST_REQUIRE_EQUAL(switches.size(), 3u);
  BOOST_TEST((switches[0].nodes == Names{"node0", "node1"}));
  BOOST_TEST((switches[2].switches == Names{"s0", "s1"}));
  BOOST_TEST(switches[1].line == 3);
  BOOST_CHECK_THROW(parse_topology_conf("Nodes=a\n"), std::invalid_argument);
  BOOST_CHECK_THROW(parse_topology_conf("SwitchName=s0\n"), std::invalid_argument);
  BOOST_CHECK_THROW(parse_topology_conf("SwitchName=s0 Nodes=a\nSwitchName=s0 Nodes=b\n"),
                    std::invalid_argument);
  BOOST_CHECK_THROW(parse_topology_conf("SwitchName=s0 Nodes=a\nSwitchName=s1 Nodes=a\n"),
                    std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(real_nodes_come_from_shared_memory_groups) {
  // Round-robin placement over two hosts (mpirun --map-by node): ranks alternate.
  const Topology t = Topology::build({"a", "b", "a", "b"}, {0, 1, 0, 1}, {});
  BOOST_TEST(t.num_nodes() == 2);
  BOOST_TEST(t.num_racks() == 1);
  BOOST_TEST(t.place(2).node == 0);
  BOOST_TEST(t.place(2).local_rank == 1);
  BOOST_TEST(t.place(3).host == "b");
  BOOST_TEST(!t.emulated());
  BOOST_TEST((t.block_order() == std::vector<int>{0, 2, 1, 3}));
  const Topology blocked = t.reordered(t.block_order());
  BOOST_TEST(blocked.place(1).host == "a");
  BOOST_TEST(blocked.place(1).local_rank == 1);
}

BOOST_AUTO_TEST_CASE(emulated_nodes_and_racks) {
  TopologyOptions options;
  options.ranks_per_node = 2;
  options.nodes_per_rack = 2;
  const Topology t = Topology::build(Names(8, "host"), std::vector<int>(8, 0), options);
  BOOST_TEST(t.emulated());
  BOOST_TEST(t.num_nodes() == 4);
  BOOST_TEST(t.num_racks() == 2);
  BOOST_TEST(t.place(5).host == "node2");
  BOOST_TEST(t.place(5).rack == 1);
  BOOST_TEST(t.place(5).node_in_rack == 0);
  BOOST_TEST(t.place(5).rank_in_rack == 1);
  BOOST_TEST(t.place(7).rank_in_rack == 3);
  BOOST_TEST(span(t, {0, 1}) == "node");
  BOOST_TEST(span(t, {0, 2}) == "rack");
  BOOST_TEST(span(t, {1, 4}) == "cross-rack");
  BOOST_TEST(span(t, {3}) == "node");
}

BOOST_AUTO_TEST_CASE(racks_from_a_topology_file) {
  TopologyOptions options;
  options.ranks_per_node = 2;
  options.switches = parse_topology_conf("SwitchName=east Nodes=node[0,3]\nSwitchName=west Nodes=node[1-2]\n");
  options.use_switches = true;
  const Topology t = Topology::build(Names(8, "host"), std::vector<int>(8, 0), options);
  BOOST_TEST(t.num_racks() == 2);
  BOOST_TEST(t.rack_name(0) == "east");
  BOOST_TEST(t.place(6).rack == 0);  // node3 is in east
  BOOST_TEST(t.place(6).node_in_rack == 1);
  BOOST_TEST(t.place(2).rack == 1);  // node1 is in west
  options.switches = parse_topology_conf("SwitchName=east Nodes=node[0-2]\n");
  BOOST_CHECK_THROW(Topology::build(Names(8, "host"), std::vector<int>(8, 0), options),
                    std::invalid_argument);  // node3 is under no switch
}

BOOST_AUTO_TEST_CASE(real_hosts_with_racks_by_count) {
  TopologyOptions options;
  options.nodes_per_rack = 3;
  const Topology t = block_hosts(16, 4, options);
  BOOST_TEST(t.num_nodes() == 4);
  BOOST_TEST(t.num_racks() == 2);
  BOOST_TEST(t.place(15).rack == 1);
  BOOST_TEST(t.place(15).rank_in_rack == 3);
  BOOST_TEST(t.place(11).rack == 0);
  BOOST_TEST(t.place(11).rank_in_rack == 11);
}

BOOST_AUTO_TEST_SUITE_END()
