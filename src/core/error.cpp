// Implementation of the two error paths (collective user errors, one-rank faults).
#include "core/error.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "core/mpi_util.hpp"

namespace trident {

void fatal_all(const std::string& message) { throw UserError(message); }

void fatal_one_at(const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "[rank %d@%s] %s:%d: %s\n", world_rank(), host_name().c_str(), file, line,
               printable_message(message).c_str());
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, kExitFault);
  _exit(kExitFault);  // no MPI (or already finalized): nothing to abort, end this process now
}

void check_mpi_at(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fatal_one_at(file, line, std::string(call) + " failed: " + std::string(text, length));
}

}  // namespace trident
