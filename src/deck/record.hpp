// What the program keeps of a deck once its values are read into typed settings (the settings
// code is the only reader of values by key): where each key's value came from, for the messages
// that cite it, and the resolved deck as the record of the run (deck.resolved.ini, the metrics
// file's attributes, checkpoint metadata). Holding a Record, code cannot read a value by name.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "deck/deck.hpp"

namespace trident::deck {

class Record {
 public:
  Record() = default;
  explicit Record(const Deck& deck);

  // "parallel.tensor = 2 (command line)", as Deck::cite.
  std::string cite(const std::string& key) const;
  // "deck.ini:12", "command line", "deck.ini (default)".
  std::string origin(const std::string& key) const;
  const std::string& file_name() const { return file_name_; }
  // The resolved deck under `header_comment`, as Deck::to_ini.
  std::string to_ini(const std::string& header_comment) const;
  // Every key of the schema with its canonical value, in documentation order.
  const std::vector<std::pair<std::string, std::string>>& values() const { return values_; }

 private:
  std::string file_name_;
  std::map<std::string, std::pair<std::string, std::string>> cites_;  // key → (cite, origin)
  std::string ini_body_;  // to_ini without the header
  std::vector<std::pair<std::string, std::string>> values_;
};

}  // namespace trident::deck
