// File reading and syncing helpers.
#include "core/file_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

}  // namespace trident
