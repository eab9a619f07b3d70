// Checks across keys that make a deck impossible for the job it is launched in (the layout
// against the number of ranks, divisibility of the model by the layout, batch arithmetic).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "deck/deck.hpp"

namespace trident::deck {

// Throws UserError naming the keys (with their values and origins) and what would be allowed.
void validate_layout(const Deck& deck, int world_size);

// debug.slowdown's "RANK:FACTOR[,RANK:FACTOR]" as (rank, factor) pairs; empty text: none.
// Throws std::invalid_argument saying what is malformed (a rank twice, FACTOR below 1, …).
std::vector<std::pair<int, double>> parse_slowdown(const std::string& text);

// Micro-batches per step on each data-parallel replica: global_batch / (micro_batch × data).
int64_t micro_batches_per_step(const Deck& deck);

}  // namespace trident::deck
