// Slurm host-list expansion and topology.conf parsing.
#include "topo/slurm_topology.hpp"

#include <map>
#include <sstream>
#include <stdexcept>

namespace trident::topo {
namespace {

// Splits at commas that are not inside brackets.
std::vector<std::string> split_top_level(const std::string& list) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char ch : list) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (depth < 0) throw std::invalid_argument("unbalanced ']' in host list '" + list + "'");
    if (ch == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += ch;
    }
  }
  if (depth != 0) throw std::invalid_argument("unbalanced '[' in host list '" + list + "'");
  parts.push_back(current);
  return parts;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char ch : s)
    if (ch < '0' || ch > '9') return false;
  return true;
}

// "01-03" -> 01 02 03 (the width of the first bound pads every number), "7" -> 7.
std::vector<std::string> expand_range(const std::string& range, const std::string& list) {
  const auto dash = range.find('-');
  const std::string lo = range.substr(0, dash);
  const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
  if (!all_digits(lo) || !all_digits(hi))
    throw std::invalid_argument("bad range '" + range + "' in host list '" + list + "'");
  const long first = std::stol(lo), last = std::stol(hi);
  if (last < first || last - first > 1000000)
    throw std::invalid_argument("bad range '" + range + "' in host list '" + list + "'");
  std::vector<std::string> names;
  for (long v = first; v <= last; ++v) {
    std::string digits = std::to_string(v);
    if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
    names.push_back(digits);
  }
  return names;
}

// One name with zero or more bracket groups: "r[1-2]n[01-02]".
std::vector<std::string> expand_name(const std::string& name, const std::string& list) {
  const auto open = name.find('[');
  if (open == std::string::npos) return {name};
  const auto close = name.find(']', open);
  if (close == std::string::npos)
    throw std::invalid_argument("unbalanced '[' in host list '" + list + "'");
  const std::string prefix = name.substr(0, open);
  std::vector<std::string> middles;
  std::stringstream ranges(name.substr(open + 1, close - open - 1));
  for (std::string range; std::getline(ranges, range, ',');)
    for (auto& m : expand_range(range, list)) middles.push_back(m);
  std::vector<std::string> names;
  for (const auto& middle : middles)
    for (const auto& rest : expand_name(name.substr(close + 1), list))
      names.push_back(prefix + middle + rest);
  return names;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

Switch parse_switch_line(const std::string& line, int line_number) {
  Switch sw;
  sw.line = line_number;
  std::istringstream words(line);
  const std::string where = "line " + std::to_string(line_number) + ": ";
  for (std::string word; words >> word;) {
    const auto equals = word.find('=');
    if (equals == std::string::npos)
      throw std::invalid_argument(where + "expected Key=Value, found '" + word + "'");
    const std::string key = lower(word.substr(0, equals));
    const std::string value = word.substr(equals + 1);
    if (key == "switchname") sw.name = value;
    else if (key == "nodes") sw.nodes = expand_hostlist(value);
    else if (key == "switches") sw.switches = expand_hostlist(value);
    // LinkSpeed and other attributes describe links we model in the deck instead.
  }
  if (sw.name.empty()) throw std::invalid_argument(where + "no SwitchName=");
  if (sw.nodes.empty() && sw.switches.empty())
    throw std::invalid_argument(where + "switch '" + sw.name + "' has neither Nodes= nor Switches=");
  return sw;
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list) {
  std::vector<std::string> names;
  for (const auto& part : split_top_level(trim(list))) {
    if (trim(part).empty()) throw std::invalid_argument("empty name in host list '" + list + "'");
    for (auto& name : expand_name(trim(part), list)) names.push_back(name);
  }
  return names;
}

std::vector<Switch> parse_topology_conf(const std::string& text) {
  std::vector<Switch> switches;
  std::map<std::string, int> switch_line;
  std::map<std::string, std::string> leaf_of_host;
  std::istringstream stream(text);
  std::string raw;
  for (int line_number = 1; std::getline(stream, raw); ++line_number) {
    const std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    Switch sw = parse_switch_line(line, line_number);
    const std::string where = "line " + std::to_string(line_number) + ": ";
    if (switch_line.count(sw.name))
      throw std::invalid_argument(where + "switch '" + sw.name + "' is already defined on line " +
                                  std::to_string(switch_line[sw.name]));
    switch_line[sw.name] = line_number;
    for (const auto& host : sw.nodes) {
      if (leaf_of_host.count(host))
        throw std::invalid_argument(where + "host '" + host + "' is under both '" +
                                    leaf_of_host[host] + "' and '" + sw.name + "'");
      leaf_of_host[host] = sw.name;
    }
    switches.push_back(std::move(sw));
  }
  return switches;
}

}  // namespace trident::topo
