// Checkpoint policy, atomic writes and the asynchronous writer.
#include "ckpt/checkpointer.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/clock.hpp"
#include "core/deadline.hpp"
#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/log.hpp"
#include "ckpt/datasets.hpp"
#include "comm/agreement.hpp"
#include "comm/world.hpp"
#include "kernels/backend.hpp"

namespace trident::ckpt {
namespace fs = std::filesystem;
namespace {

// Collective: rank 0's verdict ("" = fine) on every rank.
std::string from_root(std::string verdict, comm::Communicator& group) {
  comm::broadcast_string(group, verdict, 0);
  return verdict;
}

// Bytes of tensor data a checkpoint of this kind holds.
int64_t data_bytes(const StateView& state, const std::string& kind) {
  int64_t bytes = 0;
  for (const auto& dataset : checkpoint_datasets(state.config, kind)) {
    int64_t n = 1;
    for (int64_t d : dataset.second) n *= d;
    bytes += n * static_cast<int64_t>(sizeof(float));
  }
  return bytes;
}

// Rank 0, before any rank starts a write: "" when the directory's file system has room for
// the file (its data plus 1 MiB for HDF5's metadata and the attributes). Parallel HDF5 does not
// recover from running out of space inside its own collective metadata flush (ranks end up in
// different collectives), so a full disk is caught here; what slips past is ended by the
// write's Deadline.
std::string space_problem(const fs::path& dir, int64_t needed) {
  struct statvfs info {};
  if (::statvfs(dir.c_str(), &info) != 0) return "";  // cannot tell: let the write find out
  const double available = static_cast<double>(info.f_bavail) * static_cast<double>(info.f_frsize);
  if (available >= static_cast<double>(needed)) return "";
  char text[200];
  std::snprintf(text, sizeof text, "not enough space in '%s': the checkpoint needs about %.1f MB, %.1f MB are free",
                dir.c_str(), needed / 1e6, available / 1e6);
  return text;
}

}  // namespace

std::string checkpoint_name(int64_t step, const std::string& kind) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08lld.%s.h5", static_cast<long long>(step), kind.c_str());
  return name;
}

std::vector<std::string> checkpoint_files(const std::string& dir, const std::string& kind) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string& k : {std::string("fast"), std::string("full")}) {
      const std::string suffix = "." + k + ".h5";
      if ((kind.empty() || kind == k) && name.rfind("step-", 0) == 0 && name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());  // zero-padded steps; "full" after "fast"
  return files;
}

Checkpointer::Checkpointer(const Settings& settings, comm::Communicator& world)
    : settings_(settings), comm_(comm::duplicate(world, "checkpoint")), rank_(comm_->rank()) {
  last_any_ = last_full_ = std::chrono::steady_clock::now();
  std::string problem;
  if (rank_ == 0) {
    std::error_code ec;
    fs::create_directories(settings_.dir, ec);
    if (ec) problem = "checkpoint directory '" + settings_.dir + "' cannot be created: " + ec.message();
    for (const auto& entry : fs::directory_iterator(settings_.dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(".step-", 0) == 0 && name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0)
        fs::remove(entry.path(), ec);  // a write a killed run left unfinished
    }
  }
  comm::agree_on_error(*comm_, problem, 0);
}

Checkpointer::~Checkpointer() {
  if (writer_.joinable()) writer_.join();
}

void Checkpointer::begin_lineage(const Lineage& lineage) {
  std::string problem;
  if (rank_ == 0) {
    lineage_ = lineage;
    problem = apply_lineage(settings_.dir, lineage_);
    last_id_ = lineage_.parent;
    for (const std::string& note : lineage_.notes) print0(note);
    if (!problem.empty()) problem = "checkpoint directory '" + settings_.dir + "': " + problem;
  }
  comm::agree_on_error(*comm_, problem, 0);
}

std::string Checkpointer::due(int64_t step) const {
  if (settings_.full.due(step, seconds_since(last_full_))) return "full";
  if (settings_.fast.due(step, seconds_since(last_any_))) return "fast";  // a full one counts too
  return "";
}

namespace {

// n floats of `state` at `from` into the staging buffer `to` (host memory, pinned where the
// state's backend has such), allocated or re-sized first.
void stage_values(Buffer<float>& to, const float* from, size_t n, const StateView& state) {
  kernels::Context ctx = state.copies;
  if (to.size() != n)
    to = Buffer<float>(n, MemoryCategory::Checkpoint, kernels::backend_of(ctx), MemoryKind::pinned_host);
  kernels::download(ctx, to.data(), view(from, n, state.device()));
}

}  // namespace

StateView Checkpointer::stage(const StateView& state) {
  StateView staged = state;
  staged.copies = kernels::Context{};
  const size_t params = static_cast<size_t>(state.params_count());
  const size_t moments = static_cast<size_t>(state.moments_count());
  if (state.params_owner) {
    stage_values(staged_params_, state.params, params, state);
    staged.params = staged_params_.data();
  }
  if (state.m && state.moments_owner) {
    stage_values(staged_m_, state.m, moments, state);
    stage_values(staged_v_, state.v, moments, state);
    staged.m = staged_m_.data();
    staged.v = staged_v_.data();
  }
  return staged;
}

