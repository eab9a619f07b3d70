// File reading and syncing helpers.
#include "core/file_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/mpi_util.hpp"

namespace trident {

bool read_file(const std::string& path, std::string& text, std::string& why) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    why = std::strerror(errno);
    return false;
  }
  if (S_ISDIR(info.st_mode)) {
    why = "is a directory";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = std::strerror(errno);
    return false;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    why = "read error";
    return false;
  }
  text = buffer.str();
  return true;
}

std::string read_on_root_and_broadcast(const std::string& path, const std::string& what,
                                       const std::string& hint, MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::string text, why, error;
  if (rank == 0 && !read_file(path, text, why))
    error = "cannot read " + what + " '" + path + "': " + why + "; " + hint;
  agree_on_error(error, 0, comm);
  broadcast_string(text, 0, comm);
  return text;
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
  if (problem.empty() && std::rename(temporary.c_str(), path.c_str()) != 0)
    problem = "cannot rename '" + temporary + "' to '" + path + "': " + std::strerror(errno);
  if (!problem.empty()) {
    std::remove(temporary.c_str());  // a full disk leaves no half-written temporary behind
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
