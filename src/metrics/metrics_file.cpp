// metrics.h5 through a snapshot and a journal.
#include "metrics/metrics_file.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include "core/clock.hpp"
#include "metrics/snapshot.hpp"

namespace trident::metrics {
namespace {

// A new snapshot at a flush no sooner than this after the last, and no more often than 1/20 of
// the time (a snapshot rewrites the whole history: at most ~5% of the run, however long).
constexpr double kSnapshotSeconds = 10.0;
constexpr double kSnapshotShare = 20.0;

std::string journal_of(const std::string& path) { return path + ".journal"; }

// Journal rows that extend no snapshot (it was lost): each series starts at row 0.
void apply_rebased(History& history, std::vector<SeriesRows> rows) {
  std::map<std::string, uint64_t> first;
  for (const SeriesRows& r : rows)
    first[r.name] = first.count(r.name) ? std::min(first[r.name], r.first_row) : r.first_row;
  for (SeriesRows& r : rows) {
    r.first_row -= first[r.name];
    history.apply(r);
  }
}

long long first_step(const History& history) {
  const auto step = history.series.find("step");
  return step == history.series.end() || step->second.size() == 0 ? -1 : static_cast<long long>(step->second.at(0));
}

}  // namespace

MetricsFile::MetricsFile(const std::string& path, const Attributes& attributes)
    : path_(path), journal_path_(journal_of(path)) {
  set_previous_aside();
  start(History{}, attributes);
}

// A new run in a directory that holds another run's history keeps that history (its snapshot
// with its journal applied) as metrics.h5.previous-<UTC time>: never replaced without a word.
void MetricsFile::set_previous_aside() {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return;
  const std::string aside = path_ + ".previous-" + utc_compact_stamp();
  try {
    const History previous = read_history(path_);
    write_snapshot(aside, previous);
    const auto step = previous.series.find("step");
    notes_.push_back("the previous run's metrics history (" +
                     std::to_string(step == previous.series.end() ? 0 : step->second.size()) +
                     " steps) is kept as '" + aside + "'");
  } catch (const std::runtime_error& e) {
    std::filesystem::rename(path_, aside + ".damaged", ec);
    notes_.push_back(std::string(e.what()) + "; the previous run's file is moved to '" + aside + ".damaged'");
  }
}

MetricsFile::MetricsFile(const std::string& path, const Attributes& attributes, int64_t resume_step)
    : path_(path), journal_path_(journal_of(path)) {
  start(recover(resume_step), attributes);
}

// The history as the killed (or finished) run left it, cut back to resume_step.
History MetricsFile::recover(int64_t resume_step) {
  History history;
  bool snapshot_ok = false;
  std::error_code ec;
  if (std::filesystem::exists(path_, ec)) {
    try {
      history = read_snapshot(path_);
      snapshot_ok = true;
    } catch (const std::runtime_error& e) {
      const std::string aside = path_ + ".damaged-" + utc_compact_stamp();
      std::filesystem::rename(path_, aside, ec);
      notes_.push_back(std::string(e.what()) + "; moved to '" + aside + "'");
    }
  }
  const Journal journal = read_journal(journal_path_);
  if (journal.dropped_bytes)
    notes_.push_back("metrics journal '" + journal_path_ + "': its last " + std::to_string(journal.dropped_bytes) +
                     " bytes were torn (a kill during a write) and are dropped; they held rows after the "
                     "last checkpoint only");
  if (snapshot_ok && journal.snapshot_id == history.snapshot_id) {
    for (const SeriesRows& rows : journal.rows) history.apply(rows);
  } else if (!snapshot_ok && !journal.rows.empty()) {
    apply_rebased(history, journal.rows);
    const long long first = first_step(history);
    notes_.push_back("the metrics history of steps 1 to " + std::to_string(first > 0 ? first - 1 : resume_step) +
                     " is lost; it starts at step " + std::to_string(first) + " (from the journal)");
  } else if (!snapshot_ok) {
    notes_.push_back("no metrics history to continue ('" + path_ + "' is missing or unreadable): the rows of " +
                     "steps 1 to " + std::to_string(resume_step) + " are lost");
  }
  history.cut_back(resume_step);
  return history;
}

void MetricsFile::start(History history, const Attributes& attributes) {
  history.set_attributes(attributes);
  history.snapshot_id = new_snapshot_id();
  write_snapshot(path_, history);
  journal_ = std::make_unique<JournalWriter>(journal_path_, history.snapshot_id);
  for (const auto& [name, values] : history.series) {
    Pending& pending = series_[name];
    pending.integer = values.integer;
    pending.rows = values.size();
  }
  last_snapshot_at_ = steady_seconds();
}

MetricsFile::~MetricsFile() {
  try {
    close();
  } catch (const std::exception&) {
    // Destructors must not throw; the journal keeps every flushed row for the next run.
  }
}

void MetricsFile::append(const std::string& name, double value) {
  Pending& pending = series_[name];
  if (pending.integer) pending.ints.push_back(static_cast<long long>(value));
  else pending.real.push_back(value);
}

void MetricsFile::append_int(const std::string& name, long long value) {
  Pending& pending = series_[name];
  if (pending.rows == 0 && pending.real.empty()) pending.integer = true;
  if (pending.integer) pending.ints.push_back(value);
  else pending.real.push_back(static_cast<double>(value));
}

void MetricsFile::flush() {
  if (!journal_) throw std::runtime_error("metrics file '" + path_ + "': written to after close()");
  std::vector<SeriesRows> record;
  for (auto& [name, pending] : series_) {
    const size_t count = pending.integer ? pending.ints.size() : pending.real.size();
    if (count == 0) continue;
    record.push_back({name, pending.integer, pending.rows, std::move(pending.real), std::move(pending.ints)});
    pending.real.clear();
    pending.ints.clear();
    pending.rows += count;
  }
  journal_->append(record);
  const double since = steady_seconds() - last_snapshot_at_;
  if (since >= kSnapshotSeconds && since >= kSnapshotShare * last_snapshot_cost_) snapshot();
}

void MetricsFile::sync() {
  flush();
  journal_->sync();
}

// Once: the destructor calls it again, and a second snapshot at exit would rewrite the whole
// history for nothing (or, on a full disk, fail after the run had reported its outcome).
void MetricsFile::close() {
  if (!journal_) return;
  flush();
  snapshot();
  journal_.reset();
}

// The snapshot read back, the journal applied, written as the next snapshot; a new journal.
void MetricsFile::snapshot() {
  const double begin = steady_seconds();
  History history = read_history(path_);
  history.snapshot_id = new_snapshot_id();
  write_snapshot(path_, history);
  journal_ = std::make_unique<JournalWriter>(journal_path_, history.snapshot_id);
  last_snapshot_at_ = steady_seconds();
  last_snapshot_cost_ = last_snapshot_at_ - begin;
}

History read_history(const std::string& path) {
  // A snapshot may replace the file between our two reads: then the journal names the new
  // one, and reading both again gives a consistent pair.
  for (int attempt = 0;; ++attempt) {
    History history = read_snapshot(path);
    const Journal journal = read_journal(journal_of(path));
    if (journal.snapshot_id == history.snapshot_id) {
      for (const SeriesRows& rows : journal.rows) history.apply(rows);
      return history;
    }
    if (attempt == 2 || journal.snapshot_id.empty()) return history;
  }
}

std::vector<double> read_series(const std::string& path, const std::string& name) {
  const History history = read_history(path);
  const auto found = history.series.find(name);
  if (found == history.series.end()) throw std::runtime_error("metrics file '" + path + "': no dataset '" + name + "'");
  std::vector<double> values(found->second.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = found->second.at(i);
  return values;
}

std::string read_attribute(const std::string& path, const std::string& name) {
  const History history = read_history(path);
  for (const auto& [key, value] : history.attributes)
    if (key == name) return value;
  throw std::runtime_error("metrics file '" + path + "': no attribute '" + name + "'");
}

}  // namespace trident::metrics
