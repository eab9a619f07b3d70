// Building the Boost.Program_options descriptions from the schema.
#include "deck/options.hpp"

#include <string>

#include "deck/schema.hpp"

namespace trident::deck {
namespace po = boost::program_options;
namespace {

void add_key(po::options_description& description, const KeySpec& spec, bool with_defaults) {
  auto* value = po::value<std::string>()->value_name(value_name(spec));
  std::string help = spec.help;
  if (spec.type != KeyType::String && spec.type != KeyType::Path)
    help += "; " + describe_allowed(spec);
  if (spec.required()) help += " (required)";
  if (with_defaults && spec.default_value) {
    const std::string shown = spec.default_value->empty() ? "\"\"" : *spec.default_value;
    value->default_value(*spec.default_value, shown);
  }
  description.add_options()(spec.key.c_str(), value, help.c_str());
}

}  // namespace

po::options_description key_options(bool with_defaults) {
  po::options_description description("deck keys", 100, 50);
  for (const KeySpec& spec : schema()) add_key(description, spec, with_defaults);
  return description;
}

po::options_description key_options_by_section() {
  po::options_description all("Deck keys (in the deck under [section] as 'name = value', or on "
                              "the command line as --section.name=value)",
                              120, 70);
  for (const std::string& section : sections()) {
    po::options_description group("[" + section + "]", 120, 70);
    for (const KeySpec& spec : schema())
      if (spec.section() == section) add_key(group, spec, true);
    all.add(group);
  }
  return all;
}

}  // namespace trident::deck
