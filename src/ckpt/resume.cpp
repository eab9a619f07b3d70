// Choosing the checkpoint to resume from.
#include "ckpt/resume.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "ckpt/checkpointer.hpp"
#include "comm/agreement.hpp"
#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/printable.hpp"
#include "core/log.hpp"

namespace trident::ckpt {
namespace {

// Collective: rank 0's list of paths on every rank.
std::vector<std::string> broadcast_list(const std::vector<std::string>& mine, comm::Communicator& group) {
  std::string list;
  for (const std::string& f : mine) list += f + "\n";
  comm::broadcast_string(group, list, 0);
  std::vector<std::string> files;
  for (size_t at = 0, next; (next = list.find('\n', at)) != std::string::npos; at = next + 1)
    files.push_back(list.substr(at, next - at));
  return files;
}

// Collective: the metadata of `path` read on rank 0 ("" and the problem when it cannot be).
std::string broadcast_metadata(const std::string& path, Metadata& metadata, comm::Communicator& group) {
  std::string text, problem;
  if (group.rank() == 0) problem = regular_file_problem(path);  // a FIFO named like a checkpoint
  if (group.rank() == 0 && problem.empty()) {
    try {
      text = read_metadata(path).to_text();
    } catch (const std::runtime_error& e) {
      problem = e.what();
    }
  }
  comm::broadcast_string(group, problem, 0);
  comm::broadcast_string(group, text, 0);
  if (problem.empty()) metadata = Metadata::from_text(text);
  return problem;
}

}  // namespace

Start choose_checkpoint(const std::string& resume, const std::string& dir, const std::string& run_id, comm::Communicator& group) {
  const bool automatic = resume == "auto";
  DirectoryState state;
  std::vector<std::string> files, notes;
  if (group.rank() == 0) {
    state = scan_directory(dir);
    if (automatic) files = auto_candidates(state, notes);
    else if (resume != "none") files = {resume};
    for (const std::string& note : notes) print0(note);
  }
  files = broadcast_list(files, group);
  if (!automatic && resume != "none") {
    // By type first: a directory is not a corrupt checkpoint, and HDF5 would block on a FIFO.
    const std::string not_file = group.rank() == 0 ? regular_file_problem(resume) : "";
    std::string missing = not_file.empty() ? "" : "checkpoint.resume = " + printable(resume) + ": " + not_file +
                          "; give a checkpoint file, auto (the newest in " + dir + ") or none";
    comm::agree_on_error(group, missing, 0);
  }
  Start start;
  for (const std::string& path : files) {
    Chosen chosen{path, {}};
    std::string problem = broadcast_metadata(path, chosen.metadata, group);
    if (problem.empty()) problem = verify_checkpoint(path, group);
    if (problem.empty()) {
      start.chosen = chosen;
      break;
    }
    if (!automatic) fatal_all("checkpoint.resume = " + path + ": the checkpoint is corrupt: " + problem);
    print0("warning: skipping checkpoint " + path + ": " + problem + "; trying the next older one");
  }
  if (automatic && !start.chosen) print0("no valid checkpoint of the current branch in " + dir + ": starting from step 0");
  if (group.rank() == 0)
    start.lineage = plan_lineage(state, resume, dir, start.chosen ? &start.chosen->metadata : nullptr,
                                 start.chosen ? start.chosen->path : "", run_id);
  return start;
}

}  // namespace trident::ckpt
