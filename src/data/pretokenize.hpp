// GPT-2's pre-tokenising split, written out by hand: the pieces that OpenAI's encoder cuts with
// the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (contractions; a run of letters, of numbers or of other characters, each with an optional
// leading space; a whitespace run that leaves its last character to the word that follows).
// BPE merges never cross a piece boundary. Works on any bytes (data/unicode_classes.hpp).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace trident::data {

// The end (exclusive) of the piece that starts at `at` < text.size().
size_t piece_end(std::string_view text, size_t at);

// Every piece of text, in order.
std::vector<std::string_view> pretokenize(std::string_view text);

// The first index >= at (and <= text.size()) where a piece is sure to begin whatever precedes
// it: a whitespace character after a non-whitespace one (no piece holds a non-space followed
// by a space), or text.size(). Where parallel encoding may cut the text.
size_t safe_cut(std::string_view text, size_t at);

}  // namespace trident::data
