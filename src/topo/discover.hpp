// Discovering the topology of a running job: collective over MPI_COMM_WORLD.
#pragma once

#include <string>

#include "topo/topology.hpp"

namespace trident::topo {

// What discovery applies beside what it finds: the emulation and the switch file, as the
// caller read them from its settings (job/settings.hpp: RunSettings::topology, from the deck).
struct TopologySettings {
  int ranks_per_node = 0;  // emulated nodes of this many ranks (0: the real hosts)
  int nodes_per_rack = 0;  // emulated racks of this many nodes (0: one rack)
  std::string file;        // a Slurm topology.conf placing nodes under leaf switches, or empty
  std::string file_cite;   // where the file was named, for messages ("inputs/x.deck, line 7")
};

// Gathers every rank's host name and shared-memory group (MPI_Comm_split_type), reads
// settings.file on rank 0 and broadcasts it, and applies the emulation settings.
// A topology file that cannot be read or does not place every node is a deck error (UserError
// on every rank).
Topology discover_topology(const TopologySettings& settings);

}  // namespace trident::topo
