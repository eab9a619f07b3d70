// The character classes of GPT-2's pre-tokenising pattern over UTF-8 text: \p{L} (letters),
// \p{N} (numbers) and \s (Unicode White_Space, as Python's `regex` module has it), and the
// UTF-8 decoding step that feeds them. Bytes that are not valid UTF-8 decode as one-byte
// characters of no class, so any byte string pre-tokenises (and round-trips) byte-exactly.
#pragma once

#include <cstddef>

namespace trident::data {

bool is_letter(char32_t cp);  // general category L*
bool is_number(char32_t cp);  // general category N*
bool is_space(char32_t cp);   // White_Space

// A character of UTF-8 text: its code point and its length in bytes (1 to 4). An invalid or
// truncated sequence, an overlong form or a surrogate gives one byte with kInvalidCodePoint.
struct Utf8Char {
  char32_t cp;
  int bytes;
};
constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;
Utf8Char decode_utf8(const unsigned char* at, size_t left);

}  // namespace trident::data
