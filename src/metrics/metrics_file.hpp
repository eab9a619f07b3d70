// metrics.h5: one 1-D dataset per metric (float64; "step"-like integer series as int64), written
// by rank 0, with the resolved deck as attributes of the root group. Readable with h5dump, h5py
// and any HDF5 tool, at any time, also after the run was killed.
//
// Crash-safe by construction (docs/CHECKPOINTS.md): metrics.h5 is a snapshot replaced only by
// rename (metrics/snapshot.hpp); each flush appends the new rows to metrics.h5.journal
// (metrics/journal.hpp); a new snapshot takes in the journal now and then (rate-limited: its
// cost stays a small share of the run), and at the end. A resumed run rebuilds the history
// from the snapshot and the journal, cut back to its checkpoint's step, before it goes on.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "metrics/history.hpp"
#include "metrics/journal.hpp"

namespace trident::metrics {

class MetricsFile {
 public:
  // A new history. A previous run's metrics.h5 (with its journal) is kept beside it as
  // metrics.h5.previous-<UTC time>, said in recovery_notes(). attributes: (name, text) pairs
  // stored as string attributes of "/". Throws std::runtime_error naming the file on any failure.
  MetricsFile(const std::string& path, const Attributes& attributes);
  // Continues the history of a run resumed after `resume_step` steps: the snapshot and its
  // journal are read (a torn journal tail dropped, an unreadable snapshot moved aside), every
  // series is cut back to its rows of steps <= resume_step (History::cut_back), and the
  // attributes are replaced. What recovery lost or set aside is in recovery_notes().
  MetricsFile(const std::string& path, const Attributes& attributes, int64_t resume_step);
  ~MetricsFile();  // flushes and writes a last snapshot (errors swallowed: call close() to see them)
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  // Appends one value to the series `name` (created on first use).
  void append(const std::string& name, double value);
  void append_int(const std::string& name, long long value);
  // Appends every buffered value to the journal (one record), and snapshots when one is due.
  void flush();
  // flush(), then the journal forced to disk: before a checkpoint names these steps.
  void sync();
  // flush() and a new snapshot now: metrics.h5 alone holds everything.
  void close();
  const std::string& path() const { return path_; }
  // What recovery at resume found (damage, rows lost), or where a previous run's history went;
  // empty when there was nothing to say.
  const std::vector<std::string>& recovery_notes() const { return notes_; }

 private:
  struct Pending {
    bool integer = false;
    std::vector<double> real;
    std::vector<long long> ints;
    uint64_t rows = 0;  // rows already in the snapshot and the journal
  };
  History recover(int64_t resume_step);
  void set_previous_aside();
  void start(History history, const Attributes& attributes);
  void snapshot();

  std::string path_, journal_path_;
  std::unique_ptr<JournalWriter> journal_;
  std::map<std::string, Pending> series_;
  std::vector<std::string> notes_;
  double last_snapshot_at_ = 0, last_snapshot_cost_ = 0;
};

// Everything a metrics.h5 holds now: its snapshot with the journal beside it applied (so a
// running job's latest rows are seen too). Throws std::runtime_error naming the file.
History read_history(const std::string& path);
// One whole series as doubles (for tests and tools); throws if missing.
std::vector<double> read_series(const std::string& path, const std::string& name);
// A string attribute of "/"; throws if missing.
std::string read_attribute(const std::string& path, const std::string& name);

}  // namespace trident::metrics
