// GPT-2's encoder.json and vocab.bpe: the printable byte symbols, the object of string -> token
// id (through core/json.hpp), and the merge list.
#include "data/bpe_files.hpp"

#include <cstdio>
#include <stdexcept>
#include <unordered_map>

#include "core/file_util.hpp"
#include "core/json.hpp"
#include "data/utf8.hpp"

namespace trident::data {
namespace {

constexpr size_t kMaxVocabFileBytes = size_t(64) << 20;  // GPT-2's: 1.0 and 0.5 MB

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6)), out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12)), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18)), out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// GPT-2's bytes_to_unicode(): the printable bytes stand for themselves, the others are
// U+0100 + (their index among the non-printable bytes).
struct SymbolMap {
  char32_t of_byte[256];
  std::unordered_map<char32_t, unsigned char> byte_of;
  SymbolMap() {
    const std::vector<unsigned char>& order = gpt2_byte_order();
    int shifted = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      const unsigned char b = order[i];
      of_byte[b] = i < 188 ? char32_t(b) : char32_t(256 + shifted++);  // 188 printable bytes first
      byte_of[of_byte[b]] = b;
    }
  }
};

const SymbolMap& symbol_map() {
  static const SymbolMap map;
  return map;
}

std::runtime_error file_error(const std::string& path, const std::string& what) {
  return std::runtime_error("vocabulary file '" + path + "': " + what);
}

std::string read_whole(const std::string& path) {
  std::string text, why;
  if (!read_file(path, kMaxVocabFileBytes, text, why)) throw file_error(path, why);
  return text;
}

// Token strings by id from encoder.json: every id from 0 to the largest exactly once.
std::vector<std::string> read_encoder(const std::string& path, std::unordered_map<std::string, int>& id_of) {
  const std::string text = read_whole(path);
  // encoder.json: {"token": id, ...}, the ids non-negative integers.
  const JsonLookup json = parse_json_lookup(path, text, "give GPT-2's encoder.json format");
  if (!json.is_object()) throw file_error(path, "is not a JSON object of token ids; give GPT-2's encoder.json format");
  std::vector<std::pair<std::string, int>> entries;
  for (const auto& [symbols, value] : json.items()) {
    if (!value.is_number_unsigned() || value.get<uint64_t>() >= uint64_t(kMaxVocab))
      throw file_error(path, "token '" + symbols + "' has id " + value.dump() + ", not an integer from 0 to " +
                                 std::to_string(kMaxVocab - 1) + "; give GPT-2's encoder.json format");
    entries.emplace_back(symbols, static_cast<int>(value.get<uint64_t>()));
  }
  std::vector<std::string> tokens(entries.size());
  std::vector<bool> seen(entries.size(), false);
  for (const auto& [symbols, id] : entries) {
    if (static_cast<size_t>(id) >= entries.size() || seen[id])
      throw file_error(path, "token ids must be 0 to " + std::to_string(entries.size() - 1) + " each once; id " +
                                 std::to_string(id) + " breaks that");
    seen[id] = true;
    try {
      tokens[id] = symbols_to_bytes(symbols);
    } catch (const std::invalid_argument& e) {
      throw file_error(path, "token " + std::to_string(id) + ": " + e.what());
    }
    id_of[symbols] = id;
  }
  return tokens;
}

std::vector<std::pair<int, int>> read_merges(const std::string& path, const std::unordered_map<std::string, int>& id_of) {
  const std::string text = read_whole(path);
  std::vector<std::pair<int, int>> merges;
  size_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1, ++line_no;
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    const auto left = id_of.find(line.substr(0, space)), right = id_of.find(space == std::string::npos ? "" : line.substr(space + 1));
    if (space == std::string::npos || left == id_of.end() || right == id_of.end())
      throw file_error(path, "line " + std::to_string(line_no) + " is not a merge of two tokens of encoder.json");
    merges.emplace_back(left->second, right->second);
  }
  return merges;
}

}  // namespace

std::string bytes_to_symbols(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) append_utf8(out, symbol_map().of_byte[b]);
  return out;
}

std::string symbols_to_bytes(std::string_view symbols) {
  std::string out;
  const auto* bytes = reinterpret_cast<const unsigned char*>(symbols.data());
  for (size_t at = 0; at < symbols.size();) {
    const Utf8Char c = decode_utf8(bytes + at, symbols.size() - at);
    const auto it = symbol_map().byte_of.find(c.cp);
    if (c.cp == kInvalidCodePoint || it == symbol_map().byte_of.end())
      throw std::invalid_argument("'" + std::string(symbols) + "' holds a character that is not a GPT-2 byte symbol");
    out += static_cast<char>(it->second);
    at += c.bytes;
  }
  return out;
}

void write_gpt2_files(const Bpe& bpe, const std::string& dir) {
  std::string encoder = "{";
  for (size_t id = 0; id < bpe.tokens().size(); ++id)
    encoder += (id ? ", " : "") + json_ascii_string(bytes_to_symbols(bpe.tokens()[id])) + ": " + std::to_string(id);
  encoder += "}";
  std::string merges = "#version: 0.2\n";
  for (const auto& [left, right] : bpe.merges())
    merges += bytes_to_symbols(bpe.tokens()[left]) + " " + bytes_to_symbols(bpe.tokens()[right]) + "\n";
  for (const auto& [name, text] : {std::pair{"/encoder.json", &encoder}, std::pair{"/vocab.bpe", &merges}}) {
    const std::string problem = write_atomically(dir + name, {{text->data(), text->size()}});
    if (!problem.empty()) throw std::runtime_error(problem);
  }
}

Bpe read_gpt2_files(const std::string& dir) {
  std::unordered_map<std::string, int> id_of;  // symbols -> id
  std::vector<std::string> tokens = read_encoder(dir + "/encoder.json", id_of);
  std::vector<std::pair<int, int>> merges = read_merges(dir + "/vocab.bpe", id_of);
  try {
    return Bpe(std::move(tokens), std::move(merges));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("vocabulary in '" + dir + "' (encoder.json, vocab.bpe): " + e.what());
  }
}

}  // namespace trident::data
