// Hardware profiles: parsing, formatting, and the links measured by commbench.
#include "plan/hardware.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace trident::plan {
namespace {

std::string trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

struct NumberKey {
  const char* key;
  double lo, hi;
  bool optional = false;  // 0 when absent (what profiles written before the key meant)
};

// Every number a profile gives, with its range (a profile is a user's input).
const std::vector<NumberKey>& number_keys() {
  static const std::vector<NumberKey> keys = {
      {"device.memory_gb", 1e-3, 1e6},           {"device.peak_tflops_fp32", 1e-6, 1e6},
      {"device.peak_tflops_bf16", 1e-6, 1e6},    {"device.peak_tflops_fp16", 1e-6, 1e6},
      {"device.gemm_fraction", 1e-3, 1},         {"device.memory_bandwidth_gbps", 1e-3, 1e6},
      {"device.reserved_gb", 0, 1e6, true},      {"device.nccl_mb_per_group", 0, 1e6, true},
      {"device.compute_units", 0, 1e6, true},   {"device.comm_interference", 0, 1, true},
      {"device.shared_memory_kb", 0, 1e6, true},
      {"cluster.devices_per_node", 1, 1e6},      {"cluster.nodes_per_rack", 1, 1e6},
      {"link.node_latency_us", 0, 1e7},          {"link.node_bandwidth_gbps", 1e-6, 1e6},
      {"link.rack_latency_us", 0, 1e7},          {"link.rack_bandwidth_gbps", 1e-6, 1e6},
      {"link.cross_rack_latency_us", 0, 1e7},    {"link.cross_rack_bandwidth_gbps", 1e-6, 1e6},
  };
  return keys;
}

double number(const std::map<std::string, std::string>& ini, const NumberKey& k, const std::string& origin) {
  const auto it = ini.find(k.key);
  if (it == ini.end() && k.optional) return 0;
  if (it == ini.end())
    throw std::invalid_argument(origin + ": " + k.key + " is missing; every profile gives it (see inputs/hardware/)");
  char* end = nullptr;
  const double value = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || trim(end) != "" || !std::isfinite(value) || value < k.lo || value > k.hi)
    throw std::invalid_argument(origin + ": " + k.key + " = '" + it->second + "' is not a number in [" +
                                std::to_string(k.lo) + ", " + std::to_string(k.hi) + "]");
  return value;
}

// "bf16.96x2048x2048x64" = "12.5" -> a GemmPoint (three dimensions: batch 1).
GemmPoint gemm_point(const std::string& key, const std::string& value, const std::string& origin) {
  const std::string name = key.substr(std::string("gemm.").size());
  const size_t dot = name.find('.');
  const std::string precision = name.substr(0, dot);
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument(origin + ": " + key + " = '" + value + "': " + why +
                                 " (a [gemm] line is PRECISION.MxNxK or PRECISION.BATCHxMxNxK = TFLOP/s, "
                                 "PRECISION one of fp32, bf16, fp16)");
  };
  if (dot == std::string::npos || (precision != "fp32" && precision != "bf16" && precision != "fp16"))
    throw bad("unknown precision '" + precision + "'");
  std::vector<double> dims;
  std::stringstream parts(name.substr(dot + 1));
  for (std::string part; std::getline(parts, part, 'x');) {
    char* end = nullptr;
    const double d = std::strtod(part.c_str(), &end);
    if (part.empty() || *end != '\0' || !(d >= 1) || d > 1e9 || d != std::floor(d)) throw bad("'" + part + "' is not a dimension");
    dims.push_back(d);
  }
  if (dims.size() != 3 && dims.size() != 4) throw bad("the shape needs 3 or 4 dimensions");
  if (dims.size() == 3) dims.insert(dims.begin(), 1.0);
  char* end = nullptr;
  const double tflops = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || trim(end) != "" || !(tflops > 0) || tflops > 1e6) throw bad("not a rate in (0, 1e6] TFLOP/s");
  return {precision, dims[0], dims[1], dims[2], dims[3], tflops * 1e12};
}

std::string gemm_key(const GemmPoint& p) {
  char text[96];
  if (p.batch == 1) std::snprintf(text, sizeof text, "%s.%.0fx%.0fx%.0f", p.precision.c_str(), p.M, p.N, p.K);
  else std::snprintf(text, sizeof text, "%s.%.0fx%.0fx%.0fx%.0f", p.precision.c_str(), p.batch, p.M, p.N, p.K);
  return text;
}

}  // namespace

double Hardware::peak(const std::string& precision) const {
  return precision == "bf16" ? peak_bf16 : precision == "fp16" ? peak_fp16 : peak_fp32;
}

