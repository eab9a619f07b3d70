// Parsing and range checks of deck values.
#include "deck/value.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace trident::deck {
namespace {

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::optional<int64_t> try_int(const std::string& raw) {
  const std::string s = trim(raw);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE || end != s.c_str() + s.size()) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> try_float(const std::string& raw) {
  const std::string s = trim(raw);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno == ERANGE || end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<bool> try_bool(const std::string& raw) {
  const std::string s = trim(raw);
  if (s == "true" || s == "1" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "0" || s == "no" || s == "off") return false;
  return std::nullopt;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream stream(s);
  std::string part;
  while (std::getline(stream, part, ',')) parts.push_back(trim(part));
  if (!s.empty() && s.back() == ',') parts.push_back("");
  return parts;
}

std::optional<Interval> try_interval(const std::string& raw) {
  const std::string s = trim(raw);
  if (s == "off" || s == "0") return Interval{};
  size_t digits = 0;
  while (digits < s.size() && (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.'))
    ++digits;
  const auto count = try_float(s.substr(0, digits));
  if (!count || *count <= 0) return std::nullopt;
  const std::string unit = trim(s.substr(digits));
  if (unit == "steps" || unit == "step") {
    if (*count != std::floor(*count)) return std::nullopt;
    return Interval{Interval::Unit::Steps, *count};
  }
  if (unit == "s") return Interval{Interval::Unit::Seconds, *count};
  if (unit == "min") return Interval{Interval::Unit::Seconds, *count * 60};
  if (unit == "h") return Interval{Interval::Unit::Seconds, *count * 3600};
  return std::nullopt;
}

std::optional<std::string> range_problem(const KeySpec& spec, double v) {
  if (v < spec.min) return "is below the minimum";
  if (v > spec.max) return "is above the maximum";
  return std::nullopt;
}

// The shortest text that reads back as exactly `v` (6e-4 stays "0.0006", not 17 digits).
std::string format_number(double v) {
  for (int precision = 6; precision <= 17; ++precision) {
    std::ostringstream os;
    os.precision(precision);
    os << v;
    if (std::strtod(os.str().c_str(), nullptr) == v) return os.str();
  }
  return std::to_string(v);
}

}  // namespace

std::optional<std::string> value_problem(const KeySpec& spec, const std::string& text) {
  switch (spec.type) {
    case KeyType::Int: {
      const auto v = try_int(text);
      if (!v) return std::string("is not an integer");
      return range_problem(spec, static_cast<double>(*v));
    }
    case KeyType::Float: {
      const auto v = try_float(text);
      if (!v) return std::string("is not a finite number");
      return range_problem(spec, *v);
    }
    case KeyType::Bool:
      if (!try_bool(text)) return std::string("is not a boolean");
      return std::nullopt;
    case KeyType::Enum:
      for (const auto& c : spec.choices)
        if (trim(text) == c) return std::nullopt;
      return std::string("is not an allowed choice");
    case KeyType::IntList: {
      if (trim(text).empty()) return std::nullopt;
      for (const auto& part : split_commas(text)) {
        const auto v = try_int(part);
        if (!v) return "has an element '" + part + "' that is not an integer";
        if (auto p = range_problem(spec, static_cast<double>(*v))) return "has an element that " + *p;
      }
      return std::nullopt;
    }
    case KeyType::String:
    case KeyType::Path: return std::nullopt;
    case KeyType::Interval:
      if (!try_interval(text)) return std::string("is not an interval");
      return std::nullopt;
  }
  return std::string("has an unknown type");
}

int64_t parse_int(const std::string& text) {
  const auto v = try_int(text);
  if (!v) throw std::invalid_argument("not an integer: '" + text + "'");
  return *v;
}

double parse_float(const std::string& text) {
  const auto v = try_float(text);
  if (!v) throw std::invalid_argument("not a number: '" + text + "'");
  return *v;
}

bool parse_bool(const std::string& text) {
  const auto v = try_bool(text);
  if (!v) throw std::invalid_argument("not a boolean: '" + text + "'");
  return *v;
}

std::vector<int64_t> parse_int_list(const std::string& text) {
  std::vector<int64_t> values;
  if (trim(text).empty()) return values;
  for (const auto& part : split_commas(text)) values.push_back(parse_int(part));
  return values;
}

Interval parse_interval(const std::string& text) {
  const auto v = try_interval(text);
  if (!v) throw std::invalid_argument("not an interval: '" + text + "'");
  return *v;
}

std::string canonical_value(const KeySpec& spec, const std::string& text) {
  switch (spec.type) {
    case KeyType::Int: return std::to_string(parse_int(text));
    case KeyType::Float: return format_number(parse_float(text));
    case KeyType::Bool: return parse_bool(text) ? "true" : "false";
    case KeyType::IntList: {
      std::string out;
      for (int64_t v : parse_int_list(text)) out += (out.empty() ? "" : ",") + std::to_string(v);
      return out;
    }
    default: return trim(text);
  }
}

}  // namespace trident::deck
