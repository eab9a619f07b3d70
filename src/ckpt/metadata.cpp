// The root attributes of a checkpoint file <-> Metadata.
#include "ckpt/metadata.hpp"
#include "ckpt/metadata_attributes.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <regex>
#include <sstream>
#include <vector>

#include "core/printable.hpp"
#include "deck/value.hpp"

namespace trident::ckpt {
namespace {

// Root attributes <-> Metadata, one table for both directions.
struct Field {
  const char* name;
  std::function<std::string(const Metadata&)> get;
  std::function<void(Metadata&, const std::string&)> set;
  bool integer;
  bool optional = false;  // added after format version 1 was first written: may be absent
  int since = 1;          // the format version that added it (what a file of an older one lacks)
};

std::string real_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);  // round-trips exactly
  return text;
}

// The Fields of one part of Metadata (a section, or the model's shape), reached from the
// metadata by `part`: what a section's `fields` lists.
template <class Part>
class Collect {
 public:
  struct Reach {
    Part& (*of)(Metadata&);
    const Part& (*of_const)(const Metadata&);
  };
  Collect(std::vector<Field>& out, Reach part) : out_(out), part_(part) {}
  template <class T>
  void integer(const char* name, T Part::*member, bool optional = false) {
    const Reach p = part_;
    out_.push_back({name, [p, member](const Metadata& m) { return std::to_string(p.of_const(m).*member); },
                    [p, member](Metadata& m, const std::string& v) { p.of(m).*member = static_cast<T>(std::stoll(v)); },
                    true, optional});
  }
  void real(const char* name, double Part::*member, bool optional = false) {
    const Reach p = part_;
    out_.push_back({name, [p, member](const Metadata& m) { return real_text(p.of_const(m).*member); },
                    [p, member](Metadata& m, const std::string& v) { p.of(m).*member = std::stod(v); }, false, optional});
  }
  void text(const char* name, std::string Part::*member, bool optional = false, int since = 1) {
    const Reach p = part_;
    out_.push_back({name, [p, member](const Metadata& m) { return p.of_const(m).*member; },
                    [p, member](Metadata& m, const std::string& v) { p.of(m).*member = v; }, false, optional, since});
  }

 private:
  std::vector<Field>& out_;
  Reach part_;
};

// A section is a base of Metadata; the model's shape is its member.
template <class Section>
void add_section(std::vector<Field>& table) {
  Collect<Section> collect(table, {[](Metadata& m) -> Section& { return m; },
                                   [](const Metadata& m) -> const Section& { return m; }});
  Section::fields(collect);
}

void add_model_shape(std::vector<Field>& table) {
  using model::GptConfig;
  Collect<GptConfig> f(table, {[](Metadata& m) -> GptConfig& { return m.model; },
                               [](const Metadata& m) -> const GptConfig& { return m.model; }});
  f.integer("model.layers", &GptConfig::layers);
  f.integer("model.heads", &GptConfig::heads);
  f.integer("model.hidden", &GptConfig::channels);
  f.integer("model.vocab", &GptConfig::vocab);
  f.integer("model.padded_vocab", &GptConfig::padded_vocab);
  f.integer("model.seq_len", &GptConfig::max_seq_len);
  // The architecture (absent before the Llama family: GPT-2).
  const size_t version3 = table.size();
  table.push_back({"model.arch", [](const Metadata& m) { return std::string(model::arch_name(m.model.arch)); },
                   [](Metadata& m, const std::string& v) {
                     m.model.arch = v == "llama" ? model::Arch::llama : model::Arch::gpt2;
                   },
                   false, true});
  f.integer("model.kv_heads", &GptConfig::kv_heads, true);
  f.integer("model.ffn_hidden", &GptConfig::ffn_hidden, true);
  f.integer("model.tie_embeddings", &GptConfig::tie_embeddings, true);
  for (auto [name, member] : {std::pair{"model.rope_theta", &GptConfig::rope_theta}, {"model.norm_eps", &GptConfig::norm_eps}})
    table.push_back({name, [member = member](const Metadata& m) { return real_text(m.model.*member); },
                     [member = member](Metadata& m, const std::string& v) { m.model.*member = std::stof(v); }, false, true});
  for (size_t i = version3; i < table.size(); ++i) table[i].since = 3;
  // Llama 3.1's rotary scaling (absent before format 4: none).
  const size_t version4 = table.size();
  for (auto [name, member] : {std::pair{"model.rope_factor", &GptConfig::rope_factor},
                              {"model.rope_low_freq_factor", &GptConfig::rope_low_freq_factor},
                              {"model.rope_high_freq_factor", &GptConfig::rope_high_freq_factor},
                              {"model.rope_original_context", &GptConfig::rope_original_context}})
    table.push_back({name, [member = member](const Metadata& m) { return real_text(m.model.*member); },
                     [member = member](Metadata& m, const std::string& v) { m.model.*member = std::stof(v); }, false, true});
  for (size_t i = version4; i < table.size(); ++i) table[i].since = 4;
}

