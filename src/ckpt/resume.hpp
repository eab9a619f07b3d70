// Which checkpoint a run resumes from (checkpoint.resume = auto | none | PATH).
//
// auto: the newest checkpoint of the directory's current branch that verifies — a full one, or
// a newer fast one (whose optimizer moments the caller re-initialises, with a warning); never
// another branch's (ckpt/lineage.hpp). A corrupt or unfinished newest file is reported and the
// next older one tried. PATH: that file, which must verify. Either way the run's Lineage says
// whether it continues the current branch or starts a new one.
#pragma once

#include <optional>
#include <string>

#include "ckpt/checkpoint_file.hpp"
#include "ckpt/lineage.hpp"
#include "comm/communicator.hpp"

namespace trident::ckpt {

struct Chosen {
  std::string path;
  Metadata metadata;
};

struct Start {
  std::optional<Chosen> chosen;  // empty: the run starts at step 0
  Lineage lineage;               // rank 0's plan (empty on the other ranks)
};

// Collective over `group` (every rank of the job, a plain MPI communicator: comm/world.hpp). Rank 0
// lists the directory and reads the metadata (broadcast to all); all ranks verify together. Prints
// what it skips and why. With an explicit PATH that is missing or corrupt: UserError on every rank.
// `run_id`: this run's.
Start choose_checkpoint(const std::string& resume, const std::string& dir, const std::string& run_id, comm::Communicator& group);

}  // namespace trident::ckpt
