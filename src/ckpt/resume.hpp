// Which checkpoint a run resumes from (checkpoint.resume = auto | none | PATH).
//
// auto: the newest checkpoint in the directory that verifies — a full one, or a newer fast one
// (whose optimizer moments the caller re-initialises, with a warning). A corrupt or unfinished
// newest file is reported and the next older one tried. PATH: that file, which must verify.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>

#include "ckpt/checkpoint_file.hpp"

namespace trident::ckpt {

struct Chosen {
  std::string path;
  Metadata metadata;
};

// Collective over comm. Rank 0 lists the directory and reads the metadata (broadcast to all);
// all ranks verify together. Prints what it skips and why. Empty when there is nothing to
// resume from. With an explicit PATH that is missing or corrupt: UserError on every rank.
std::optional<Chosen> choose_checkpoint(const std::string& resume, const std::string& dir, MPI_Comm comm);

}  // namespace trident::ckpt
