// Reading Slurm's topology.conf (the tree plugin's syntax) and Slurm host lists: the racks of a
// cluster as the scheduler already knows them.
//   SwitchName=rack0 Nodes=gpu[001-016]        # a leaf switch: one rack
//   SwitchName=spine Switches=rack[0-3]        # upper levels (cross-rack)
#pragma once

#include <string>
#include <vector>

namespace trident::topo {

// "gpu[01-03,7],login" -> gpu01 gpu02 gpu03 gpu7 login (zero padding kept; several bracket
// groups in one name expand as a product). Throws std::invalid_argument on malformed input.
std::vector<std::string> expand_hostlist(const std::string& list);

struct Switch {
  std::string name;
  std::vector<std::string> nodes;     // host names under a leaf switch
  std::vector<std::string> switches;  // child switches of an upper-level switch
  int line = 0;                       // where it is defined
};

// Parses topology.conf text. Throws std::invalid_argument("line N: ...") on a malformed line,
// a duplicate switch name or a host under two leaf switches.
std::vector<Switch> parse_topology_conf(const std::string& text);

}  // namespace trident::topo
