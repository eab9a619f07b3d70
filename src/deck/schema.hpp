// The input-deck schema: every key, its type, default, allowed range and one-line help — the one
// place where a key is defined. Parsing, validation, --help, the resolved deck and docs/DECK.md
// are all derived from this table.
#pragma once

#include <optional>
#include <string>
#include <vector>

// The hardware profiles inputs/hardware/ holds (parallel.hardware and trident plan --hardware take
// their names), a string literal so that every text naming them is one literal; the profiles' unit
// test holds it to the folder. "this-host" (written by plan --calibrate) is named beside it.
#define TRIDENT_HARDWARE_PROFILES "a100-80gb-dgx, h100-80gb-dgx, h100-500w, h200, b200-dgx, gb200-nvl72"

namespace trident::deck {

enum class KeyType {
  Int,       // 64-bit integer in [min, max]
  Float,     // finite real in [min, max]
  Bool,      // true|false (also 1|0, yes|no, on|off)
  Enum,      // one of `choices`
  IntList,   // comma-separated integers, each in [min, max]; may be empty
  String,    // free text
  Path,      // a file or directory path (existence is checked by whoever opens it)
  Interval,  // "off", "<n>steps", or a duration "<n>s|min|h"
};

struct KeySpec {
  std::string key;                           // "section.name"
  KeyType type;
  std::optional<std::string> default_value;  // nullopt: the deck must give it
  double min = 0;                            // Int, Float, IntList elements
  double max = 0;
  std::vector<std::string> choices;          // Enum
  std::string help;                          // one line, no trailing period

  std::string section() const;  // "model"
  std::string name() const;     // "layers"
  bool required() const { return !default_value.has_value(); }
};

const std::vector<KeySpec>& schema();                      // in documentation order
const std::vector<std::string>& sections();                // in documentation order
const KeySpec* find_key(const std::string& key);           // nullptr if unknown
bool is_section(const std::string& name);

// "an integer in [1, 1024]", "one of 1f1b, gpipe", ... — the "allowed" part of messages.
std::string describe_allowed(const KeySpec& spec);
// "INT", "REAL", "BOOL", "1f1b|gpipe", "INT,INT,...", "TEXT", "PATH", "INTERVAL"
std::string value_name(const KeySpec& spec);

}  // namespace trident::deck
