// The tokenizer behind a deck's data, checked against model.vocab.
#include "job/deck_tokenizer.hpp"

#include <stdexcept>

#include "core/error.hpp"

namespace trident {
namespace {

std::string record_dir(const RunSettings& settings) { return data::data_directory(settings.data.train); }

}  // namespace

void require_vocab_covers_tokenizer(const RunSettings& settings, const deck::Record& deck) {
  std::optional<data::TokenizerRecord> record;
  try {
    record = data::read_tokenizer_record(record_dir(settings));
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + " (" + deck.cite("data.train") + ")");
  }
  // Byte-level data keeps only the per-token check of data/token_data.hpp: a model of a smaller
  // vocabulary over bytes that stay below it (ASCII text under 128) is legitimate.
  if (record && record->kind != "bytes" && record->vocab > settings.model.vocab)
    fatal_all(deck.file_name() + ": " + deck.cite("model.vocab") + " is smaller than the vocabulary of the " +
              record->kind + " tokenizer that made " + settings.data.train + " (" +
              std::to_string(record->vocab) + " tokens, " + record_dir(settings) + "/tokenizer.txt); set model.vocab = " +
              std::to_string(record->vocab) + " or more");
}

data::Tokenizer deck_tokenizer(const RunSettings& settings, const deck::Record& deck) {
  require_vocab_covers_tokenizer(settings, deck);
  try {
    return data::Tokenizer::load(record_dir(settings));
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + " (" + deck.cite("data.train") + ")");
  }
}

}  // namespace trident
