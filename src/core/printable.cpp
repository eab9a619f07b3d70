// Escaping and bounding user text for error messages.
#include "core/printable.hpp"

#include <cstdio>

namespace trident {
namespace {

constexpr size_t kMessageBytes = 4096;

// Length of the valid UTF-8 sequence at `at` (1 to 4), its code point in `code`; 0 if invalid.
// Overlong forms and surrogates are invalid, as the standard says.
size_t utf8_sequence(const std::string& text, size_t at, unsigned& code) {
  const unsigned char lead = static_cast<unsigned char>(text[at]);
  size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || at + length > text.size()) return 0;
  code = length == 1 ? lead : lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    const unsigned char next = static_cast<unsigned char>(text[at + k]);
    if ((next & 0xC0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3F);
  }
  const unsigned smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < smallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

// Characters that print nothing or rearrange the line: C1 controls, zero-width spaces and
// joiners, direction marks and overrides, word joiners, the byte-order mark.
bool invisible(unsigned code) {
  return (code >= 0x80 && code <= 0x9F) || (code >= 0x200B && code <= 0x200F) ||
         (code >= 0x2028 && code <= 0x202E) || (code >= 0x2060 && code <= 0x2069) || code == 0xFEFF;
}

std::string escaped(const std::string& text, size_t max_bytes, bool keep_newlines) {
  std::string out;
  size_t at = 0;
  while (at < text.size() && out.size() < max_bytes) {
    const unsigned char byte = static_cast<unsigned char>(text[at]);
    unsigned code = 0;
    const size_t length = utf8_sequence(text, at, code);
    char escape[16];
    if (byte == '\n' && keep_newlines) out += '\n';
    else if (byte == '\t') out += "\\t";
    else if (byte == '\n') out += "\\n";
    else if (byte == '\r') out += "\\r";
    else if (length == 0 || byte < 0x20 || byte == 0x7F) {
      std::snprintf(escape, sizeof escape, "\\x%02x", byte);
      out += escape;
    } else if (invisible(code)) {
      std::snprintf(escape, sizeof escape, "\\u%04x", code);
      out += escape;
    } else {
      out.append(text, at, length);
    }
    at += length == 0 ? 1 : length;
  }
  if (at < text.size()) out += "\xE2\x80\xA6 (" + std::to_string(text.size()) + " bytes)";  // "…"
  return out;
}

}  // namespace

std::string printable(const std::string& text, size_t max_bytes) { return escaped(text, max_bytes, false); }

std::string printable_message(const std::string& message) { return escaped(message, kMessageBytes, true); }

size_t invalid_utf8_at(const std::string& text) {
  unsigned code = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t length = utf8_sequence(text, at, code);
    if (length == 0) return at;
    at += length;
  }
  return std::string::npos;
}

}  // namespace trident
