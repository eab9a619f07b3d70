// Run-directory creation and the resolved deck.
#include "job/run_dir.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/log.hpp"
#include "comm/agreement.hpp"
#include "core/printable.hpp"
#include "job/signals.hpp"

namespace trident {
namespace fs = std::filesystem;
namespace {

std::string hint(const deck::Record& deck) {
  return " (" + deck.cite("train.run_dir") +
         "); choose a directory you can write, e.g. --train.run_dir=runs/NAME";
}

// Why `dir` could not be created, without creating anything; "" if it could.
std::string creatable_problem(const fs::path& dir) {
  fs::path probe = dir;
  std::error_code ec;
  while (!probe.empty() && !fs::exists(probe, ec)) probe = probe.parent_path();
  if (probe.empty()) probe = ".";
  if (!fs::is_directory(probe, ec)) return "'" + probe.string() + "' exists and is not a directory";
  if (access(probe.c_str(), W_OK | X_OK) != 0)
    return "cannot write in '" + probe.string() + "': " + std::strerror(errno);
  return "";
}

// The directories create_directories(dir) is about to make, deepest first.
std::vector<std::string> missing_directories(const fs::path& dir) {
  std::vector<std::string> missing;
  std::error_code ec;
  for (fs::path at = fs::absolute(dir).lexically_normal(); !at.empty() && !fs::exists(at, ec); at = at.parent_path())
    missing.push_back(at.string());
  return missing;
}

LockSettings lock_settings(const Job& job) {
  const deck::Record& deck = job.record;
  LockSettings settings;
  settings.wait_s = job.settings.lock.wait_s;
  settings.heartbeat_s = job.settings.lock.heartbeat_s;
  settings.stale_s = job.settings.lock.stale_s;
  if (settings.stale_s < 3 * settings.heartbeat_s)
    fatal_all(deck.cite("train.lock_stale_s") + " must be at least 3 x train.lock_heartbeat_s (" +
              deck.cite("train.lock_heartbeat_s") + "), or a live run's lock could be judged stale; "
              "raise train.lock_stale_s");
  return settings;
}

void say(const std::string& line) {
  if (line.rfind("warning:", 0) == 0) std::fprintf(stderr, "%s\n", line.c_str());
  else std::printf("%s\n", line.c_str());
  std::fflush(nullptr);
}

// The files a run writes into its directory, if they exist already, must be files: a directory
// or a device under one of these names (metrics.h5 a symlink to /dev/full) would otherwise be
// found only when the first write fails, with the run directory half-written.
std::string run_files_problem(const fs::path& dir) {
  for (const char* name : {"metrics.h5", "metrics.h5.journal", "deck.resolved.ini", "model.bin"}) {
    const fs::path file = dir / name;
    std::error_code ec;
    if (!fs::exists(file, ec)) continue;
    const std::string problem = regular_file_problem(file.string());
    if (!problem.empty()) return "'" + printable(file.string()) + "' " + problem + "; remove it, or choose another";
  }
  const fs::path hf = dir / "model";  // a llama run's model: a Hugging Face directory
  std::error_code ec;
  if (fs::exists(hf, ec) && !fs::is_directory(hf, ec))
    return "'" + printable(hf.string()) + "' is not a directory (a llama run writes its model there); remove it, or "
           "choose another";
  return "";
}

// Rank 0: every reason the run directory, its files or checkpoint.dir would fail, before any
// of them is created ("" if none).
std::string run_dir_problem(const Job& job) {
  const deck::Record& deck = job.record;
  const fs::path dir = job.settings.train.run_dir;
  std::string problem = creatable_problem(dir);
  if (!problem.empty()) return "run directory '" + printable(dir.string()) + "' cannot be created: " + problem + hint(deck);
  problem = run_files_problem(dir);
  if (!problem.empty()) return "run directory '" + printable(dir.string()) + "': " + problem + hint(deck);
  const std::string& checkpoints = job.settings.checkpoint_dir_given;  // empty: inside the run directory
  problem = checkpoints.empty() ? "" : creatable_problem(checkpoints);
  if (!problem.empty())
    return "checkpoint directory '" + printable(checkpoints) + "' cannot be created: " + problem + " (" +
           deck.cite("checkpoint.dir") + "); choose a directory you can write, or leave checkpoint.dir empty "
           "(RUN_DIR/checkpoints)";
  return "";
}

}  // namespace

RunDirLock::~RunDirLock() {
  lock_.reset();
  std::error_code ec;
  for (const std::string& dir : created_)
    if (!fs::remove(dir, ec)) break;  // not empty (or gone): the rest stays too
}

RunDirLock lock_run_dir(comm::Communicator& world, const Job& job, const std::string& run_id) {
  const deck::Record& deck = job.record;
  const LockSettings settings = lock_settings(job);
  check_run_dir_creatable(world, job);
  const fs::path dir = job.settings.train.run_dir;
  std::string error;
  int32_t stopped = 0;  // a stop signal ended the wait: exit kExitStopped, not a user error
  RunDirLock held;
  if (world.rank() == 0) {
    std::vector<std::string> created = missing_directories(dir);
    std::error_code ec;
    fs::create_directories(dir, ec);
    try {
      if (ec) throw std::runtime_error("cannot be created: " + ec.message());
      held = RunDirLock(std::make_unique<DirLock>(dir.string(), run_id, settings, say, [] { return stop_signal() != 0; }),
                        created);
    } catch (const DirLockBusy& e) {
      error = e.what();
    } catch (const DirLockForeign& e) {
      error = e.what();
    } catch (const DirLockStopped& e) {
      error = std::string("stopped by ") + stop_signal_name(stop_signal()) + " before training started, " + e.what() +
              ": nothing was trained or written";
      stopped = 1;
    } catch (const std::runtime_error& e) {
      error = "run directory '" + dir.string() + "' cannot be locked: " + e.what() + hint(deck);
    }
    if (!error.empty()) RunDirLock(nullptr, created);  // what it created goes again
  }
  world.broadcast(&stopped, 1, DType::i32, 0, Stream{}).wait();
  if (stopped) {
    comm::broadcast_string(world, error, 0);
    throw RunFailure(error, kExitStopped);
  }
  comm::agree_on_error(world, error, 0);
  return held;
}

void check_run_dir_creatable(comm::Communicator& world, const Job& job) {
  comm::agree_on_error(world, world.rank() == 0 ? run_dir_problem(job) : "", 0);
}

std::string prepare_run_dir(comm::Communicator& world, const Job& job, const std::string& header_comment) {
  const deck::Record& deck = job.record;
  const fs::path dir = job.settings.train.run_dir;
  check_run_dir_creatable(world, job);
  std::string error;
  if (world.rank() == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      error = "run directory '" + dir.string() + "' cannot be created: " + ec.message() + hint(deck);
    } else {
      const std::string text = deck.to_ini(header_comment);
      const std::string problem = write_atomically((dir / "deck.resolved.ini").string(), {{text.data(), text.size()}});
      if (!problem.empty()) error = "run directory '" + dir.string() + "': " + problem + hint(deck);
    }
  }
  comm::agree_on_error(world, error, 0);
  return dir.string();
}

}  // namespace trident