// The file's attributes in their order (metadata_checksum's): the kind, then the sections.
const std::vector<Field>& attribute_table() {
  static const std::vector<Field> table = [] {
    std::vector<Field> t;
    add_section<Metadata>(t);  // its own: the kind
    add_section<TrainingState>(t);
    add_section<ScalerState>(t);
    add_model_shape(t);
    add_section<LayoutRecord>(t);
    add_section<BalanceState>(t);
    add_section<Provenance>(t);
    add_section<LineageIds>(t);
    return t;
  }();
  return table;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '\\' ? "\\\\" : c == '\n' ? "\\n" : std::string(1, c);
  return out;
}

std::string unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      out += text[i + 1] == 'n' ? '\n' : text[i + 1];
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

// Version 2 on, the attributes must add up to metadata_checksum: HDF5 keeps attributes in
// object headers without checksums of their own, so a flipped bit in `step` would otherwise
// resume a silently different run.
std::string check_metadata_checksum(hid_t file, const Metadata& metadata) {
  if (metadata.format_version < 2) return "";
  uint64_t stored = 0;
  if (!h5::read_uint_attribute(file, "metadata_checksum", stored)) return "no attribute 'metadata_checksum'";
  const uint64_t computed = metadata_checksum(metadata);
  if (stored == computed) return "";
  char line[200];
  std::snprintf(line, sizeof line, "metadata checksum mismatch (stored %016llx, computed %016llx): an attribute "
                "(step, optimizer_updates, layout, ...) was altered", static_cast<unsigned long long>(stored),
                static_cast<unsigned long long>(computed));
  return line;
}

