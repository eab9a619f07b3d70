// The tokenizer behind a deck's data: the record `trident prepare` left in the directory of
// data.train (data/tokenizer.hpp), checked against model.vocab, and loaded for decoding text.
#pragma once

#include "data/tokenizer.hpp"
#include "deck/record.hpp"
#include "job/settings.hpp"

namespace trident {

// A deck error (UserError, exit 2, on every rank) when data.train's directory records a BPE
// tokenizer with more tokens than model.vocab: the model could not represent its tokens.
void require_vocab_covers_tokenizer(const RunSettings& settings, const deck::Record& deck);
// The tokenizer of data.train's directory (bytes where none is recorded); UserError when its
// record or vocabulary files cannot be read, or it has more tokens than model.vocab.
data::Tokenizer deck_tokenizer(const RunSettings& settings, const deck::Record& deck);

}  // namespace trident
