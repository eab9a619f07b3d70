// tokenizer.json through core/json.hpp, checked key by key.
#include "data/hf_tokenizer.hpp"

#include <stdexcept>
#include <unordered_map>

#include "core/file_util.hpp"
#include "core/json.hpp"
#include "data/bpe.hpp"
#include "data/bpe_files.hpp"

namespace trident::data {
namespace {

constexpr size_t kMaxTokenizerBytes = size_t(256) << 20;  // Llama 3's is 9 MB

struct Reader {
  std::string path;
  std::runtime_error error(const std::string& what) const {
    return std::runtime_error("tokenizer file '" + path + "': " + what);
  }
  // `key` of `object` (named `where` in messages) when present and not null, else nullptr.
  const JsonLookup* get(const JsonLookup& object, const std::string& where, const char* key) const {
    if (!object.is_object()) throw error(where + " is not an object");
    return object.contains(key) && !object[key].is_null() ? &object[key] : nullptr;
  }
  bool flag(const JsonLookup& object, const std::string& where, const char* key, bool fallback) const {
    const JsonLookup* v = get(object, where, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) throw error(where + "." + key + " is " + v->dump() + ", not true or false");
    return v->get<bool>();
  }
  std::string text(const JsonLookup& object, const std::string& where, const char* key) const {
    const JsonLookup* v = get(object, where, key);
    if (v == nullptr || !v->is_string()) throw error(where + "." + key + " is missing or not a string");
    return v->get<std::string>();
  }
};

void check_byte_level(const Reader& r, const JsonLookup& level, const std::string& where, bool regex_wanted) {
  if (r.flag(level, where, "add_prefix_space", false))
    throw r.error(where + ".add_prefix_space is true; Trident runs byte-level tokenizers without it (GPT-2's and "
                          "Llama 3's have it false)");
  if (r.flag(level, where, "use_regex", true) != regex_wanted)
    throw r.error(where + ".use_regex is " + (regex_wanted ? "false" : "true") + "; Trident reads a ByteLevel with GPT-2's "
                  "pattern alone, or after a Split that holds the pattern");
}

// The pre-tokenising pattern the file's pre_tokenizer runs.
std::string pattern_of(const Reader& r, const JsonLookup& pre) {
  const std::string type = r.text(pre, "pre_tokenizer", "type");
  if (type == "ByteLevel") {
    check_byte_level(r, pre, "pre_tokenizer", true);
    return kGpt2Pattern;
  }
  const JsonLookup* steps = r.get(pre, "pre_tokenizer", "pretokenizers");
  if (type != "Sequence" || steps == nullptr || !steps->is_array() || steps->size() != 2)
    throw r.error("pre_tokenizer of type " + type + "; Trident runs ByteLevel, or a Sequence of a Split and a ByteLevel");
  const JsonLookup& split = (*steps)[0];
  if (r.text(split, "pre_tokenizer.pretokenizers[0]", "type") != "Split" ||
      r.text((*steps)[1], "pre_tokenizer.pretokenizers[1]", "type") != "ByteLevel")
    throw r.error("pre_tokenizer is a Sequence of other steps than a Split and a ByteLevel");
  check_byte_level(r, (*steps)[1], "pre_tokenizer.pretokenizers[1]", false);
  const std::string where = "pre_tokenizer.pretokenizers[0]";
  if (r.text(split, where, "behavior") != "Isolated" || r.flag(split, where, "invert", false))
    throw r.error(where + " splits with behavior " + r.text(split, where, "behavior") +
                  (r.flag(split, where, "invert", false) ? " inverted" : "") + "; Trident runs Isolated, not inverted");
  const JsonLookup* pattern = r.get(split, where, "pattern");
  if (pattern != nullptr && pattern->is_object() && pattern->contains("Regex") && (*pattern)["Regex"].is_string())
    return (*pattern)["Regex"].get<std::string>();
  if (pattern != nullptr && pattern->is_object() && pattern->contains("String") && (*pattern)["String"].is_string())
    return literal_pattern((*pattern)["String"].get<std::string>());
  throw r.error(where + ".pattern is not {\"Regex\": ...} or {\"String\": ...}");
}

// merges: "left right" strings, or [left, right] pairs (tokenizers 0.20 on).
std::pair<std::string, std::string> merge_sides(const Reader& r, const JsonLookup& merge, size_t rank) {
  if (merge.is_string()) {
    const std::string m = merge.get<std::string>();
    const size_t space = m.find(' ');
    if (space != std::string::npos && m.find(' ', space + 1) == std::string::npos)
      return {m.substr(0, space), m.substr(space + 1)};
  } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  }
  throw r.error("model.merges[" + std::to_string(rank) + "] is " + merge.dump() + ", not \"left right\" or [left, right]");
}

}  // namespace