// Each value for sense on its own (a checksum is no signature: anyone can recompute it): "" or
// the first value that cannot be, with what is allowed.
std::string metadata_problem(const Metadata& m) {
  const auto out_of = [](const char* name, int64_t value, const std::string& allowed) {
    return std::string("attribute '") + name + "' = " + std::to_string(value) + " is impossible: " + allowed;
  };
  if (m.kind != "fast" && m.kind != "full") return "unknown kind '" + m.kind + "'";
  if (m.step < 0) return out_of("step", m.step, "0 or more");
  if (m.tokens_seen < 0) return out_of("tokens_seen", m.tokens_seen, "0 or more");
  if (m.optimizer_updates < 0 || m.optimizer_updates > m.step)
    return out_of("optimizer_updates", m.optimizer_updates, "from 0 to the step, " + std::to_string(m.step));
  if (m.skipped_steps < 0 || m.skipped_steps > m.step)
    return out_of("skipped_steps", m.skipped_steps, "from 0 to the step, " + std::to_string(m.step));
  if (m.bad_steps_in_a_row < 0 || m.bad_steps_in_a_row > m.skipped_steps)
    return out_of("bad_steps_in_a_row", m.bad_steps_in_a_row, "from 0 to skipped_steps, " + std::to_string(m.skipped_steps));
  if (m.precision != "fp32" && m.precision != "bf16" && m.precision != "fp16")
    return "attribute 'precision' = '" + m.precision + "' is impossible: fp32, bf16 or fp16";
  if (!std::isfinite(m.loss_scale) || m.loss_scale < 0) return "attribute 'loss_scale' is not a finite number of 0 or more";
  if (m.loss_scale_good_steps < 0) return out_of("loss_scale_good_steps", m.loss_scale_good_steps, "0 or more");
  if (m.loss_scale_hysteresis_left < 0) return out_of("loss_scale_hysteresis_left", m.loss_scale_hysteresis_left, "0 or more");
  const std::string shape = model::config_problem(m.model);
  if (!shape.empty()) return shape;
  constexpr int64_t kMaxRanks = int64_t(1) << 24;
  if (m.tensor < 1 || m.tensor > kMaxRanks) return out_of("layout.tensor", m.tensor, "from 1 to 2^24");
  if (m.pipeline < 1 || m.pipeline > m.model.layers)
    return out_of("layout.pipeline", m.pipeline, "from 1 to model.layers, " + std::to_string(m.model.layers));
  if (m.data < 1 || m.data > kMaxRanks) return out_of("layout.data", m.data, "from 1 to 2^24");
  if (m.zero < 0 || m.zero > 3) return out_of("layout.zero", m.zero, "0, 1, 2 or 3");
  if (m.micro_batch < 0) return out_of("layout.micro_batch", m.micro_batch, "0 (not recorded) or more");
  const auto positive_list = [](const std::string& text, int64_t count, int64_t sum) {
    try {
      const std::vector<int64_t> values = deck::parse_int_list(text);
      int64_t total = 0;
      for (int64_t v : values) total += v >= 1 && v <= (int64_t(1) << 31) ? v : -(int64_t(1) << 40);
      return static_cast<int64_t>(values.size()) == count && (sum < 0 ? total > 0 : total == sum);
    } catch (const std::exception&) {
      return false;
    }
  };
  if (!positive_list(m.stage_layers, m.pipeline, m.model.layers))
    return "attribute 'layout.stage_layers' = '" + printable(m.stage_layers) + "' is impossible: " +
           std::to_string(m.pipeline) + " counts of at least 1 adding up to model.layers, " + std::to_string(m.model.layers);
  if (!m.replica_shares.empty() && !positive_list(m.replica_shares, m.data, -1))
    return "attribute 'layout.replica_shares' = '" + printable(m.replica_shares) + "' is impossible: " +
           std::to_string(m.data) + " counts of at least 1";
  if (!m.virtual_layers.empty()) {
    const int64_t count = std::count(m.virtual_layers.begin(), m.virtual_layers.end(), ',') + 1;
    bool ok = count > m.pipeline && count % m.pipeline == 0 && positive_list(m.virtual_layers, count, m.model.layers);
    if (ok) {  // stage s holds virtual stages s, s + pipeline, ...
      const std::vector<int64_t> chunks = deck::parse_int_list(m.virtual_layers);
      std::vector<int64_t> totals(static_cast<size_t>(m.pipeline), 0);
      for (size_t u = 0; u < chunks.size(); ++u) totals[u % totals.size()] += chunks[u];
      ok = totals == deck::parse_int_list(m.stage_layers);
    }
    if (!ok)
      return "attribute 'layout.virtual_layers' = '" + printable(m.virtual_layers) + "' is impossible: a multiple of " +
             "layout.pipeline (" + std::to_string(m.pipeline) + ") above it of counts of at least 1, whose stages add " +
             "up to layout.stage_layers, '" + printable(m.stage_layers) + "'";
  }
  return "";
}

}  // namespace

