// UTF-8 decoding (strict: RFC 3629).
#include "data/utf8.hpp"

namespace trident::data {

Utf8Char decode_utf8(const unsigned char* at, size_t left) {
  const Utf8Char invalid{kInvalidCodePoint, 1};
  const unsigned char lead = at[0];
  if (lead < 0x80) return {lead, 1};
  int bytes = 0;
  char32_t cp = 0, minimum = 0;
  if ((lead & 0xE0) == 0xC0) bytes = 2, cp = lead & 0x1F, minimum = 0x80;
  else if ((lead & 0xF0) == 0xE0) bytes = 3, cp = lead & 0x0F, minimum = 0x800;
  else if ((lead & 0xF8) == 0xF0) bytes = 4, cp = lead & 0x07, minimum = 0x10000;
  else return invalid;
  if (left < static_cast<size_t>(bytes)) return invalid;
  for (int i = 1; i < bytes; ++i) {
    if ((at[i] & 0xC0) != 0x80) return invalid;
    cp = (cp << 6) | (at[i] & 0x3F);
  }
  if (cp < minimum || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, bytes};
}

}  // namespace trident::data
