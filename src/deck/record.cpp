// A deck's citations and resolved text, kept after its values are read.
#include "deck/record.hpp"

#include <sstream>

namespace trident::deck {

Record::Record(const Deck& deck) : file_name_(deck.file_name()), ini_body_(deck.to_ini("")) {
  for (const KeySpec& spec : schema()) {
    cites_[spec.key] = {deck.cite(spec.key), deck.origin(spec.key).describe()};
    values_.emplace_back(spec.key, canonical_value(spec, deck.text(spec.key)));
  }
}

std::string Record::cite(const std::string& key) const { return cites_.at(key).first; }

std::string Record::origin(const std::string& key) const { return cites_.at(key).second; }

std::string Record::to_ini(const std::string& header_comment) const {
  std::ostringstream out;
  std::istringstream header(header_comment);
  for (std::string line; std::getline(header, line);) out << "# " << line << "\n";
  return out.str() + ini_body_;
}

}  // namespace trident::deck
