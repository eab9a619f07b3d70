// Parsing a deck: Boost.Program_options reads the INI text; we add line numbers, duplicate and
// section checks, typed validation and the command-line overrides on top.
#include "deck/deck.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "deck/options.hpp"

namespace trident::deck {
namespace po = boost::program_options;
namespace {

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// "deck.ini:3 (column 7)": where byte `at` of the text lies.
std::string position(const std::string& file_name, const std::string& text, size_t at) {
  const size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
  const size_t column = at - (line_start == std::string::npos || at == 0 ? 0 : line_start + 1) + 1;
  const long line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n');
  return file_name + ":" + std::to_string(line) + " (column " + std::to_string(column) + ")";
}

// The deck's text without a UTF-8 byte-order mark (some Windows editors write one; it is not
// part of the first line). A NUL or another control character means the file is not text at
// all — a binary file given as the deck — and is reported as such, before the line scan echoes
// any of it.
std::string text_without_bom(const std::string& file_name, const std::string& text) {
  const std::string bom = "\xEF\xBB\xBF";
  const std::string body = text.compare(0, bom.size(), bom) == 0 ? text.substr(bom.size()) : text;
  for (size_t at = 0; at < body.size(); ++at) {
    const unsigned char byte = static_cast<unsigned char>(body[at]);
    if (byte >= 0x20 || byte == '\n' || byte == '\t' || byte == '\r') continue;
    char shown[8];
    std::snprintf(shown, sizeof shown, "0x%02x", byte);
    fatal_all(position(file_name, body, at) + ": byte " + shown + (byte == 0 ? " (NUL)" : " (a control character)") +
              ": the deck is binary, not INI text; give a text deck ([section] and name = value lines, UTF-8)");
  }
  const size_t bad = invalid_utf8_at(body);
  if (bad != std::string::npos)
    fatal_all(position(file_name, body, bad) + ": the deck is not UTF-8 text (byte " + printable(body.substr(bad, 1)) +
              "); save it as UTF-8");
  return body;
}

struct KeyLine {
  int line;         // 1-based
  std::string key;  // "section.name", or "name" outside any section
};

// One pass over the text for what Boost does not report: line numbers, unknown sections and
// lines that are neither comments, sections nor assignments.
std::vector<KeyLine> scan_lines(const std::string& file_name, const std::string& text) {
  std::vector<KeyLine> keys;
  std::istringstream stream(text);
  std::string raw, section;
  for (int line = 1; std::getline(stream, raw); ++line) {
    const std::string s = trim(raw.substr(0, raw.find('#')));
    const std::string where = file_name + ":" + std::to_string(line) + ": ";
    if (s.empty()) continue;
    if (s.front() == '[') {
      if (s.back() != ']')
        fatal_all(where + "malformed section header '" + printable(s) + "'; write it as [name]");
      section = trim(s.substr(1, s.size() - 2));
      if (!is_section(section))
        fatal_all(where + "unknown section [" + printable(section) + "]." + suggest_section(section) +
                  " Sections are: " + [] {
                    std::string list;
                    for (const auto& name : sections()) list += (list.empty() ? "" : ", ") + name;
                    return list;
                  }());
      continue;
    }
    const auto equals = s.find('=');
    if (equals == std::string::npos || trim(s.substr(0, equals)).empty())
      fatal_all(where + "cannot read '" + printable(s) + "': expected 'name = value', '[section]' or "
                "'# comment'");
    const std::string name = trim(s.substr(0, equals));
    keys.push_back({line, section.empty() ? name : section + "." + name});
  }
  return keys;
}

std::string unknown_key_message(const std::string& where, const std::string& key) {
  if (key.find('.') == std::string::npos)
    return where + "key '" + printable(key) + "' is outside any section." + suggest_key(key) +
           " (trident train --help lists every key)";
  return where + "unknown key '" + printable(key) + "'." + suggest_key(key) +
         " (trident train --help lists every key)";
}

void check_value(const KeySpec& spec, const std::string& text, const std::string& where) {
  if (auto problem = value_problem(spec, text))
    fatal_all(where + spec.key + " = '" + printable(text) + "' " + printable(*problem) + "; allowed: " +
              describe_allowed(spec));
}

}  // namespace

std::string Origin::describe() const {
  switch (kind) {
    case Kind::File: return file + ":" + std::to_string(line);
    case Kind::CommandLine: return "command line";
    case Kind::Planner: return "parallel.layout = auto";
    case Kind::Default: break;
  }
  return file + " (default)";
}

Deck Deck::parse(const std::string& file_name, const std::string& text,
                 const std::vector<Override>& overrides, const std::vector<Override>& chosen) {
  Deck deck;
  deck.file_name_ = file_name;
  const std::string body = text_without_bom(file_name, text);
  const std::vector<KeyLine> lines = scan_lines(file_name, body);
  std::istringstream stream(body);
  po::parsed_options parsed(nullptr);
  try {
    parsed = po::parse_config_file(stream, key_options(false), /*allow_unregistered=*/true);
  } catch (const po::error& e) {
    fatal_all(file_name + ": " + printable(e.what()) + "; expected INI text: [section] then name = value");
  }
  REQUIRE(parsed.options.size() == lines.size(),
          "Boost read " << parsed.options.size() << " assignments, the scan " << lines.size());
  std::map<std::string, int> first_line;
  for (size_t i = 0; i < parsed.options.size(); ++i) {
    const po::option& option = parsed.options[i];
    const std::string where = file_name + ":" + std::to_string(lines[i].line) + ": ";
    const KeySpec* spec = find_key(option.string_key);
    if (option.unregistered || spec == nullptr)
      fatal_all(unknown_key_message(where, option.string_key));
    if (auto seen = first_line.find(spec->key); seen != first_line.end())
      fatal_all(where + spec->key + " is given twice (lines " + std::to_string(seen->second) +
                " and " + std::to_string(lines[i].line) + "); keep one, or override it on the "
                "command line with --" + spec->key + "=VALUE");
    first_line[spec->key] = lines[i].line;
    const std::string value = option.value.empty() ? "" : trim(option.value.front());
    check_value(*spec, value, where);
    deck.entries_[spec->key] = {value, {Origin::Kind::File, file_name, lines[i].line}};
  }
  std::set<std::string> overridden;
  for (const auto& [key, value] : overrides) {
    const KeySpec* spec = find_key(key);
    if (spec == nullptr) fatal_all(unknown_key_message("command line: ", key));
    if (!overridden.insert(key).second)
      fatal_all("command line: --" + key + " is given twice; keep one");
    check_value(*spec, trim(value), "command line: ");
    deck.entries_[key] = {trim(value), {Origin::Kind::CommandLine, file_name, 0}};
  }
  for (const auto& [key, value] : chosen) {
    const KeySpec* spec = find_key(key);
    REQUIRE(spec != nullptr && !overridden.count(key), "the planner's key " << key << " is unknown or overridden");
    check_value(*spec, trim(value), "parallel.layout = auto: ");
    deck.entries_[key] = {trim(value), {Origin::Kind::Planner, file_name, 0}};
  }
  for (const KeySpec& spec : schema()) {
    if (deck.entries_.count(spec.key)) continue;
    if (spec.required())
      fatal_all(file_name + ": missing required key " + spec.key + " (" + spec.help + "); add '" +
                spec.name() + " = ...' under [" + spec.section() + "] or pass --" + spec.key +
                "=VALUE; allowed: " + describe_allowed(spec));
    deck.entries_[spec.key] = {*spec.default_value, {Origin::Kind::Default, file_name, 0}};
  }
  return deck;
}

const std::string& Deck::text_of(const std::string& key, KeyType expected) const {
  const KeySpec* spec = find_key(key);
  REQUIRE(spec != nullptr, "no deck key '" << key << "' in the schema");
  const bool text_like = expected == KeyType::String &&
                         (spec->type == KeyType::Path || spec->type == KeyType::Enum);
  REQUIRE(spec->type == expected || text_like, "deck key '" << key << "' read as the wrong type");
  return entries_.at(key).text;
}

int64_t Deck::get_int(const std::string& key) const { return parse_int(text_of(key, KeyType::Int)); }
double Deck::get_float(const std::string& key) const {
  return parse_float(text_of(key, KeyType::Float));
}
bool Deck::get_bool(const std::string& key) const { return parse_bool(text_of(key, KeyType::Bool)); }
std::string Deck::get_string(const std::string& key) const {
  return text_of(key, KeyType::String);
}
std::vector<int64_t> Deck::get_int_list(const std::string& key) const {
  return parse_int_list(text_of(key, KeyType::IntList));
}
Interval Deck::get_interval(const std::string& key) const {
  return parse_interval(text_of(key, KeyType::Interval));
}

const Origin& Deck::origin(const std::string& key) const {
  REQUIRE(entries_.count(key), "no deck key '" << key << "'");
  return entries_.at(key).origin;
}

const std::string& Deck::text(const std::string& key) const {
  REQUIRE(entries_.count(key), "no deck key '" << key << "'");
  return entries_.at(key).text;
}

std::string Deck::cite(const std::string& key) const {
  const Entry& entry = entries_.at(key);
  return key + " = " + printable(entry.text) + " (" + entry.origin.describe() + ")";
}

std::string ini_comment(const std::string& text) {
  std::ostringstream out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out << "# " << line << "\n";
  return out.str();
}

std::string Deck::to_ini(const std::string& header_comment) const {
  std::ostringstream out;
  out << ini_comment(header_comment);
  for (const std::string& section : sections()) {
    out << "\n[" << section << "]\n";
    for (const KeySpec& spec : schema()) {
      if (spec.section() != section) continue;
      const Entry& entry = entries_.at(spec.key);
      out << spec.name() << " = " << canonical_value(spec, entry.text);
      if (entry.origin.kind == Origin::Kind::CommandLine) out << "  # command line";
      if (entry.origin.kind == Origin::Kind::Planner) out << "  # parallel.layout = auto";
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace trident::deck
