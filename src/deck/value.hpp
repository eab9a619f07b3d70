// Typed reading of deck values: the one place that turns a key's text into its type and checks
// it against the schema's range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deck/schema.hpp"

namespace trident::deck {

// A checkpoint interval: never, every N optimizer steps, or every N seconds of wall-clock time.
struct Interval {
  enum class Unit { Off, Steps, Seconds };
  Unit unit = Unit::Off;
  double count = 0;  // steps or seconds
  bool operator==(const Interval& other) const {
    return unit == other.unit && count == other.count;
  }
};

// What is wrong with `text` as a value of `spec` ("is not an integer", "is above the maximum"),
// or nullopt when it is a valid value.
std::optional<std::string> value_problem(const KeySpec& spec, const std::string& text);

// Parsers for values that passed value_problem (they throw std::invalid_argument otherwise).
int64_t parse_int(const std::string& text);
double parse_float(const std::string& text);
bool parse_bool(const std::string& text);
std::vector<int64_t> parse_int_list(const std::string& text);
Interval parse_interval(const std::string& text);

// The canonical text of a value, as written into deck.resolved.ini.
std::string canonical_value(const KeySpec& spec, const std::string& text);

}  // namespace trident::deck
