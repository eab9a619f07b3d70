// The metrics history in memory: every series of a run (one value per row) and the root
// attributes, as metrics.h5 holds them. What the snapshot file is read into and written from,
// what the journal's rows are applied to, and what a resumed run cuts back.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trident::metrics {

// One series: float64 values, or int64 ("step"-like counters). Exactly one vector is used.
struct Series {
  bool integer = false;
  std::vector<double> real;
  std::vector<long long> ints;
  size_t size() const { return integer ? ints.size() : real.size(); }
  void resize(size_t rows);  // new rows (a gap left by a lost record) are NaN, or 0 for integers
  double at(size_t row) const { return integer ? double(ints[row]) : real[row]; }
};

// Rows of one series starting at row `first_row`: a journal record's unit.
struct SeriesRows {
  std::string name;
  bool integer = false;
  uint64_t first_row = 0;
  std::vector<double> real;
  std::vector<long long> ints;
  size_t size() const { return integer ? ints.size() : real.size(); }
};

using Attributes = std::vector<std::pair<std::string, std::string>>;

struct History {
  std::map<std::string, Series> series;  // by dataset path, e.g. "loss", "stage1/forward_ms"
  Attributes attributes;                 // string attributes of "/"
  std::string snapshot_id;               // which snapshot this is (the journal names it)

  // Writes `rows` at their row positions, extending the series (created on first use).
  void apply(const SeriesRows& rows);
  // Keeps only the rows of steps <= step: a series' rows follow its index series (val_* follow
  // val_step, checkpoint/* follow checkpoint/step, all others step).
  void cut_back(int64_t step);
  // Replaces the attributes of the same names, appends the others.
  void set_attributes(const Attributes& attributes);
};

// The index series whose rows the rows of `name` follow.
std::string index_series_of(const std::string& name);

}  // namespace trident::metrics
