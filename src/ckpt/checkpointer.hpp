// The checkpoint policy of a run (seed §4.2): fast checkpoints (parameters) and full ones
// (parameters, AdamW moments, counters) at their own intervals, each written atomically —
// temporary name, fsync, verification of every checksum, rename, fsync of the directory — so
// that a crash or a full disk at any moment leaves the earlier checkpoints intact and never a
// file that looks valid but is not; the newest keep_fast / keep_full of each kind kept — of the
// run's own branch (ckpt/lineage.hpp), never judged by file names alone.
//
// Asynchronous mode: save() copies this rank's part of the state into host buffers (the only
// part training waits for, with the wait for a previous write still in flight) and a
// background thread writes it on a communicator of its own while training goes on.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/checkpoint_file.hpp"
#include "ckpt/lineage.hpp"
#include "comm/communicator.hpp"
#include "tensor/buffer.hpp"

namespace trident::ckpt {

// Every `steps` steps and/or every `seconds` of wall-clock time (0: not by that measure).
struct Interval {
  int64_t steps = 0;
  double seconds = 0.0;
  // Due after `step` completed steps, `elapsed` seconds after the last checkpoint of its kind.
  bool due(int64_t step, double elapsed) const {
    return (steps > 0 && step % steps == 0) || (seconds > 0.0 && elapsed >= seconds);
  }
};

struct Settings {
  std::string dir;  // where the files go (train.run_dir/checkpoints by default)
  Interval fast, full;
  int keep_fast = 2, keep_full = 2;
  bool async = false;
  double timeout_s = 600;  // a write (with its verification) still running then aborts the job
  bool check_space = true;  // refuse a write the file system has no room for, before starting it
};

// One finished write (the same figures on every rank).
struct WriteRecord {
  int64_t step = 0;
  std::string kind, path, error;  // error empty: written and verified
  int64_t bytes = 0;
  double write_seconds = 0, verify_seconds = 0, blocking_seconds = 0;
};

// "step-00000120.full.h5": sorts by step.
std::string checkpoint_name(int64_t step, const std::string& kind);
// The checkpoint files of `dir` of this kind ("fast", "full"; "" for both), paths sorted by
// name: by step, and a full one after a fast one of the same step.
std::vector<std::string> checkpoint_files(const std::string& dir, const std::string& kind);

class Checkpointer {
 public:
  // Collective over `world` (a plain MPI communicator: comm/world.hpp), which it duplicates.
  // Creates the directory and removes temporary files a killed run left there. A directory that
  // cannot be created is a UserError.
  Checkpointer(const Settings& settings, comm::Communicator& world);
  ~Checkpointer();  // waits for a write in flight
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Collective, before the first save: sets the lineage up on disk (rank 0: the abandoned
  // branch moved aside, the branch pointer written; ckpt/lineage.hpp) and prints what it did.
  // `lineage` matters on rank 0 only. A failure is a UserError on every rank.
  void begin_lineage(const Lineage& lineage);
  // This rank's view of what is due after `step` completed steps: "", "fast" or "full".
  std::string due(int64_t step) const;
  // Collective: a checkpoint of `state`. Returns once the state may change again.
  void save(const std::string& kind, const StateView& state, const Metadata& metadata);
  // Collective: the write in flight (if any) finished.
  void wait();
  // The writes finished since the last call.
  std::vector<WriteRecord> take_records();
  const Settings& settings() const { return settings_; }

 private:
  struct Pending {
    StateView state;
    Metadata metadata;
    double blocking_seconds = 0;
  };
  WriteRecord write_atomically(const Pending& pending);  // collective over comm_
  StateView stage(const StateView& state);              // copies (downloads) into the staging buffers
  void prune(const std::string& kind, int keep);  // rank 0: of the branch's files
  void joined_branch(const std::string& path, const Metadata& metadata);  // rank 0, after a write

  Settings settings_;
  std::unique_ptr<comm::Communicator> comm_;  // the duplicate: its own context, for the writer thread
  int rank_ = 0;
  std::chrono::steady_clock::time_point last_any_, last_full_;  // last checkpoint of any kind, full
  Buffer<float> staged_params_, staged_m_, staged_v_;  // async copies of this rank's part
  std::thread writer_;
  std::mutex records_mutex_;
  std::vector<WriteRecord> records_;
  Lineage lineage_;      // rank 0: the run's branch, its files at the top level
  std::string last_id_;  // rank 0: the newest checkpoint of the lineage, the next one's parent
};

}  // namespace trident::ckpt
