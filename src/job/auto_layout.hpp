// parallel.layout = auto: the layout a job runs with, chosen by the planner (src/plan/) for the
// ranks it was launched on — the same search as `trident plan DECK --gpus=N`, on the hardware
// profile parallel.hardware names — instead of the deck's parallel.* keys. Every rank computes the
// same choice (the search is deterministic and the profile is read on rank 0 and shared); rank 0
// prints it with the prediction and the runner-up. With checkpoint.resume = auto a job requeued
// on another number of ranks chooses again and resumes onto the new layout (checkpoints reshard
// onto any layout): an elastic restart.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "deck/deck.hpp"
#include "deck/record.hpp"
#include "job/settings.hpp"

namespace trident {

// The deck keys of the best feasible layout for world.size() ranks, for a deck that says
// parallel.layout = auto (chooses_layout; settings and deck: the deck as given). No feasible
// layout is a UserError naming the least memory one needs.
std::vector<deck::Override> choose_layout(comm::Communicator& world, const RunSettings& settings,
                                          const deck::Record& deck);

}  // namespace trident
