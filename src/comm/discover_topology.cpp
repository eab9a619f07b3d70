// Topology discovery through the world communicator.
#include "comm/discover_topology.hpp"

#include <stdexcept>

#include "comm/agreement.hpp"
#include "comm/world.hpp"
#include "core/error.hpp"
#include "core/mpi_util.hpp"

namespace trident::comm {
namespace {

using topo::Topology;
using topo::TopologyOptions;
using topo::TopologySettings;

// For every world rank, the lowest world rank it shares memory with.
std::vector<int> gather_shared_keys(Communicator& world) {
  const std::unique_ptr<Communicator> host = split_by_host(world, "host");
  int32_t lowest = -world.rank();  // the maximum of −rank over the host
  host->all_reduce(&lowest, 1, DType::i32, Op::Max, Stream{}).wait();
  lowest = -lowest;
  std::vector<int32_t> keys(static_cast<size_t>(world.size()));
  world.all_gather_values(&lowest, keys.data(), 1, DType::i32, Stream{}).wait();
  return std::vector<int>(keys.begin(), keys.end());
}

TopologyOptions options_from(Communicator& world, const TopologySettings& settings) {
  TopologyOptions options;
  options.ranks_per_node = settings.ranks_per_node;
  options.nodes_per_rack = settings.nodes_per_rack;
  const std::string& file = settings.file;
  if (file.empty()) return options;
  const std::string text = read_on_root_and_broadcast(
      world, file, "topology file", "topology.file must name a Slurm topology.conf (" + settings.file_cite + ")");
  try {
    options.switches = topo::parse_topology_conf(text);
  } catch (const std::invalid_argument& e) {
    fatal_all(file + ": " + e.what() + " (" + settings.file_cite +
              "); expected lines like 'SwitchName=rack0 Nodes=node[0-3]'");
  }
  options.use_switches = true;
  return options;
}

}  // namespace

Topology discover_topology(Communicator& world, const TopologySettings& settings) {
  const TopologyOptions options = options_from(world, settings);
  const std::vector<std::string> hosts = all_gather_strings(world, host_name());
  const std::vector<int> shared_keys = gather_shared_keys(world);
  try {
    return Topology::build(hosts, shared_keys, options);
  } catch (const std::invalid_argument& e) {
    fatal_all(settings.file + ": " + e.what() + " (" +
              settings.file_cite + "); list every node of the job under a leaf switch" +
              (options.ranks_per_node > 0 ? " (emulated nodes are named node0, node1, ...)" : ""));
  }
}

}  // namespace trident::comm