std::string Metadata::id() const {
  char name[64];
  std::snprintf(name, sizeof name, "/step-%08lld.%s", static_cast<long long>(step), kind.c_str());
  return run_id + name;
}

uint64_t metadata_checksum(const Metadata& metadata) {
  const std::string text = "format_version=" + std::to_string(metadata.format_version) + "\n" + metadata.to_text();
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ULL;
  return hash;
}

std::string name_mismatch(const std::string& path, const Metadata& metadata) {
  static const std::regex pattern(R"(step-(\d+)\.(fast|full)\.h5)");
  const std::string name = std::filesystem::path(path).filename().string();
  std::smatch match;
  if (!std::regex_match(name, match, pattern)) return "";
  const long long named = std::stoll(match[1].str());
  if (named == metadata.step && match[2].str() == metadata.kind) return "";
  return "its file name says step " + std::to_string(named) + " (" + match[2].str() + ") but its metadata says step " +
         std::to_string(metadata.step) + " (" + metadata.kind + "): renamed, or the step attribute altered";
}

std::string Metadata::to_text() const {
  std::string text;
  for (const Field& f : attribute_table())  // those of the file's version: what its checksum covers
    if (f.since <= format_version) text += std::string(f.name) + "=" + escape(f.get(*this)) + "\n";
  return text;
}

Metadata Metadata::from_text(const std::string& text) {
  Metadata metadata;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    for (const Field& f : attribute_table())
      if (line.compare(0, equals, f.name) == 0 && std::strlen(f.name) == equals) f.set(metadata, unescape(line.substr(equals + 1)));
  }
  return metadata;
}

std::string write_metadata(hid_t file, const Metadata& metadata) {
  h5::Lock lock(h5::hdf5_mutex());
  Metadata written = metadata;
  written.format_version = kFormatVersion;
  bool ok = h5::write_int_attribute(file, "format_version", kFormatVersion);
  for (const Field& f : attribute_table())
    ok = ok && (f.integer ? h5::write_int_attribute(file, f.name, std::stoll(f.get(written)))
                          : h5::write_string_attribute(file, f.name, f.get(written)));
  ok = ok && h5::write_string_attribute(file, "checksum_algorithm",
                                        "sum mod 2^64 over elements of mix(row-major index * 0x9e3779b97f4a7c15 xor float32 "
                                        "bits), mix(x) = y xor (y >> 31), y = x * 0xbf58476d1ce4e5b9 (docs/CHECKPOINTS.md); "
                                        "metadata_checksum: FNV-1a 64 of the attributes as key=value lines");
  ok = ok && h5::write_uint_attribute(file, "metadata_checksum", metadata_checksum(written));
  return ok ? "" : "writing the metadata attributes failed";
}

std::string read_metadata_of(hid_t file, Metadata& metadata) {
  h5::Lock lock(h5::hdf5_mutex());
  int64_t version = 0;
  if (!h5::read_int_attribute(file, "format_version", version)) return "no format_version attribute";
  if (version < 1 || version > kFormatVersion)
    return "format version " + std::to_string(version) + ", this trident reads versions 1 to " +
           std::to_string(kFormatVersion);
  metadata.format_version = version;
  for (const Field& f : attribute_table()) {
    std::string text;
    int64_t number = 0;
    if (f.integer ? !h5::read_int_attribute(file, f.name, number) : !h5::read_string_attribute(file, f.name, text)) {
      if (f.optional) continue;
      return std::string("no attribute '") + f.name + "'";
    }
    try {
      f.set(metadata, f.integer ? std::to_string(number) : text);
    } catch (const std::exception&) {  // a damaged number that no longer parses
      return std::string("attribute '") + f.name + "' is unreadable";
    }
  }
  const std::string altered = check_metadata_checksum(file, metadata);
  if (!altered.empty()) return altered;
  return metadata_problem(metadata);
}


}  // namespace trident::ckpt
