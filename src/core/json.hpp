// JSON through one maintained library, nlohmann-json (Debian's nlohmann-json3-dev, header
// only): what the program reads (encoder.json) and writes (encoder.json, plan --json) goes
// through it, and its errors become ours — the file, the byte, what was expected.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trident {

using Json = nlohmann::ordered_json;  // objects keep the order they were written in

// `text`, the contents of `path`, parsed; a syntax error throws std::runtime_error
// "PATH: <the library's reason> at byte N; <expected>" (expected: what the file should be).
Json parse_json(const std::string& path, const std::string& text, const std::string& expected);

// A JSON string literal of UTF-8 text as Python's json.dumps writes it (ensure_ascii): every
// character beyond ASCII as \uXXXX (a surrogate pair above U+FFFF), quotes included.
std::string json_ascii_string(std::string_view utf8);

}  // namespace trident
