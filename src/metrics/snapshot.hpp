// metrics.h5 as a snapshot: a complete HDF5 file written whole and put in place by rename(2),
// never opened for writing under its own name — so whatever instant a run dies at, metrics.h5
// is the previous complete snapshot or the next one. The rows appended since it are in the
// journal (metrics/journal.hpp), which names the snapshot it extends by the root attribute
// "metrics_snapshot_id".
//
// Layout, unchanged for readers: one 1-D dataset per series (float64, or int64 for "step"-like
// counters; "stage1/forward_ms" in group "stage1"), string attributes of "/" (the resolved deck).
#pragma once

#include <string>

#include "metrics/history.hpp"

namespace trident::metrics {

// The whole file. Throws std::runtime_error naming the file when it cannot be read.
History read_snapshot(const std::string& path);

// Writes `history` to "<path>.tmp", syncs it, renames it over `path` and syncs the directory.
// Throws std::runtime_error naming the file (the temporary is removed then).
void write_snapshot(const std::string& path, const History& history);

// A new snapshot id: host, process, time and a counter (unique without coordination).
std::string new_snapshot_id();

}  // namespace trident::metrics
