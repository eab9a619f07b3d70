// The three levels of a cluster — node, rack, cross-rack — and where each world rank sits in
// them. Built from facts gathered over MPI (host names, shared-memory groups) or emulated from
// the deck, so that 8 ranks on one host can act as 4 nodes in 2 racks. Pure data, no MPI.
#pragma once

#include <string>
#include <vector>

#include "topo/slurm_topology.hpp"

namespace trident::topo {

// The highest level a set of ranks spans: all on one node, several nodes of one rack, or
// several racks. Ordered, so that max() of two spans is the wider one.
enum class Level { Node = 0, Rack = 1, CrossRack = 2 };
const char* level_name(Level level);  // "node", "rack", "cross-rack"
// Its name in deck keys, links.ini, plan profiles and metrics.h5: "node", "rack", "cross_rack".
const char* level_key(Level level);

struct TopologyOptions {
  int ranks_per_node = 0;          // > 0: emulate nodes of this many consecutive ranks
  int nodes_per_rack = 0;          // > 0: racks of this many consecutive nodes
  std::vector<Switch> switches;    // from topology.conf: each leaf switch is a rack
  bool use_switches = false;
};

struct RankPlace {
  std::string host;      // node name: the real host, or "node<i>" when emulated
  int node = 0;          // node index, in order of the nodes' lowest world rank
  int rack = 0;          // rack index, in order of the racks' lowest node
  int local_rank = 0;    // position among the ranks of its node (world-rank order)
  int node_in_rack = 0;  // position of its node among the nodes of its rack
  int rank_in_rack = 0;  // position among the ranks of its rack (world-rank order)
};

class Topology {
 public:
  // hosts[r]: host name of world rank r. shared_key[r]: equal for ranks that share memory
  // (the lowest world rank of the ranks r shares memory with). Throws std::invalid_argument
  // when topology.conf does not place a node.
  static Topology build(const std::vector<std::string>& hosts, const std::vector<int>& shared_key,
                        const TopologyOptions& options);

  int world_size() const { return static_cast<int>(places_.size()); }
  int num_nodes() const { return static_cast<int>(node_names_.size()); }
  int num_racks() const { return static_cast<int>(rack_names_.size()); }
  bool emulated() const { return emulated_; }
  const RankPlace& place(int world_rank) const { return places_.at(world_rank); }
  const std::string& node_name(int node) const { return node_names_.at(node); }
  const std::string& rack_name(int rack) const { return rack_names_.at(rack); }

  Level span(const std::vector<int>& world_ranks) const;

  // A placement with the same nodes and racks but ranks numbered node by node (rack by rack):
  // what a block distribution (srun -m block, mpirun --map-by core) gives. new_order[i] is
  // the old world rank that becomes rank i.
  std::vector<int> block_order() const;
  Topology reordered(const std::vector<int>& new_order) const;

 private:
  std::vector<RankPlace> places_;
  std::vector<std::string> node_names_;
  std::vector<std::string> rack_names_;
  bool emulated_ = false;
};

// What discovery applies beside what it finds: the emulation and the switch file, as the
// caller read them from its settings (job/settings.hpp: RunSettings::topology, from the deck).
struct TopologySettings {
  int ranks_per_node = 0;  // emulated nodes of this many ranks (0: the real hosts)
  int nodes_per_rack = 0;  // emulated racks of this many nodes (0: one rack)
  std::string file;        // a Slurm topology.conf placing nodes under leaf switches, or empty
  std::string file_cite;   // where the file was named, for messages ("inputs/x.deck, line 7")
};

}  // namespace trident::topo
