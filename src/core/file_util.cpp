// File reading and syncing helpers.
#include "core/file_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/mpi_util.hpp"
#include "core/printable.hpp"

namespace trident {

std::string file_type_problem(unsigned mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO (named pipe), not a regular file";
  if (S_ISCHR(mode)) return "is a character device, not a regular file";
  if (S_ISBLK(mode)) return "is a block device, not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  return "is not a regular file";
}

namespace {

std::string size_text(size_t bytes) {
  char text[64];
  if (bytes >= (size_t(1) << 20)) std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  else std::snprintf(text, sizeof text, "%zu bytes", bytes);
  return text;
}

// Reads up to max_bytes + 1 bytes of fd: one more than allowed tells "too large" from "fits"
// even when the file grew after fstat.
bool read_bounded(int fd, size_t max_bytes, std::string& text, std::string& why) {
  text.clear();
  char chunk[65536];
  while (text.size() <= max_bytes) {
    const size_t want = std::min(sizeof chunk, max_bytes + 1 - text.size());
    const ssize_t got = ::read(fd, chunk, want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      why = std::strerror(errno);
      return false;
    }
    if (got == 0) return true;
    text.append(chunk, static_cast<size_t>(got));
  }
  why = "is larger than the " + size_text(max_bytes) + " allowed";
  return false;
}

}  // namespace

std::string regular_file_problem(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return errno == ENOENT ? "no such file" : std::strerror(errno);
  return file_type_problem(info.st_mode);
}

bool read_file(const std::string& path, size_t max_bytes, std::string& text, std::string& why) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = std::strerror(errno);
    return false;
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) why = std::strerror(errno);
  else why = file_type_problem(info.st_mode);
  if (why.empty() && static_cast<size_t>(info.st_size) > max_bytes)
    why = "is " + size_text(static_cast<size_t>(info.st_size)) + ", more than the " + size_text(max_bytes) + " allowed";
  const bool ok = why.empty() && read_bounded(fd, max_bytes, text, why);
  ::close(fd);
  return ok;
}

std::string sync_to_disk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  const bool ok = fd >= 0 && ::fsync(fd) == 0;
  const std::string problem = ok ? "" : "fsync of '" + path + "' failed: " + std::strerror(errno);
  if (fd >= 0) ::close(fd);
  return problem;
}

namespace {

std::string write_all(int fd, const std::string& path, const std::vector<std::pair<const void*, size_t>>& pieces) {
  for (const auto& [data, bytes] : pieces) {
    const char* at = static_cast<const char*>(data);
    size_t left = bytes;
    while (left > 0) {
      const ssize_t wrote = ::write(fd, at, left);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) return "cannot write '" + path + "': " + std::strerror(errno);
      at += wrote;
      left -= static_cast<size_t>(wrote);
    }
  }
  return ::fsync(fd) == 0 ? "" : "fsync of '" + path + "' failed: " + std::strerror(errno);
}

}  // namespace

std::string write_atomically(const std::string& path, const std::vector<std::pair<const void*, size_t>>& pieces) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create '" + temporary + "': " + std::strerror(errno);
  std::string problem = write_all(fd, temporary, pieces);
  if (::close(fd) != 0 && problem.empty()) problem = "cannot write '" + temporary + "': " + std::strerror(errno);
  if (!problem.empty()) {
    std::remove(temporary.c_str());  // a full disk leaves no half-written temporary behind
    return problem;
  }
  return rename_into_place(temporary, path);
}

std::string rename_into_place(const std::string& temporary, const std::string& path) {
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string problem = "cannot rename '" + temporary + "' to '" + path + "': " + std::strerror(errno);
    std::remove(temporary.c_str());
    return problem;
  }
  const std::string directory = std::filesystem::path(path).parent_path().string();
  return sync_to_disk(directory.empty() ? "." : directory);
}

std::map<std::string, std::string> parse_key_values(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t equals = line.find(" = ");
    if (line.empty() || line[0] == '#' || equals == std::string::npos) continue;
    values[line.substr(0, equals)] = line.substr(equals + 3);
  }
  return values;
}

}  // namespace trident
