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

// Collective: rank 0's list of paths on every rank.
std::vector<std::string> broadcast_list(const std::vector<std::string>& mine, MPI_Comm comm) {
  std::string list;
  for (const std::string& f : mine) list += f + "\n";
  broadcast_string(list, 0, comm);
  std::vector<std::string> files;
  for (size_t at = 0, next; (next = list.find('\n', at)) != std::string::npos; at = next + 1)
    files.push_back(list.substr(at, next - at));
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

Start choose_checkpoint(const std::string& resume, const std::string& dir, const std::string& run_id, MPI_Comm comm) {
  const bool automatic = resume == "auto";
  DirectoryState state;
  std::vector<std::string> files, notes;
  if (world_rank() == 0) {
    state = scan_directory(dir);
    if (automatic) files = auto_candidates(state, notes);
    else if (resume != "none") files = {resume};
    for (const std::string& note : notes) print0(note);
  }
  files = broadcast_list(files, comm);
  if (!automatic && resume != "none") {
    // By type first: a directory is not a corrupt checkpoint, and HDF5 would block on a FIFO.
    const std::string not_file = world_rank() == 0 ? regular_file_problem(resume) : "";
    std::string missing = not_file.empty() ? "" : "checkpoint.resume = " + printable(resume) + ": " + not_file +
                          "; give a checkpoint file, auto (the newest in " + dir + ") or none";
    agree_on_error(missing, 0, comm);
  }
  Start start;
  for (const std::string& path : files) {
    Chosen chosen{path, {}};
    std::string problem = broadcast_metadata(path, chosen.metadata, comm);
    if (problem.empty()) problem = verify_checkpoint(path, comm);
    if (problem.empty()) {
      start.chosen = chosen;
      break;
    }
    if (!automatic) fatal_all("checkpoint.resume = " + path + ": the checkpoint is corrupt: " + problem);
    print0("warning: skipping checkpoint " + path + ": " + problem + "; trying the next older one");
  }
  if (automatic && !start.chosen) print0("no valid checkpoint of the current branch in " + dir + ": starting from step 0");
  if (world_rank() == 0)
    start.lineage = plan_lineage(state, resume, dir, start.chosen ? &start.chosen->metadata : nullptr,
                                 start.chosen ? start.chosen->path : "", run_id);
  return start;
}

}  // namespace trident::ckpt
