// Checkpoint lineage (docs/CHECKPOINTS.md, "Lineage"): which checkpoints of a directory belong
// to the run going on, so that pruning and resume = auto follow it and never another run's
// files, whatever their names.
//
// Every process start of `trident train` is a run with an id. A branch is a line of checkpoints,
// each naming its parent; a run either continues the current branch (resume = auto, or a resume
// of the branch's newest checkpoint) or starts a new one (resume = none, a roll-back to an
// older checkpoint, a checkpoint from elsewhere). The top level of the checkpoint directory
// holds the current branch only: starting a new branch first moves every checkpoint file there
// into branches/<old branch>/, so a new file never replaces an abandoned one of the same name.
// current_branch.ini (written atomically) names the current branch and its newest checkpoint.
//
// Everything here is rank 0's: the choice is broadcast by the caller (ckpt/resume.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint_file.hpp"

namespace trident::ckpt {

constexpr const char* kBranchPointerName = "current_branch.ini";
constexpr const char* kBranchesDir = "branches";  // abandoned branches, one folder each

// A new run id: UTC start time and 48 random bits, "20261129T120000Z-3fa9c1d2e4b5"; safe as a
// file name.
std::string make_run_id();

// current_branch.ini: the branch the directory's top level holds and its newest checkpoint.
struct BranchPointer {
  std::string branch;
  std::string tip;     // path of the newest checkpoint (relative to the directory when inside)
  std::string tip_id;  // its Metadata::id(); empty: none yet (a branch started from step 0)
  int64_t tip_step = 0;
  std::string run_id;  // the run that wrote the pointer
  std::string updated_at;
  std::string to_text() const;
  static std::optional<BranchPointer> from_text(const std::string& text);
};

// A checkpoint file at the top level of the directory and what its metadata says.
struct Entry {
  std::string path;
  int64_t step = 0;  // from the metadata, or from the name when that is unreadable
  std::string kind;
  std::string problem;  // non-empty: the metadata could not be read (the file is damaged)
  Metadata metadata;
};

struct DirectoryState {
  std::string dir;
  std::optional<BranchPointer> pointer;
  std::string pointer_problem;  // a pointer file that exists but does not parse
  std::vector<Entry> entries;   // newest first: by step, a full one before a fast one
};

// Reads the pointer and every top-level checkpoint's metadata.
DirectoryState scan_directory(const std::string& dir);

// How this run extends the lineage.
struct Lineage {
  std::string run_id, branch;
  std::string parent, parent_path;  // the checkpoint it resumed from (id, path); "" from step 0
  int64_t parent_step = 0;
  bool new_branch = true;
  std::string set_aside;  // non-empty: the top-level files move into branches/<set_aside>/ first
  std::vector<std::string> branch_files;  // top-level files of the branch, for pruning
  std::vector<std::string> notes;         // said on the console (rank 0)
};

// resume = auto: the files to try, newest first — those of the current branch, its tip, and
// damaged files (to report them). Notes say what is left out and why.
std::vector<std::string> auto_candidates(const DirectoryState& state, std::vector<std::string>& notes);

// The lineage of a run given what it resumes from (`chosen`, null: step 0). `resume` is the
// checkpoint.resume value: none, auto or a path.
Lineage plan_lineage(const DirectoryState& state, const std::string& resume, const std::string& dir,
                     const Metadata* chosen, const std::string& chosen_path, const std::string& run_id);

// Rank 0, holding the run directory's lock: moves the abandoned branch aside and writes the
// pointer. Returns "" or what failed; updates lineage.parent_path and fills lineage.notes.
std::string apply_lineage(const std::string& dir, Lineage& lineage);

// Rank 0: the pointer after `written` (a file of `dir`) joined the branch. "" or what failed.
std::string advance_pointer(const std::string& dir, const Lineage& lineage, const Metadata& written,
                            const std::string& path);

}  // namespace trident::ckpt
