// Command-line parsing of the subcommands (Boost.Program_options).
#include "app/cli.hpp"

#include <sstream>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "deck/options.hpp"

namespace trident::cli {
namespace po = boost::program_options;
namespace {

po::options_description flag_options(const std::string& command) {
  po::options_description flags("Options", 110, 55);
  flags.add_options()("help,h", "print this help: usage and every deck key");
  if (command == "train")
    flags.add_options()("check", "validate the deck, the layout against the job and the run "
                                  "directory, print the summary, and stop without writing");
  return flags;
}

std::string usage_line(const std::string& command) {
  return "usage: [mpirun -np N | srun] trident " + command +
         " DECK [options] [--section.key=value ...]";
}

}  // namespace

po::variables_map parse_without_deck(const std::vector<std::string>& args, const po::options_description& options,
                                     const char* positional, const std::string& usage) {
  po::positional_options_description rest;
  rest.add(positional, -1);
  po::variables_map values;
  try {
    po::store(po::command_line_parser(args).options(options).positional(rest).run(), values);
  } catch (const po::error& e) {
    fatal_all(std::string("command line: ") + printable(e.what(), 300) + "\n" + usage);
  }
  return values;
}

CommandLine parse_command_line(const std::string& command, const std::vector<std::string>& args) {
  po::options_description all;
  all.add(flag_options(command)).add(deck::key_options(false));
  all.add_options()("deck", po::value<std::vector<std::string>>(), "the input deck");
  po::positional_options_description positional;
  positional.add("deck", -1);
  po::parsed_options parsed(nullptr);
  try {
    parsed = po::command_line_parser(args).options(all).positional(positional)
                 .allow_unregistered().run();
  } catch (const po::error& e) {
    fatal_all(std::string("command line: ") + printable(e.what(), 300) + "; " + usage_line(command));
  }
  CommandLine line;
  line.command = command;
  std::vector<std::string> decks;
  for (const po::option& option : parsed.options) {
    const std::string& key = option.string_key;
    if (option.unregistered) {
      const std::string shown = option.original_tokens.empty() ? key : option.original_tokens[0];
      fatal_all("command line: unknown option '" + printable(shown) + "'." +
                deck::suggest_key(key) + " (trident " + command + " --help lists every option)");
    }
    if (key == "help") line.help = true;
    else if (key == "check") line.check = true;
    else if (key == "deck") decks.insert(decks.end(), option.value.begin(), option.value.end());
    else line.overrides.emplace_back(key, option.value.empty() ? "" : option.value.front());
  }
  if (line.help) return line;
  if (decks.empty()) fatal_all("command line: no deck given; " + usage_line(command));
  if (decks.size() > 1)
    fatal_all("command line: more than one deck given ('" + printable(decks[0]) + "', '" + printable(decks[1]) +
              "'); give one deck and override keys with --section.key=value");
  line.deck_path = decks.front();
  return line;
}

std::string command_help(const std::string& command) {
  std::ostringstream out;
  out << usage_line(command) << "\n\n";
  out << flag_options(command) << "\n";
  out << deck::key_options_by_section();
  return out.str();
}

}  // namespace trident::cli
