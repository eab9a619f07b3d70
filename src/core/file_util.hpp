// Reading a whole file on rank 0 and sharing it with every rank (decks, topology files): one
// reader, so that every rank parses the same bytes and detects the same errors. And fsync.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trident {

// Reads `path` into `text`; on failure returns false and puts the reason (strerror) in `why`.
bool read_file(const std::string& path, std::string& text, std::string& why);

// Collective: rank 0 reads `path` and broadcasts its bytes. If rank 0 cannot read it, every
// rank throws the same UserError: "<what> '<path>': <reason>; <hint>".
std::string read_on_root_and_broadcast(const std::string& path, const std::string& what,
                                       const std::string& hint, MPI_Comm comm);

// fsync of a file or a directory (a rename is durable once its directory is synced). Returns
// "" or what failed, naming the path.
std::string sync_to_disk(const std::string& path);

// Replaces `path` with the concatenation of `pieces` (pointer, bytes) so that no instant, a kill
// or a crash of the node included, leaves anything but the old file or the new one under that
// name: written to "<path>.tmp", synced, renamed, directory synced. On failure the temporary is
// removed and the old file is untouched. Returns "" or what failed, naming the file.
std::string write_atomically(const std::string& path, const std::vector<std::pair<const void*, size_t>>& pieces);

// The "key = value" lines of the small text files we write (lock, branch pointer); lines
// starting with '#' and lines without " = " are skipped.
std::map<std::string, std::string> parse_key_values(const std::string& text);

}  // namespace trident
