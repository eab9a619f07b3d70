// Markdown reference of the deck keys.
#include "deck/doc.hpp"

#include "deck/schema.hpp"

namespace trident::deck {
namespace {

std::string escape_pipes(const std::string& text) {
  std::string out;
  for (char ch : text) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

std::string row(const KeySpec& spec) {
  const std::string def = spec.required() ? "*required*"
                          : spec.default_value->empty() ? "*(empty)*"
                                                        : "`" + *spec.default_value + "`";
  return "| `" + spec.name() + "` | " + escape_pipes(value_name(spec)) + " | " + def + " | " +
         escape_pipes(describe_allowed(spec)) + " | " + escape_pipes(spec.help) + " |\n";
}

}  // namespace

std::string markdown_reference() {
  std::string out;
  for (const std::string& section : sections()) {
    out += "\n### [" + section + "]\n\n";
    out += "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
    for (const KeySpec& spec : schema())
      if (spec.section() == section) out += row(spec);
  }
  return out;
}

}  // namespace trident::deck