void Checkpointer::save(const std::string& kind, const StateView& state, const Metadata& metadata) {
  const auto start = std::chrono::steady_clock::now();
  wait();  // one write at a time; the staging buffers are free again
  last_full_ = kind == "full" ? start : last_full_;
  last_any_ = start;
  Metadata stamped = metadata;
  stamped.run_id = lineage_.run_id;
  stamped.branch = lineage_.branch;
  stamped.parent = last_id_;  // the previous write is finished (wait() above)
  std::string text = stamped.to_text();  // rank 0's: attributes must be equal on every rank
  comm::broadcast_string(*comm_, text, 0);
  StateView written = state;
  if (kind == "fast") written.m = written.v = nullptr;  // parameters only: nothing else to copy
  Pending pending{settings_.async ? stage(written) : written, Metadata::from_text(text), 0.0};
  pending.metadata.kind = kind;
  pending.blocking_seconds = seconds_since(start);
  if (!settings_.async) {
    WriteRecord record = write_atomically(pending);
    record.blocking_seconds = seconds_since(start);
    std::lock_guard<std::mutex> lock(records_mutex_);
    records_.push_back(record);
    return;
  }
  writer_ = std::thread([this, pending] {
    WriteRecord record = write_atomically(pending);
    std::lock_guard<std::mutex> lock(records_mutex_);
    records_.push_back(record);
  });
}

void Checkpointer::wait() {
  if (writer_.joinable()) writer_.join();
}

std::vector<WriteRecord> Checkpointer::take_records() {
  std::lock_guard<std::mutex> lock(records_mutex_);
  std::vector<WriteRecord> taken;
  taken.swap(records_);
  return taken;
}

WriteRecord Checkpointer::write_atomically(const Pending& pending) {
  WriteRecord record;
  record.step = pending.metadata.step;
  record.kind = pending.metadata.kind;
  record.blocking_seconds = pending.blocking_seconds;
  const fs::path dir = settings_.dir;
  const std::string name = checkpoint_name(record.step, record.kind);
  const std::string temporary = (dir / ("." + name + ".tmp")).string();
  record.path = (dir / name).string();
  std::string room = rank_ == 0 && settings_.check_space
                         ? space_problem(dir, data_bytes(pending.state, record.kind) + (int64_t(1) << 20))
                         : "";
  record.error = from_root(room, *comm_);
  if (!record.error.empty()) {
    print0("warning: checkpoint of step " + std::to_string(record.step) + " not written: " + record.error +
           "; the earlier checkpoints are intact");
    return record;
  }
  Deadline deadline(settings_.timeout_s, "writing checkpoint " + temporary + " (checkpoint.timeout_s)");
  const WriteResult written = write_checkpoint(temporary, *comm_, pending.state, pending.metadata);
  record.bytes = written.bytes;
  record.write_seconds = written.seconds;
  record.error = written.error;
  if (record.error.empty()) {
    const auto verify_start = std::chrono::steady_clock::now();
    const std::string problem = verify_checkpoint(temporary, *comm_);
    record.verify_seconds = seconds_since(verify_start);
    if (!problem.empty()) record.error = "verification of '" + temporary + "' failed: " + problem;
  }
  std::string verdict = record.error;
  if (rank_ == 0) {
    std::error_code ec;
    if (verdict.empty()) {
      fs::rename(temporary, record.path, ec);  // the commit: the name appears complete or not at all
      verdict = ec ? "renaming '" + temporary + "' failed: " + ec.message() : sync_to_disk(dir.string());
    }
    if (!verdict.empty()) fs::remove(temporary, ec);  // the earlier checkpoints stay as they were
    if (verdict.empty()) joined_branch(record.path, pending.metadata);
  }
  record.error = from_root(verdict, *comm_);
  if (record.error.empty()) {
    char line[256];
    std::snprintf(line, sizeof line, "checkpoint: wrote %s (%.1f MB in %.2f s, %.2f GB/s; verified in %.2f s)",
                  record.path.c_str(), record.bytes / 1e6, record.write_seconds,
                  record.bytes / 1e9 / std::max(record.write_seconds, 1e-9), record.verify_seconds);
    print0(line);
  } else {
    print0("warning: checkpoint of step " + std::to_string(record.step) + " not written: " + record.error +
           "; the earlier checkpoints are intact");
  }
  return record;
}

void Checkpointer::joined_branch(const std::string& path, const Metadata& metadata) {
  last_id_ = metadata.id();
  const std::string problem = advance_pointer(settings_.dir, lineage_, metadata, path);
  if (!problem.empty())
    print0("warning: " + problem + "; resume = auto still finds " + path + " by its lineage attributes");
  std::vector<std::string>& files = lineage_.branch_files;
  if (std::find(files.begin(), files.end(), path) == files.end()) files.push_back(path);
  prune(metadata.kind, metadata.kind == "full" ? settings_.keep_full : settings_.keep_fast);
}

// The branch's own files only: another branch's never, whatever their names say.
void Checkpointer::prune(const std::string& kind, int keep) {
  std::vector<std::string>& files = lineage_.branch_files;
  std::sort(files.begin(), files.end());  // one directory, zero-padded steps: the branch's order
  const std::string suffix = "." + kind + ".h5";
  std::vector<std::string> of_kind;
  for (const std::string& f : files)
    if (f.size() > suffix.size() && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0) of_kind.push_back(f);
  std::error_code ec;
  for (size_t i = 0; i + static_cast<size_t>(keep) < of_kind.size(); ++i) {
    fs::remove(of_kind[i], ec);
    files.erase(std::find(files.begin(), files.end(), of_kind[i]));
  }
}

}  // namespace trident::ckpt
