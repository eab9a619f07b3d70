// Assigning ranks to nodes and racks (see topology.hpp).
#include "topo/topology.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>

namespace trident::topo {
namespace {

// node index per rank, numbered by first appearance in world-rank order.
std::vector<int> number_by_first_appearance(const std::vector<int>& keys) {
  std::map<int, int> index;
  std::vector<int> result(keys.size());
  for (size_t r = 0; r < keys.size(); ++r) {
    auto [it, inserted] = index.emplace(keys[r], static_cast<int>(index.size()));
    result[r] = it->second;
  }
  return result;
}

// Rack of each node, and rack names, from nodes_per_rack, topology.conf, or one rack.
std::vector<int> racks_of_nodes(const std::vector<std::string>& node_names,
                                const TopologyOptions& options,
                                std::vector<std::string>& rack_names) {
  const int nodes = static_cast<int>(node_names.size());
  std::vector<int> rack(nodes, 0);
  if (options.use_switches) {
    std::map<std::string, std::string> leaf_of_host;
    for (const Switch& sw : options.switches)
      for (const auto& host : sw.nodes) leaf_of_host[host] = sw.name;
    std::map<std::string, int> rack_index;
    for (int n = 0; n < nodes; ++n) {
      auto leaf = leaf_of_host.find(node_names[n]);
      if (leaf == leaf_of_host.end())
        throw std::invalid_argument("node '" + node_names[n] +
                                    "' is under no leaf switch (SwitchName=... Nodes=...)");
      auto [it, inserted] = rack_index.emplace(leaf->second, static_cast<int>(rack_index.size()));
      if (inserted) rack_names.push_back(leaf->second);
      rack[n] = it->second;
    }
    return rack;
  }
  const int per_rack = options.nodes_per_rack > 0 ? options.nodes_per_rack : nodes;
  for (int n = 0; n < nodes; ++n) rack[n] = n / per_rack;
  for (int r = 0; r <= (nodes - 1) / per_rack; ++r) rack_names.push_back("rack" + std::to_string(r));
  return rack;
}

// local_rank, node_in_rack and rank_in_rack from node and rack.
void number_within_levels(std::vector<RankPlace>& places) {
  std::map<int, int> ranks_seen_in_node, ranks_seen_in_rack, nodes_seen_in_rack;
  std::map<int, int> node_position;
  for (RankPlace& p : places) {
    p.local_rank = ranks_seen_in_node[p.node]++;
    p.rank_in_rack = ranks_seen_in_rack[p.rack]++;
    if (!node_position.count(p.node)) node_position[p.node] = nodes_seen_in_rack[p.rack]++;
    p.node_in_rack = node_position[p.node];
  }
}

}  // namespace

const char* level_name(Level level) {
  switch (level) {
    case Level::Node: return "node";
    case Level::Rack: return "rack";
    case Level::CrossRack: return "cross-rack";
  }
  return "?";
}

const char* level_key(Level level) {
  switch (level) {
    case Level::Node: return "node";
    case Level::Rack: return "rack";
    case Level::CrossRack: return "cross_rack";
  }
  return "?";
}

Topology Topology::build(const std::vector<std::string>& hosts, const std::vector<int>& shared_key,
                         const TopologyOptions& options) {
  const int world = static_cast<int>(hosts.size());
  if (static_cast<int>(shared_key.size()) != world)
    throw std::invalid_argument("hosts and shared keys differ in length");
  Topology topo;
  topo.emulated_ = options.ranks_per_node > 0;
  std::vector<int> node_of_rank(world);
  if (topo.emulated_) {
    for (int r = 0; r < world; ++r) node_of_rank[r] = r / options.ranks_per_node;
    for (int n = 0; n <= (world - 1) / options.ranks_per_node; ++n)
      topo.node_names_.push_back("node" + std::to_string(n));
  } else {
    node_of_rank = number_by_first_appearance(shared_key);
    topo.node_names_.resize(*std::max_element(node_of_rank.begin(), node_of_rank.end()) + 1);
    for (int r = world - 1; r >= 0; --r) topo.node_names_[node_of_rank[r]] = hosts[r];
  }
  const std::vector<int> rack_of_node = racks_of_nodes(topo.node_names_, options, topo.rack_names_);
  topo.places_.resize(world);
  for (int r = 0; r < world; ++r) {
    RankPlace& p = topo.places_[r];
    p.node = node_of_rank[r];
    p.host = topo.node_names_[p.node];
    p.rack = rack_of_node[p.node];
  }
  number_within_levels(topo.places_);
  return topo;
}

Level Topology::span(const std::vector<int>& world_ranks) const {
  Level widest = Level::Node;
  for (int r : world_ranks) {
    const RankPlace& first = places_.at(world_ranks.front());
    const RankPlace& p = places_.at(r);
    if (p.rack != first.rack) return Level::CrossRack;
    if (p.node != first.node) widest = Level::Rack;
  }
  return widest;
}

std::vector<int> Topology::block_order() const {
  std::vector<int> order(places_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const RankPlace &pa = places_[a], &pb = places_[b];
    if (pa.rack != pb.rack) return pa.rack < pb.rack;
    return pa.node < pb.node;
  });
  return order;
}

Topology Topology::reordered(const std::vector<int>& new_order) const {
  Topology result = *this;
  for (size_t i = 0; i < new_order.size(); ++i) result.places_[i] = places_.at(new_order[i]);
  number_within_levels(result.places_);
  return result;
}

}  // namespace trident::topo
