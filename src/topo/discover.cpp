// Topology discovery over MPI.
#include "topo/discover.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/mpi_util.hpp"

namespace trident::topo {
namespace {

// For every world rank, the lowest world rank it shares memory with.
std::vector<int> gather_shared_keys() {
  MPI_Comm shared;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL,
                                &shared));
  int my_rank = world_rank(), lowest = 0;
  MPI_CHECK(MPI_Allreduce(&my_rank, &lowest, 1, MPI_INT, MPI_MIN, shared));
  MPI_CHECK(MPI_Comm_free(&shared));
  std::vector<int> keys(world_size());
  MPI_CHECK(MPI_Allgather(&lowest, 1, MPI_INT, keys.data(), 1, MPI_INT, MPI_COMM_WORLD));
  return keys;
}

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int length = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &length));
  return std::string(name, length);
}

TopologyOptions options_from(const TopologySettings& settings) {
  TopologyOptions options;
  options.ranks_per_node = settings.ranks_per_node;
  options.nodes_per_rack = settings.nodes_per_rack;
  const std::string& file = settings.file;
  if (file.empty()) return options;
  const std::string text = read_on_root_and_broadcast(
      file, "topology file", "topology.file must name a Slurm topology.conf (" +
      settings.file_cite + ")", MPI_COMM_WORLD);
  try {
    options.switches = parse_topology_conf(text);
  } catch (const std::invalid_argument& e) {
    fatal_all(file + ": " + e.what() + " (" + settings.file_cite +
              "); expected lines like 'SwitchName=rack0 Nodes=node[0-3]'");
  }
  options.use_switches = true;
  return options;
}

}  // namespace

Topology discover_topology(const TopologySettings& settings) {
  const TopologyOptions options = options_from(settings);
  const std::vector<std::string> hosts = allgather_strings(processor_name(), MPI_COMM_WORLD);
  const std::vector<int> shared_keys = gather_shared_keys();
  try {
    return Topology::build(hosts, shared_keys, options);
  } catch (const std::invalid_argument& e) {
    fatal_all(settings.file + ": " + e.what() + " (" +
              settings.file_cite + "); list every node of the job under a leaf switch" +
              (options.ranks_per_node > 0 ? " (emulated nodes are named node0, node1, ...)" : ""));
  }
}

}  // namespace trident::topo
