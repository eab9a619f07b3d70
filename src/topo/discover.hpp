// Discovering the topology of a running job: collective over MPI_COMM_WORLD.
#pragma once

#include "deck/deck.hpp"
#include "topo/topology.hpp"

namespace trident::topo {

// Gathers every rank's host name and shared-memory group (MPI_Comm_split_type), reads
// topology.file on rank 0 and broadcasts it, and applies the deck's emulation settings.
// A topology file that cannot be read or does not place every node is a deck error (UserError
// on every rank).
Topology discover_topology(const deck::Deck& deck);

}  // namespace trident::topo
