// print0 / warn0.
#include "core/log.hpp"

#include <cstdio>

#include "core/mpi_util.hpp"

namespace trident {

void print0(const std::string& line) {
  if (world_rank() > 0) return;
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void warn0(const std::string& line) {
  if (world_rank() > 0) return;
  std::fprintf(stderr, "warning: %s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace trident
