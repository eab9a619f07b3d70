// GPT-2's pre-tokenising split (see the header for the pattern it follows).
#include "data/pretokenize.hpp"

#include "data/unicode_classes.hpp"

namespace trident::data {
namespace {

enum class Kind { Letter, Number, Space, Other };

Kind kind_of(char32_t cp) {
  if (cp == kInvalidCodePoint) return Kind::Other;
  if (is_space(cp)) return Kind::Space;
  if (is_letter(cp)) return Kind::Letter;
  if (is_number(cp)) return Kind::Number;
  return Kind::Other;
}

struct Char {
  Kind kind;
  int bytes;
};

Char char_at(std::string_view text, size_t at) {
  const Utf8Char c = decode_utf8(reinterpret_cast<const unsigned char*>(text.data()) + at, text.size() - at);
  return {kind_of(c.cp), c.bytes};
}

// 's 't 'm 'd 're 've 'll: their length, or 0.
size_t contraction(std::string_view text, size_t at) {
  if (text[at] != '\'' || at + 1 >= text.size()) return 0;
  const char a = text[at + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (at + 2 >= text.size()) return 0;
  const char b = text[at + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// The end of the run of characters of `kind` from `at` (a run of Other also stops at L/N/space).
size_t run_end(std::string_view text, size_t at, Kind kind) {
  while (at < text.size()) {
    const Char c = char_at(text, at);
    if (c.kind != kind) break;
    at += c.bytes;
  }
  return at;
}

// \s+(?!\S) | \s+ from `at`: the whole run at the end of the text; else the run less its last
// character when that leaves at least one (the last goes with the next piece); else the one.
size_t space_piece_end(std::string_view text, size_t at) {
  size_t last = at, end = at;
  while (end < text.size()) {
    const Char c = char_at(text, end);
    if (c.kind != Kind::Space) break;
    last = end;
    end += c.bytes;
  }
  if (end == text.size() || last == at) return end;
  return last;
}

}  // namespace

size_t piece_end(std::string_view text, size_t at) {
  if (const size_t n = contraction(text, at)) return at + n;
  size_t word = at;
  if (text[at] == ' ' && at + 1 < text.size()) word = at + 1;  // " ?": the space joins a word
  const Char c = char_at(text, word);
  if (c.kind != Kind::Space) return run_end(text, word, c.kind);
  return space_piece_end(text, at);
}

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t at = 0; at < text.size();) {
    const size_t end = piece_end(text, at);
    pieces.push_back(text.substr(at, end - at));
    at = end;
  }
  return pieces;
}

size_t safe_cut(std::string_view text, size_t at) {
  if (at == 0) return 0;
  // A byte that is not a continuation byte (10xxxxxx) always starts a character, whatever
  // precedes it: start there, with the class of the character before unknown.
  while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
  bool previous_space = true;
  while (at < text.size()) {
    const Char c = char_at(text, at);
    if (c.kind == Kind::Space && !previous_space) return at;
    previous_space = c.kind == Kind::Space;
    at += c.bytes;
  }
  return text.size();
}

}  // namespace trident::data
