// GPT-2's two vocabulary files, as OpenAI's encoder.py reads them:
//   encoder.json  one JSON object, token -> id, the token written in GPT-2's printable symbols
//                 (every byte b a character: the printable ones themselves, the others
//                 U+0100 + k in byte order, e.g. ' ' -> 'Ġ'); non-ASCII escaped as \uXXXX
//   vocab.bpe     "#version: 0.2", then one merge per line in rank order, "left right" in the
//                 same symbols
// The published GPT-2 vocabulary (50,257 tokens, 50,000 merges) reads as it is.
#pragma once

#include <string>
#include <string_view>

#include "data/bpe.hpp"

namespace trident::data {

// The bytes in GPT-2's printable symbols (UTF-8), and back (throws std::invalid_argument on a
// character that is not one of the 256 symbols).
std::string bytes_to_symbols(std::string_view bytes);
std::string symbols_to_bytes(std::string_view symbols);

// DIR/encoder.json and DIR/vocab.bpe (each: temporary name, then rename). Throws
// std::runtime_error naming the file on a write failure.
void write_gpt2_files(const Bpe& bpe, const std::string& dir);
// Reads them; throws std::runtime_error naming the file, the line or position and the problem.
Bpe read_gpt2_files(const std::string& dir);

}  // namespace trident::data
