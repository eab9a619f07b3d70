// The metrics journal: framed, checksummed, append-only records.
#include "metrics/journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace trident::metrics {
namespace {

constexpr uint32_t kMagic = 0x524a4d54;  // "TMJR" little-endian
constexpr uint32_t kHeader = 0, kRows = 1;
constexpr size_t kFrameBytes = 4 + 4 + 8 + 8;
// A record larger than this is damage, not data (a flush holds a few thousand values).
constexpr uint64_t kMaxPayload = uint64_t(1) << 32;

uint64_t fnv1a(const char* data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ static_cast<unsigned char>(data[i])) * 0x100000001b3ULL;
  return hash;
}

template <class T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Reads a T at `at`, advancing it; false past `end`.
template <class T>
bool take(const char*& at, const char* end, T& value) {
  if (size_t(end - at) < sizeof value) return false;
  std::memcpy(&value, at, sizeof value);
  at += sizeof value;
  return true;
}

std::runtime_error journal_error(const std::string& path, const std::string& what) {
  return std::runtime_error("metrics journal '" + path + "': " + what + ": " + std::strerror(errno));
}

std::string encode_rows(const std::vector<SeriesRows>& rows) {
  std::string payload;
  put<uint32_t>(payload, static_cast<uint32_t>(rows.size()));
  for (const SeriesRows& series : rows) {
    put<uint32_t>(payload, static_cast<uint32_t>(series.name.size()));
    payload += series.name;
    put<uint8_t>(payload, series.integer ? 1 : 0);
    put<uint64_t>(payload, series.first_row);
    put<uint64_t>(payload, series.size());
    const char* values = series.integer ? reinterpret_cast<const char*>(series.ints.data())
                                        : reinterpret_cast<const char*>(series.real.data());
    payload.append(values, series.size() * 8);
  }
  return payload;
}

// The series of one rows record; false if the payload does not parse (damage).
bool decode_rows(const char* at, const char* end, std::vector<SeriesRows>& out) {
  uint32_t count = 0;
  if (!take(at, end, count)) return false;
  std::vector<SeriesRows> decoded(count);
  for (SeriesRows& series : decoded) {
    uint32_t name_bytes = 0;
    uint8_t integer = 0;
    uint64_t rows = 0;
    if (!take(at, end, name_bytes) || size_t(end - at) < name_bytes) return false;
    series.name.assign(at, name_bytes);
    at += name_bytes;
    if (!take(at, end, integer) || !take(at, end, series.first_row) || !take(at, end, rows)) return false;
    if (uint64_t(end - at) / 8 < rows) return false;
    series.integer = integer != 0;
    if (series.integer) series.ints.resize(rows);
    else series.real.resize(rows);
    std::memcpy(series.integer ? static_cast<void*>(series.ints.data()) : series.real.data(), at, rows * 8);
    at += rows * 8;
  }
  if (at != end) return false;
  for (SeriesRows& series : decoded) out.push_back(std::move(series));
  return true;
}

}  // namespace

JournalWriter::JournalWriter(const std::string& path, const std::string& snapshot_id) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw journal_error(path, "cannot create");
  write_record(kHeader, snapshot_id);
}

JournalWriter::~JournalWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void JournalWriter::append(const std::vector<SeriesRows>& rows) {
  if (!rows.empty()) write_record(kRows, encode_rows(rows));
}

void JournalWriter::sync() {
  if (::fdatasync(fd_) != 0) throw journal_error(path_, "fdatasync failed");
}

void JournalWriter::write_record(uint32_t kind, const std::string& payload) {
  std::string record;
  record.reserve(kFrameBytes + payload.size());
  put<uint32_t>(record, kMagic);
  put<uint32_t>(record, kind);
  put<uint64_t>(record, payload.size());
  put<uint64_t>(record, fnv1a(payload.data(), payload.size()));
  record += payload;
  size_t done = 0;
  while (done < record.size()) {  // one write(2) unless the kernel splits it
    const ssize_t wrote = ::write(fd_, record.data() + done, record.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) throw journal_error(path_, "write failed");
    done += static_cast<size_t>(wrote);
  }
}

Journal read_journal(const std::string& path) {
  Journal journal;
  std::ifstream in(path, std::ios::binary);
  if (!in) return journal;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const char* at = bytes.data();
  const char* const end = bytes.data() + bytes.size();
  bool header = true;
  while (at < end) {
    const char* record = at;
    uint32_t magic = 0, kind = 0;
    uint64_t size = 0, checksum = 0;
    const bool framed = take(at, end, magic) && take(at, end, kind) && take(at, end, size) &&
                        take(at, end, checksum) && magic == kMagic && size <= kMaxPayload &&
                        uint64_t(end - at) >= size && fnv1a(at, size) == checksum &&
                        kind == (header ? kHeader : kRows);
    const bool parsed = framed && (header ? (journal.snapshot_id.assign(at, size), true)
                                          : decode_rows(at, at + size, journal.rows));
    if (!parsed) {
      journal.dropped_bytes = uint64_t(end - record);
      break;
    }
    at += size;
    if (!header) ++journal.records;
    header = false;
  }
  return journal;
}

}  // namespace trident::metrics
