// Choosing the checkpoint to resume from.
#include "ckpt/resume.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "ckpt/checkpointer.hpp"
#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/printable.hpp"
#include "core/log.hpp"
#include "core/mpi_util.hpp"

namespace trident::ckpt {
namespace {

// Rank 0: the checkpoint files of the directory, newest first (a full one before a fast one of
// the same step).
std::vector<std::string> candidates(const std::string& dir) {
  std::vector<std::string> files = checkpoint_files(dir, "");
  std::reverse(files.begin(), files.end());
  return files;
}

// Collective: the metadata of `path` read on rank 0 ("" and the problem when it cannot be).
std::string broadcast_metadata(const std::string& path, Metadata& metadata, MPI_Comm comm) {
  std::string text, problem;
  if (world_rank() == 0) problem = regular_file_problem(path);  // a FIFO named like a checkpoint
  if (world_rank() == 0 && problem.empty()) {
    try {
      text = read_metadata(path).to_text();
    } catch (const std::runtime_error& e) {
      problem = e.what();
    }
  }
  broadcast_string(problem, 0, comm);
  broadcast_string(text, 0, comm);
  if (problem.empty()) metadata = Metadata::from_text(text);
  return problem;
}

}  // namespace

std::optional<Chosen> choose_checkpoint(const std::string& resume, const std::string& dir, MPI_Comm comm) {
  if (resume == "none") return std::nullopt;
  const bool automatic = resume == "auto";
  std::vector<std::string> files;
  if (world_rank() == 0) files = automatic ? candidates(dir) : std::vector<std::string>{resume};
  std::string list;
  for (const std::string& f : files) list += f + "\n";
  broadcast_string(list, 0, comm);
  files.clear();
  for (size_t at = 0, next; (next = list.find('\n', at)) != std::string::npos; at = next + 1)
    files.push_back(list.substr(at, next - at));
  if (!automatic) {
    // By type first: a directory is not a corrupt checkpoint, and HDF5 would block on a FIFO.
    const std::string not_file = world_rank() == 0 ? regular_file_problem(resume) : "";
    std::string missing = not_file.empty() ? "" : "checkpoint.resume = " + printable(resume) + ": " + not_file +
                          "; give a checkpoint file, auto (the newest in " + dir + ") or none";
    agree_on_error(missing, 0, comm);
  }
  for (const std::string& path : files) {
    Chosen chosen{path, {}};
    std::string problem = broadcast_metadata(path, chosen.metadata, comm);
    if (problem.empty()) problem = verify_checkpoint(path, comm);
    if (problem.empty()) return chosen;
    if (!automatic) fatal_all("checkpoint.resume = " + path + ": the checkpoint is corrupt: " + problem);
    print0("warning: skipping checkpoint " + path + ": " + problem + "; trying the next older one");
  }
  if (automatic) print0("no valid checkpoint in " + dir + ": starting from step 0");
  return std::nullopt;
}

}  // namespace trident::ckpt
