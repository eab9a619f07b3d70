// UTF-8 decoding, strict (RFC 3629): what reading GPT-2's byte symbols (data/bpe_files.hpp) needs.
#pragma once

#include <cstddef>

namespace trident::data {

// A character of UTF-8 text: its code point and its length in bytes (1 to 4). An invalid or
// truncated sequence, an overlong form or a surrogate gives one byte with kInvalidCodePoint.
struct Utf8Char {
  char32_t cp;
  int bytes;
};
constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;
Utf8Char decode_utf8(const unsigned char* at, size_t left);

}  // namespace trident::data
