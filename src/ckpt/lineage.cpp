// Checkpoint lineage: run ids, the branch pointer, the directory scan and the plan of a run.
#include "ckpt/lineage.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <random>
#include <regex>
#include <stdexcept>

#include "ckpt/checkpointer.hpp"
#include "core/clock.hpp"
#include "core/file_util.hpp"

namespace trident::ckpt {
namespace fs = std::filesystem;
namespace {

// The step and kind a checkpoint's file name claims (step-00000120.full.h5).
bool parse_name(const std::string& path, int64_t& step, std::string& kind) {
  static const std::regex pattern(R"(step-(\d+)\.(fast|full)\.h5)");
  const std::string name = fs::path(path).filename().string();
  std::smatch match;
  if (!std::regex_match(name, match, pattern)) return false;
  step = std::stoll(match[1].str());
  kind = match[2].str();
  return true;
}

// Newest first: a higher step, then a full checkpoint before a fast one of the same step.
bool newer(int64_t step_a, const std::string& kind_a, int64_t step_b, const std::string& kind_b) {
  if (step_a != step_b) return step_a > step_b;
  return kind_a == "full" && kind_b != "full";
}

// `path` relative to `dir` when it lies inside it, else absolute: what the pointer stores.
std::string relative_to(const std::string& path, const std::string& dir) {
  const fs::path absolute = fs::absolute(path).lexically_normal();
  const fs::path relative = absolute.lexically_relative(fs::absolute(dir).lexically_normal());
  return !relative.empty() && *relative.begin() != ".." ? relative.string() : absolute.string();
}

std::string resolve(const std::string& stored, const std::string& dir) {
  return fs::path(stored).is_absolute() ? stored : (fs::path(dir) / stored).string();
}

std::string write_pointer(const std::string& dir, const BranchPointer& pointer) {
  const std::string text = pointer.to_text();
  return write_atomically((fs::path(dir) / kBranchPointerName).string(), {{text.data(), text.size()}});
}

// The top-level files of `branch` (an empty branch: files without lineage), oldest first.
std::vector<std::string> files_of(const DirectoryState& state, const std::string& branch) {
  std::vector<std::string> files;
  for (const Entry& e : state.entries)
    if (e.problem.empty() && e.metadata.branch == branch) files.insert(files.begin(), e.path);
  return files;
}

// The id of the newest checkpoint of the current branch whose metadata reads (its tip when
// that is newer: a parent outside the top level), "" if none.
std::string newest_of_branch(const DirectoryState& state) {
  if (!state.pointer) return "";
  for (const Entry& e : state.entries)
    if (e.problem.empty() && e.metadata.branch == state.pointer->branch)
      return state.pointer->tip_step > e.step ? state.pointer->tip_id : e.metadata.id();
  return state.pointer->tip_id;
}

// Moves every top-level checkpoint file into branches/<name>/ (a fresh folder: ".<run id>" is
// added when the name is taken). Follows the parent if it is one of them.
std::string set_aside(const std::string& dir, Lineage& lineage) {
  fs::path target = fs::path(dir) / kBranchesDir / lineage.set_aside;
  std::error_code ec;
  if (fs::exists(target, ec)) target += "." + lineage.run_id;
  fs::create_directories(target, ec);
  if (ec) return "cannot create '" + target.string() + "': " + ec.message();
  const std::vector<std::string> files = checkpoint_files(dir, "");
  for (const std::string& file : files) {
    const fs::path moved = target / fs::path(file).filename();
    const bool is_parent = !lineage.parent_path.empty() && fs::equivalent(file, lineage.parent_path, ec);
    fs::rename(file, moved, ec);
    if (ec) return "cannot move '" + file + "' to '" + moved.string() + "': " + ec.message();
    if (is_parent) lineage.parent_path = moved.string();
  }
  std::string problem = sync_to_disk(target.string());
  if (problem.empty()) problem = sync_to_disk(dir);
  lineage.notes.push_back("lineage: the " + std::to_string(files.size()) + " checkpoint(s) of branch " +
                          lineage.set_aside + " were moved to " + target.string() +
                          "/ (kept, never pruned; resume one with --checkpoint.resume=PATH)");
  return problem;
}

}  // namespace

std::string make_run_id() {
  const std::time_t now = std::time(nullptr);
  const std::string stamp = utc_time(now, "%Y%m%dT%H%M%SZ");
  std::random_device device;
  std::seed_seq seed{device(), device(), static_cast<unsigned>(::getpid()), static_cast<unsigned>(now)};
  std::mt19937_64 generator(seed);
  char id[64];
  std::snprintf(id, sizeof id, "%s-%012llx", stamp.c_str(), static_cast<unsigned long long>(generator() & 0xffffffffffffULL));
  return id;
}

std::string BranchPointer::to_text() const {
  return "# The current branch of this checkpoint directory (docs/CHECKPOINTS.md, Lineage). Written by trident.\n"
         "branch = " + branch + "\ntip = " + tip + "\ntip_id = " + tip_id + "\ntip_step = " + std::to_string(tip_step) +
         "\nrun_id = " + run_id + "\nupdated_at = " + updated_at + "\n";
}

std::optional<BranchPointer> BranchPointer::from_text(const std::string& text) {
  std::map<std::string, std::string> values = parse_key_values(text);
  BranchPointer pointer;
  pointer.branch = values["branch"];
  pointer.tip = values["tip"];
  pointer.tip_id = values["tip_id"];
  pointer.tip_step = std::atoll(values["tip_step"].c_str());
  pointer.run_id = values["run_id"];
  pointer.updated_at = values["updated_at"];
  if (pointer.branch.empty()) return std::nullopt;
  return pointer;
}

DirectoryState scan_directory(const std::string& dir) {
  DirectoryState state;
  state.dir = dir;
  std::string text, why;
  const std::string pointer_path = (fs::path(dir) / kBranchPointerName).string();
  std::error_code ec;
  if (fs::exists(pointer_path, ec)) {
    if (read_file(pointer_path, kMaxConfigBytes, text, why)) state.pointer = BranchPointer::from_text(text);
    if (!state.pointer) state.pointer_problem = "'" + pointer_path + "' is unreadable" + (why.empty() ? "" : ": " + why);
  }
  for (const std::string& path : checkpoint_files(dir, "")) {
    Entry entry;
    entry.path = path;
    parse_name(path, entry.step, entry.kind);
    try {
      entry.metadata = read_metadata(path);
      entry.step = entry.metadata.step;
      entry.kind = entry.metadata.kind;
    } catch (const std::runtime_error& e) {
      entry.problem = e.what();
    }
    state.entries.push_back(entry);
  }
  std::stable_sort(state.entries.begin(), state.entries.end(),
                   [](const Entry& a, const Entry& b) { return newer(a.step, a.kind, b.step, b.kind); });
  return state;
}

std::vector<std::string> auto_candidates(const DirectoryState& state, std::vector<std::string>& notes) {
  std::vector<std::string> files;
  if (!state.pointer) {
    if (!state.pointer_problem.empty()) notes.push_back("warning: " + state.pointer_problem);
    if (!state.entries.empty())
      notes.push_back("warning: no record of the current branch (" + std::string(kBranchPointerName) +
                      "): resume = auto takes the newest valid checkpoint, whichever run wrote it");
    for (const Entry& e : state.entries) files.push_back(e.path);
    return files;
  }
  const BranchPointer& pointer = *state.pointer;
  const std::string tip = pointer.tip.empty() ? "" : resolve(pointer.tip, state.dir);
  int others = 0;
  bool tip_listed = pointer.tip.empty();
  for (const Entry& e : state.entries) {
    if (!e.problem.empty() || e.metadata.branch == pointer.branch) {
      if (!tip_listed && pointer.tip_step > e.step) {  // the tip (a parent elsewhere) in step order
        files.push_back(tip);
        tip_listed = true;
      }
      // The tip by its id, or by its file when its metadata is unreadable (listed once either way).
      std::error_code ec;
      tip_listed = tip_listed || (e.problem.empty() && e.metadata.id() == pointer.tip_id) ||
                   (!tip.empty() && fs::equivalent(e.path, tip, ec));
      files.push_back(e.path);
    } else {
      ++others;
    }
  }
  if (!tip_listed) files.push_back(tip);
  if (others > 0)
    notes.push_back("note: " + std::to_string(others) + " checkpoint(s) of other branches than the current one (" +
                    pointer.branch + ") are not resumed");
  return files;
}

Lineage plan_lineage(const DirectoryState& state, const std::string& resume, const std::string& dir,
                     const Metadata* chosen, const std::string& chosen_path, const std::string& run_id) {
  Lineage lineage;
  lineage.run_id = run_id;
  if (chosen) {
    lineage.parent = chosen->run_id.empty() ? "unrecorded:" + fs::path(chosen_path).filename().string() : chosen->id();
    lineage.parent_path = chosen_path;
    lineage.parent_step = chosen->step;
  }
  const std::optional<BranchPointer>& pointer = state.pointer;
  const bool automatic = resume == "auto";
  std::string continued;  // the branch continued; "" starts a new one
  if (automatic && pointer) continued = pointer->branch;  // its candidates are the branch and its tip
  if (automatic && !pointer && chosen && !chosen->branch.empty()) continued = chosen->branch;
  if (!automatic && resume != "none" && pointer && chosen && chosen->id() == newest_of_branch(state))
    continued = pointer->branch;
  lineage.new_branch = continued.empty();
  lineage.branch = continued.empty() ? run_id : continued;
  if (!continued.empty()) {
    lineage.branch_files = files_of(state, continued);
  } else if (automatic && chosen) {  // a checkpoint without lineage (an earlier trident): its files are this line
    lineage.branch_files = files_of(state, "");
  } else if (!state.entries.empty()) {
    lineage.set_aside = pointer ? pointer->branch : "earlier";
  }
  return lineage;
}

std::string apply_lineage(const std::string& dir, Lineage& lineage) {
  if (!lineage.set_aside.empty()) {
    const std::string problem = set_aside(dir, lineage);
    if (!problem.empty()) return problem;
  }
  BranchPointer pointer;
  pointer.branch = lineage.branch;
  pointer.tip = lineage.parent_path.empty() ? "" : relative_to(lineage.parent_path, dir);
  pointer.tip_id = lineage.parent;
  pointer.tip_step = lineage.parent_step;
  pointer.run_id = lineage.run_id;
  pointer.updated_at = utc_timestamp();
  const std::string from = lineage.parent.empty() ? "step 0" : lineage.parent_path + " (" + lineage.parent + ")";
  lineage.notes.push_back(lineage.new_branch ? "lineage: run " + lineage.run_id + " starts branch " + lineage.branch +
                                                   " from " + from
                                             : "lineage: run " + lineage.run_id + " continues branch " +
                                                   lineage.branch + " from " + from);
  return write_pointer(dir, pointer);
}

std::string advance_pointer(const std::string& dir, const Lineage& lineage, const Metadata& written,
                            const std::string& path) {
  BranchPointer pointer;
  pointer.branch = lineage.branch;
  pointer.tip = relative_to(path, dir);
  pointer.tip_id = written.id();
  pointer.tip_step = written.step;
  pointer.run_id = lineage.run_id;
  pointer.updated_at = utc_timestamp();
  return write_pointer(dir, pointer);
}

}  // namespace trident::ckpt
