// The command line of a subcommand: `trident <command> DECK [flags] [--section.key=value ...]`.
#pragma once

#include <boost/program_options.hpp>

#include <string>
#include <vector>

#include "deck/deck.hpp"
#include "job/job.hpp"

namespace trident::cli {

struct CommandLine {
  std::string command;                   // "train", "layout", ...
  std::string deck_path;                 // empty only with --help
  std::vector<deck::Override> overrides; // in command-line order
  bool help = false;
  bool check = false;                    // train --check: validate everything, run nothing
};

// Parses the arguments after the command name with Boost.Program_options. An unknown option
// (with a "did you mean"), a missing value, a second deck or no deck is a UserError.
CommandLine parse_command_line(const std::string& command, const std::vector<std::string>& args);

// The subcommands without a deck (prepare, doctor): `args` against `options`, the remaining
// arguments positional under the option `positional`. A parse error is a UserError that ends
// with the command's usage.
boost::program_options::variables_map parse_without_deck(const std::vector<std::string>& args,
                                                         const boost::program_options::options_description& options,
                                                         const char* positional, const std::string& usage);

// `trident <command> --help`: usage, flags, and every deck key with its default and meaning.
std::string command_help(const std::string& command);

}  // namespace trident::cli

namespace trident {

// load_job (job/job.hpp) on the deck and overrides of a parsed command line.
inline Job load_job(comm::Communicator& world, const cli::CommandLine& line) {
  return load_job(world, line.deck_path, line.overrides);
}

}  // namespace trident
