// The run directory: created by rank 0 only after every check has passed, so that a rejected
// deck leaves nothing behind; holds deck.resolved.ini, metrics.h5 and checkpoints.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/dir_lock.hpp"
#include "job/job.hpp"

namespace trident {

// Ownership of train.run_dir for the life of a run (core/dir_lock.hpp), on rank 0. Until keep(),
// the directories it had to create are removed again (when empty) with the lock, so that a run
// rejected after locking leaves nothing behind.
class RunDirLock {
 public:
  RunDirLock() = default;
  RunDirLock(std::unique_ptr<DirLock> lock, std::vector<std::string> created)
      : lock_(std::move(lock)), created_(std::move(created)) {}
  ~RunDirLock();
  RunDirLock(RunDirLock&&) = default;
  RunDirLock& operator=(RunDirLock&&) = default;
  void keep() { created_.clear(); }  // the run directory is in use: stays

 private:
  std::unique_ptr<DirLock> lock_;
  std::vector<std::string> created_;  // deepest first
};

// Collective over `world` (every rank, here and below). Rank 0 creates train.run_dir if needed and
// takes its lock (train.lock_* keys): after this no other run writes there. A directory held by a
// live run (after waiting train.lock_wait_s) or that cannot be locked is a UserError on every rank
// that names it and its holder; a stale lock is taken over with a warning.
RunDirLock lock_run_dir(comm::Communicator& world, const Job& job, const std::string& run_id);

// Collective. Creates train.run_dir (and parents) and writes deck.resolved.ini atomically
// (temporary file, then rename). A directory that cannot be created or written is a UserError
// on every rank. Returns the directory.
std::string prepare_run_dir(comm::Communicator& world, const Job& job, const std::string& header_comment);

// Collective, writes nothing: UserError unless train.run_dir exists as a writable directory or
// could be created (its nearest existing ancestor is a writable directory), the files a run
// writes there are regular files where they exist, and checkpoint.dir (when given) could be
// created too.
void check_run_dir_creatable(comm::Communicator& world, const Job& job);

}  // namespace trident
