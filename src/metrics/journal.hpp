// metrics.h5.journal: the rows appended since the last snapshot of metrics.h5, one framed
// record per flush, appended with one write(2) and never rewritten in place.
//
// Why: an HDF5 file kept open for writing is unreadable after a SIGKILL (its superblock says
// "open", or the last flush was torn). The journal can only ever lose its tail: each record
// carries its length and a checksum, so a record torn by a kill is recognised and dropped
// (those rows are newer than any checkpoint, which is only written after a flush), and every
// record before it is intact. Each record names the row where its values go, so applying the
// journal to the snapshot it extends is exact.
//
// Layout: a sequence of records [u32 magic "TMJR"][u32 kind][u64 payload bytes][u64 FNV-1a of
// the payload][payload], little-endian. Kind 0, first: the id of the snapshot it extends.
// Kind 1: u32 series, then per series [u32 name bytes][name][u8 integer][u64 first row]
// [u64 rows][rows x 8 bytes: float64 or int64].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "metrics/history.hpp"

namespace trident::metrics {

class JournalWriter {
 public:
  // Starts the journal anew (truncated) for the snapshot `snapshot_id`. Throws
  // std::runtime_error naming the file.
  JournalWriter(const std::string& path, const std::string& snapshot_id);
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  void append(const std::vector<SeriesRows>& rows);  // one record; nothing if rows is empty
  void sync();  // fdatasync: what was appended survives a crash of the node, not only a kill

 private:
  void write_record(uint32_t kind, const std::string& payload);
  std::string path_;
  int fd_ = -1;
};

struct Journal {
  std::string snapshot_id;       // "" when the file is missing or its header unreadable
  std::vector<SeriesRows> rows;  // in the order written
  uint64_t records = 0;          // row records read
  uint64_t dropped_bytes = 0;    // a torn or damaged tail, not applied
};

// Reads what can be read; never throws for damage (see dropped_bytes). A missing file is an
// empty journal.
Journal read_journal(const std::string& path);

}  // namespace trident::metrics
