// A parsed input deck: the deck file's values, overridden by the command line, over the schema's
// defaults, each with its origin (file:line, command line, default) for error messages.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "deck/schema.hpp"
#include "deck/value.hpp"

namespace trident::deck {

struct Origin {
  // Planner: chosen by parallel.layout = auto (job/auto_layout.hpp).
  enum class Kind { Default, File, CommandLine, Planner };
  Kind kind = Kind::Default;
  std::string file;  // deck file name (Default and File)
  int line = 0;      // 1-based, File only
  std::string describe() const;  // "deck.ini:12", "command line", "deck.ini (default)", "parallel.layout = auto"
};

using Override = std::pair<std::string, std::string>;  // ("parallel.tensor", "2")

class Deck {
 public:
  // Parses INI text (Boost.Program_options) and applies the overrides in order. Every problem —
  // syntax, unknown section or key, duplicate, wrong type, out of range, missing required key —
  // throws UserError with one line naming the file (and line), the key and what is allowed.
  // `chosen`: the planner's keys (parallel.layout = auto), applied last, not also overrides.
  static Deck parse(const std::string& file_name, const std::string& text,
                    const std::vector<Override>& overrides, const std::vector<Override>& chosen = {});

  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;  // String, Path and Enum keys
  std::vector<int64_t> get_int_list(const std::string& key) const;
  Interval get_interval(const std::string& key) const;

  const Origin& origin(const std::string& key) const;
  // The value as given (untyped), e.g. for recording the deck in output files.
  const std::string& text(const std::string& key) const;
  // "parallel.tensor = 2 (command line)": a key, its value and where it came from.
  std::string cite(const std::string& key) const;
  const std::string& file_name() const { return file_name_; }

  // Every key of the schema with its resolved value, grouped by section: a valid deck.
  std::string to_ini(const std::string& header_comment) const;

 private:
  struct Entry {
    std::string text;
    Origin origin;
  };
  const std::string& text_of(const std::string& key, KeyType expected) const;

  std::string file_name_;
  std::map<std::string, Entry> entries_;
};

// Each line of `text` as an INI comment ("# line\n"): the header of a written deck.
std::string ini_comment(const std::string& text);

// "Did you mean 'model.layers'?" for an unknown key (full "section.name" or a bare name), or "".
std::string suggest_key(const std::string& unknown);
std::string suggest_section(const std::string& unknown);

}  // namespace trident::deck
