// Checks across keys that make a deck impossible for the job it is launched in (the layout
// against the number of ranks, divisibility of the model by the layout, batch arithmetic).
#pragma once

#include "deck/deck.hpp"

namespace trident::deck {

// Throws UserError naming the keys (with their values and origins) and what would be allowed.
void validate_layout(const Deck& deck, int world_size);

// Micro-batches per step on each data-parallel replica: global_batch / (micro_batch × data).
int64_t micro_batches_per_step(const Deck& deck);

}  // namespace trident::deck
