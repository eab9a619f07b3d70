// The model a deck describes: its configuration and its initial parameters (random from
// train.seed, or an llm.c model file named by model.init, checked against the deck).
#pragma once

#include "deck/deck.hpp"
#include "model/gpt2.hpp"

namespace trident {

// Collective in effect (every rank reads the same header): a file that is missing, malformed
// or disagrees with the deck is a UserError naming both.
model::GptConfig model_config_from_deck(const deck::Deck& deck);
void initialise_parameters(const deck::Deck& deck, model::Gpt2& gpt);

}  // namespace trident
