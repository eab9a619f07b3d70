// Model configuration and initialisation from the deck.
#include "train/model_setup.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "model/llmc_io.hpp"

namespace trident {
namespace {

bool from_file(const deck::Deck& deck) { return deck.get_string("model.init") != "random"; }

void require_match(const deck::Deck& deck, const std::string& key, int from_header,
                   const std::string& file) {
  if (deck.get_int(key) != from_header)
    fatal_all(file + ": the model file has " + key + " = " + std::to_string(from_header) +
              " but the deck says " + deck.cite(key) + "; make the deck match the file (" +
              deck.cite("model.init") + ")");
}

}  // namespace

model::GptConfig model_config_from_deck(const deck::Deck& deck) {
  model::GptConfig c;
  c.layers = static_cast<int>(deck.get_int("model.layers"));
  c.heads = static_cast<int>(deck.get_int("model.heads"));
  c.channels = static_cast<int>(deck.get_int("model.hidden"));
  c.vocab = static_cast<int>(deck.get_int("model.vocab"));
  c.max_seq_len = static_cast<int>(deck.get_int("model.seq_len"));
  c.padded_vocab = model::padded_vocab_for(c.vocab);
  if (!from_file(deck)) return c;
  const std::string file = deck.get_string("model.init");
  model::GptConfig header;
  try {
    header = model::read_llmc_header(file);
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + " (" + deck.cite("model.init") +
              "); give an llm.c fp32 model file or 'random'");
  }
  require_match(deck, "model.layers", header.layers, file);
  require_match(deck, "model.heads", header.heads, file);
  require_match(deck, "model.hidden", header.channels, file);
  require_match(deck, "model.vocab", header.vocab, file);
  if (deck.get_int("model.seq_len") > header.max_seq_len)
    fatal_all(file + ": the model file's position table has " + std::to_string(header.max_seq_len) +
              " rows but the deck asks for " + deck.cite("model.seq_len") + "; use at most " +
              std::to_string(header.max_seq_len));
  return header;
}

void initialise_parameters(const deck::Deck& deck, model::Gpt2& gpt) {
  if (!from_file(deck)) {
    model::init_params(gpt.config(), gpt.params(), static_cast<uint64_t>(deck.get_int("train.seed")));
    return;
  }
  try {
    model::read_llmc_params(deck.get_string("model.init"), gpt.config(), gpt.params());
  } catch (const std::runtime_error& e) {
    fatal_one(e.what());
  }
}

}  // namespace trident
