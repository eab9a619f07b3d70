// The model a deck describes: its configuration and its initial parameters (random from
// train.seed, or an llm.c model file named by model.init, checked against the deck).
#pragma once

#include <vector>

#include "deck/deck.hpp"
#include "layout/grid.hpp"
#include "model/gpt2.hpp"

namespace trident {

// Collective in effect (every rank reads the same header): a file that is missing, malformed
// or disagrees with the deck is a UserError naming both.
model::GptConfig model_config_from_deck(const deck::Deck& deck);
// This rank's slice of the initial model: random by the counter-based rule, or cut from the file.
void initialise_parameters(const deck::Deck& deck, model::Gpt2& gpt);
// Collective over MPI_COMM_WORLD: the whole model (llm.c order), assembled on world rank 0 from
// the slices of its tensor group; empty on the other ranks.
std::vector<float> gather_whole_model(const model::Gpt2& gpt, const layout::Grid& grid);

}  // namespace trident
