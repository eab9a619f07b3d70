// Run-directory creation and the resolved deck.
#include "train/run_dir.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/mpi_util.hpp"

namespace trident {
namespace fs = std::filesystem;
namespace {

std::string hint(const deck::Deck& deck) {
  return " (" + deck.cite("train.run_dir") +
         "); choose a directory you can write, e.g. --train.run_dir=runs/NAME";
}

// Why `dir` could not be created, without creating anything; "" if it could.
std::string creatable_problem(const fs::path& dir) {
  fs::path probe = dir;
  std::error_code ec;
  while (!probe.empty() && !fs::exists(probe, ec)) probe = probe.parent_path();
  if (probe.empty()) probe = ".";
  if (!fs::is_directory(probe, ec)) return "'" + probe.string() + "' exists and is not a directory";
  if (access(probe.c_str(), W_OK | X_OK) != 0)
    return "cannot write in '" + probe.string() + "': " + std::strerror(errno);
  return "";
}

}  // namespace

void check_run_dir_creatable(const deck::Deck& deck) {
  const fs::path dir = deck.get_string("train.run_dir");
  std::string error;
  if (world_rank() == 0) {
    const std::string problem = creatable_problem(dir);
    if (!problem.empty())
      error = "run directory '" + dir.string() + "' cannot be created: " + problem + hint(deck);
  }
  agree_on_error(error, 0, MPI_COMM_WORLD);
}

std::string prepare_run_dir(const deck::Deck& deck, const std::string& header_comment) {
  const fs::path dir = deck.get_string("train.run_dir");
  check_run_dir_creatable(deck);
  std::string error;
  if (world_rank() == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      error = "run directory '" + dir.string() + "' cannot be created: " + ec.message() + hint(deck);
    } else {
      const std::string text = deck.to_ini(header_comment);
      const std::string problem = write_atomically((dir / "deck.resolved.ini").string(), {{text.data(), text.size()}});
      if (!problem.empty()) error = "run directory '" + dir.string() + "': " + problem + hint(deck);
    }
  }
  agree_on_error(error, 0, MPI_COMM_WORLD);
  return dir.string();
}

}  // namespace trident
