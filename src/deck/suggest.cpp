// "Did you mean ...?" suggestions for unknown keys and sections (edit distance).
#include <algorithm>
#include <vector>

#include "deck/deck.hpp"

namespace trident::deck {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

// The closest candidate within a distance that still reads as a typo of `word`.
std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    const size_t d = edit_distance(word, candidate);
    if (d < best_distance) best = candidate, best_distance = d;
  }
  return best;
}

}  // namespace

std::string suggest_key(const std::string& unknown) {
  std::vector<std::string> full, names;
  for (const KeySpec& spec : schema()) full.push_back(spec.key), names.push_back(spec.name());
  if (unknown.find('.') == std::string::npos) {
    // A bare name: outside any section, or a section's key typed without its section.
    for (const KeySpec& spec : schema())
      if (spec.name() == unknown)
        return " Did you mean '" + spec.key + "' (key '" + unknown + "' under [" + spec.section() +
               "])?";
    const std::string near = closest(unknown, names);
    for (const KeySpec& spec : schema())
      if (!near.empty() && spec.name() == near) return " Did you mean '" + spec.key + "'?";
    return "";
  }
  const std::string near = closest(unknown, full);
  return near.empty() ? "" : " Did you mean '" + near + "'?";
}

std::string suggest_section(const std::string& unknown) {
  const std::string near = closest(unknown, sections());
  return near.empty() ? "" : " Did you mean [" + near + "]?";
}

}  // namespace trident::deck
