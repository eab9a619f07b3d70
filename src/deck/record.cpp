// A deck's citations and resolved text, kept after its values are read.
#include "deck/record.hpp"

namespace trident::deck {

Record::Record(const Deck& deck) : file_name_(deck.file_name()), ini_body_(deck.to_ini("")) {
  for (const KeySpec& spec : schema()) {
    cites_[spec.key] = {deck.cite(spec.key), deck.origin(spec.key).describe()};
    values_.emplace_back(spec.key, canonical_value(spec, deck.text(spec.key)));
  }
}

std::string Record::cite(const std::string& key) const { return cites_.at(key).first; }

std::string Record::origin(const std::string& key) const { return cites_.at(key).second; }

std::string Record::to_ini(const std::string& header_comment) const { return ini_comment(header_comment) + ini_body_; }

}  // namespace trident::deck
