// The schema as a Boost.Program_options description: used to parse deck files and command-line
// overrides, and to print `trident train --help`.
#pragma once

#include <boost/program_options.hpp>

namespace trident::deck {

// One option "section.name" per key, each taking a string (types are checked by value.cpp,
// so that a wrong type gets our message, with the file and line, rather than Boost's).
// With `with_defaults`, defaults are shown in --help as "(=value)".
boost::program_options::options_description key_options(bool with_defaults);

// The same, one options_description per section with caption "[section]", for --help.
boost::program_options::options_description key_options_by_section();

}  // namespace trident::deck