std::map<std::string, std::string> parse_ini(const std::string& text, const std::string& origin) {
  std::map<std::string, std::string> values;
  std::istringstream in(text);
  std::string line, section;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line.substr(0, line.find_first_of("#;")));
    if (line.empty()) continue;
    if (line.front() == '[' && line.back() == ']') {
      section = trim(line.substr(1, line.size() - 2));
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument(origin + ":" + std::to_string(number) + ": '" + line +
                                  "' is neither [section] nor key = value");
    values[section + "." + trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return values;
}

Hardware parse_hardware(const std::string& text, const std::string& origin) {
  const auto ini = parse_ini(text, origin);
  for (const auto& [key, value] : ini) {
    if (key.rfind("gemm.", 0) == 0) continue;  // the measured rates, read below
    bool known = key == "device.name";
    for (const NumberKey& k : number_keys()) known = known || key == k.key;
    if (!known) throw std::invalid_argument(origin + ": unknown key " + key + " (keys: see inputs/hardware/a100-80gb-dgx.ini)");
  }
  std::vector<double> v;
  for (const NumberKey& k : number_keys()) v.push_back(number(ini, k, origin));
  Hardware hw;
  hw.name = ini.count("device.name") ? ini.at("device.name") : origin;
  hw.memory_bytes = v[0] * 1e9;
  hw.peak_fp32 = v[1] * 1e12;
  hw.peak_bf16 = v[2] * 1e12;
  hw.peak_fp16 = v[3] * 1e12;
  hw.gemm_fraction = v[4];
  hw.memory_bandwidth = v[5] * 1e9;
  hw.reserved_bytes = v[6] * 1e9;
  hw.nccl_bytes_per_group = v[7] * 1e6;
  hw.compute_units = static_cast<int>(v[8]);
  hw.comm_interference = v[9];
  hw.shared_memory_bytes = v[10] * 1024;
  hw.devices_per_node = static_cast<int>(v[11]);
  hw.nodes_per_rack = static_cast<int>(v[12]);
  for (int l = 0; l < 3; ++l) hw.links[l] = {v[13 + 2 * l] * 1e-6, v[14 + 2 * l] * 1e9};
  for (const auto& [key, value] : ini)
    if (key.rfind("gemm.", 0) == 0) hw.gemm_table.push_back(gemm_point(key, value, origin));
  return hw;
}

std::string format_hardware(const Hardware& hw, const std::string& header,
                            const std::map<std::string, std::string>& sources) {
  const double values[] = {hw.memory_bytes / 1e9, hw.peak_fp32 / 1e12, hw.peak_bf16 / 1e12, hw.peak_fp16 / 1e12,
                           hw.gemm_fraction, hw.memory_bandwidth / 1e9, hw.reserved_bytes / 1e9,
                           hw.nccl_bytes_per_group / 1e6, double(hw.compute_units), hw.comm_interference,
                           hw.shared_memory_bytes / 1024, double(hw.devices_per_node),
                           double(hw.nodes_per_rack), hw.links[0].latency_s * 1e6, hw.links[0].bandwidth_bytes_per_s / 1e9,
                           hw.links[1].latency_s * 1e6, hw.links[1].bandwidth_bytes_per_s / 1e9,
                           hw.links[2].latency_s * 1e6, hw.links[2].bandwidth_bytes_per_s / 1e9};
  std::string out = header, section;
  auto source = [&](const std::string& key) {
    const auto it = sources.find(key);
    return it == sources.end() ? std::string() : "  # " + it->second;
  };
  out += "[device]\nname = " + hw.name + source("device.name") + "\n";
  section = "device";
  for (size_t i = 0; i < number_keys().size(); ++i) {
    const std::string key = number_keys()[i].key, sec = key.substr(0, key.find('.'));
    if (sec != section) out += "\n[" + (section = sec) + "]\n";
    char text[64];
    std::snprintf(text, sizeof text, "%.6g", values[i]);
    out += key.substr(key.find('.') + 1) + " = " + text + source(key) + "\n";
  }
  if (!hw.gemm_table.empty()) out += "\n[gemm]" + source("gemm") + "\n";
  for (const GemmPoint& p : hw.gemm_table) {
    char text[64];
    std::snprintf(text, sizeof text, " = %.6g", p.flops_per_s / 1e12);
    out += gemm_key(p) + text + "\n";
  }
  return out;
}

void apply_links_ini(const std::string& text, Hardware& hw) {
  const auto ini = parse_ini(text, "links.ini");
  for (int l = 0; l < 3; ++l) {
    const std::string name = topo::level_key(static_cast<Level>(l));
    const auto ranks = ini.find(name + ".ranks"), lat = ini.find(name + ".latency_us"), bw = ini.find(name + ".busbw_gbps");
    if (lat == ini.end() || bw == ini.end() || ranks == ini.end())
      throw std::invalid_argument("links.ini: [" + name + "] lacks ranks, latency_us or busbw_gbps; write it with trident commbench");
    if (std::stoi(ranks->second) < 2) continue;  // nothing crossed this level
    hw.links[l] = {std::stod(lat->second) * 1e-6, std::stod(bw->second) * 1e9};
  }
  // A level nothing crossed (one rank per node, one rack) is never used for a group wider than
  // it; it takes the nearest measured level's figures so that the profile stays complete.
  for (int pass = 0; pass < 2; ++pass)
    for (int l = 0; l < 3; ++l)
      if (hw.links[l].bandwidth_bytes_per_s <= 0)
        for (int other : {l - 1, l + 1})
          if (other >= 0 && other < 3 && hw.links[other].bandwidth_bytes_per_s > 0) hw.links[l] = hw.links[other];
}

}  // namespace trident::plan
