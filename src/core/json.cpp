// The JSON adapter: parse errors turned into file errors, Python's ASCII escaping.
#include "core/json.hpp"

#include <stdexcept>

namespace trident {

namespace {

template <class J>
J parse(const std::string& path, const std::string& text, const std::string& expected) {
  try {
    return J::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: REASON".
    std::string reason = e.what();
    const size_t colon = reason.find(": ");
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    throw std::runtime_error(path + ": " + reason + " at byte " + std::to_string(e.byte) + "; " + expected);
  }
}

}  // namespace

Json parse_json(const std::string& path, const std::string& text, const std::string& expected) {
  return parse<Json>(path, text, expected);
}

JsonLookup parse_json_lookup(const std::string& path, const std::string& text, const std::string& expected) {
  return parse<JsonLookup>(path, text, expected);
}

std::string json_ascii_string(std::string_view utf8) {
  // ensure_ascii; the replace handler keeps invalid UTF-8 from throwing (U+FFFD in its place).
  return nlohmann::json(std::string(utf8)).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

}  // namespace trident
