// JSON through one maintained library, nlohmann-json (Debian's nlohmann-json3-dev, header
// only): what the program reads (encoder.json) and writes (encoder.json, plan --json) goes
// through it, and its errors become ours — the file, the byte, what was expected.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trident {

using Json = nlohmann::ordered_json;  // objects keep the order they were written in
// Objects as sorted maps: what large files are read into (a vocabulary of 128,000 names). The
// ordered kind finds a key by a linear search, so parsing an object of n keys takes n² steps:
// 12 s for Llama 3's vocabulary, 0.2 s this way.
using JsonLookup = nlohmann::json;

// `text`, the contents of `path`, parsed; a syntax error throws std::runtime_error
// "PATH: <the library's reason> at byte N; <expected>" (expected: what the file should be).
Json parse_json(const std::string& path, const std::string& text, const std::string& expected);
JsonLookup parse_json_lookup(const std::string& path, const std::string& text, const std::string& expected);

// A JSON string literal of UTF-8 text as Python's json.dumps writes it (ensure_ascii): every
// character beyond ASCII as \uXXXX (a surrogate pair above U+FFFF), quotes included.
std::string json_ascii_string(std::string_view utf8);

}  // namespace trident