HfTokenizerSpec read_hf_tokenizer(const std::string& path) {
  const Reader r{path};
  std::string content, why;
  if (!read_file(path, kMaxTokenizerBytes, content, why)) throw r.error(why);
  const JsonLookup j = parse_json_lookup("tokenizer file '" + path + "'", content, "expected Hugging Face's tokenizer.json");
  if (!j.is_object()) throw r.error("not a JSON object");
  if (r.get(j, "tokenizer.json", "normalizer") != nullptr)
    throw r.error("has a normalizer, which Trident does not apply; give a byte-level BPE tokenizer without one");
  const JsonLookup* model = r.get(j, "tokenizer.json", "model");
  const JsonLookup* pre = r.get(j, "tokenizer.json", "pre_tokenizer");
  if (model == nullptr || pre == nullptr) throw r.error("needs a model and a pre_tokenizer");
  if (r.text(*model, "model", "type") != "BPE")
    throw r.error("model of type " + r.text(*model, "model", "type") + "; Trident reads byte-level BPE (type BPE)");
  for (const char* unsupported : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    const JsonLookup* v = r.get(*model, "model", unsupported);
    if (v != nullptr && !(v->is_string() && v->get<std::string>().empty()))
      throw r.error(std::string("model.") + unsupported + " is " + v->dump() + "; Trident reads byte-level BPE without it");
  }
  if (r.flag(*model, "model", "byte_fallback", false)) throw r.error("model.byte_fallback is true; byte-level BPE has no fallback");

  HfTokenizerSpec spec;
  spec.ignore_merges = r.flag(*model, "model", "ignore_merges", false);
  spec.pattern = pattern_of(r, *pre);
  const JsonLookup* vocab = r.get(*model, "model", "vocab");
  if (vocab == nullptr || !vocab->is_object()) throw r.error("model.vocab is not an object of token ids");
  std::unordered_map<std::string, int> id_of;  // symbols -> id
  std::vector<bool> named;
  auto name = [&](int64_t id, std::string bytes, const std::string& what) {
    if (id < 0 || id >= kMaxVocab)
      throw r.error(what + " has id " + std::to_string(id) + ", not from 0 to " + std::to_string(kMaxVocab - 1));
    if (static_cast<size_t>(id) >= spec.tokens.size()) spec.tokens.resize(id + 1), named.resize(id + 1);
    if (named[id] && spec.tokens[id] != bytes) throw r.error("id " + std::to_string(id) + " names two tokens");
    spec.tokens[id] = std::move(bytes), named[id] = true;
  };
  for (const auto& [symbols, id] : vocab->items()) {
    if (!id.is_number_integer()) throw r.error("model.vocab[" + json_ascii_string(symbols) + "] is not a token id");
    try {
      name(id.get<int64_t>(), symbols_to_bytes(symbols), "token " + json_ascii_string(symbols));
    } catch (const std::invalid_argument& e) {
      throw r.error(std::string("model.vocab: ") + e.what() + "; a byte-level vocabulary is written in GPT-2's byte symbols");
    }
    id_of[symbols] = id.get<int>();
  }
  if (const JsonLookup* added = r.get(j, "tokenizer.json", "added_tokens")) {
    if (!added->is_array()) throw r.error("added_tokens is not a list");
    for (const JsonLookup& a : *added) {
      const JsonLookup* id = r.get(a, "added_tokens[]", "id");
      const std::string text = r.text(a, "added_tokens[]", "content");
      if (id == nullptr || !id->is_number_integer()) throw r.error("added token " + json_ascii_string(text) + " has no id");
      for (const char* option : {"lstrip", "rstrip", "single_word"})
        if (r.flag(a, "added_tokens[]", option, false))
          throw r.error("added token " + json_ascii_string(text) + " sets " + option + ", which Trident does not run");
      if (text.empty()) throw r.error("an added token is empty");
      name(id->get<int64_t>(), text, "added token " + json_ascii_string(text));
      spec.added.emplace_back(text, id->get<int>());
    }
  }
  for (size_t id = 0; id < named.size(); ++id)
    if (!named[id]) throw r.error("no token has id " + std::to_string(id) + " (ids 0 to " + std::to_string(named.size() - 1) + " must each name one)");
  const JsonLookup* merges = r.get(*model, "model", "merges");
  if (merges == nullptr || !merges->is_array()) throw r.error("model.merges is not a list");
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const auto [left, right] = merge_sides(r, (*merges)[rank], rank);
    const auto a = id_of.find(left), b = id_of.find(right);
    if (a == id_of.end() || b == id_of.end())
      throw r.error("model.merges[" + std::to_string(rank) + "] joins " + json_ascii_string(a == id_of.end() ? left : right) +
                    ", which is not in model.vocab");
    spec.merges.emplace_back(a->second, b->second);
  }
  return spec;
}

}  // namespace trident::data
