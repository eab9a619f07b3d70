// Discovering the topology of a running job: collective over the world.
#pragma once

#include "comm/communicator.hpp"
#include "topo/topology.hpp"

namespace trident::comm {

// Gathers every rank's host name and the ranks it shares memory with, reads settings.file on
// rank 0 and broadcasts it, and applies the emulation settings. A topology file that cannot be
// read or does not place every node is a deck error (UserError on every rank).
topo::Topology discover_topology(Communicator& world, const topo::TopologySettings& settings);

}  // namespace trident::comm
