// Reading a whole file on rank 0 and sharing it with every rank (decks, topology files): one
// reader, so that every rank parses the same bytes and detects the same errors. And fsync.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trident {

// The most a deck or a topology file may hold: real ones are a few kilobytes, and a bound is
// what stops /dev/zero or a multi-gigabyte file given by mistake from filling the memory.
constexpr size_t kMaxConfigBytes = size_t(4) << 20;

// Why `path` is not a regular file, from stat (which never blocks, even on a FIFO): "" when it
// is one, else "no such file", "is a directory", "is a FIFO (named pipe), not a
// regular file", "is a character device, not a regular file", ….
std::string regular_file_problem(const std::string& path);
// The same from a st_mode (of an fstat on a file already open).
std::string file_type_problem(unsigned mode);

// Reads the regular file `path` into `text` if it holds at most `max_bytes`; on failure returns
// false and puts the reason in `why`. Never blocks and never reads without limit: the file is
// opened with O_NONBLOCK and its type checked with fstat before any read (a FIFO, a directory,
// a device are refused), and no more than max_bytes + 1 bytes are ever read.
bool read_file(const std::string& path, size_t max_bytes, std::string& text, std::string& why);

// fsync of a file or a directory (a rename is durable once its directory is synced). Returns
// "" or what failed, naming the path.
std::string sync_to_disk(const std::string& path);

// Replaces `path` with the concatenation of `pieces` (pointer, bytes) so that no instant, a kill
// or a crash of the node included, leaves anything but the old file or the new one under that
// name: written to "<path>.tmp", synced, renamed, directory synced. On failure the temporary is
// removed and the old file is untouched. Returns "" or what failed, naming the file.
std::string write_atomically(const std::string& path, const std::vector<std::pair<const void*, size_t>>& pieces);

// The commit of a file written aside and synced by the caller: renames `temporary` over `path`
// and syncs the directory (the rename is durable then). On a failed rename the temporary is
// removed. Returns "" or what failed, naming the files.
std::string rename_into_place(const std::string& temporary, const std::string& path);

// The "key = value" lines of the small text files we write (lock, branch pointer); lines
// starting with '#' and lines without " = " are skipped.
std::map<std::string, std::string> parse_key_values(const std::string& text);

}  // namespace trident
