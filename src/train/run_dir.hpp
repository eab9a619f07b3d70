// The run directory: created by rank 0 only after every check has passed, so that a rejected
// deck leaves nothing behind; holds deck.resolved.ini, metrics.h5 and checkpoints.
#pragma once

#include <string>

#include "deck/deck.hpp"

namespace trident {

// Collective. Creates train.run_dir (and parents) and writes deck.resolved.ini atomically
// (temporary file, then rename). A directory that cannot be created or written is a UserError
// on every rank. Returns the directory.
std::string prepare_run_dir(const deck::Deck& deck, const std::string& header_comment);

// Collective, writes nothing: UserError unless train.run_dir exists as a writable directory or
// could be created (its nearest existing ancestor is a writable directory), the files a run
// writes there are regular files where they exist, and checkpoint.dir (when given) could be
// created too.
void check_run_dir_creatable(const deck::Deck& deck);

}  // namespace trident
