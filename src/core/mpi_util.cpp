// MPI session and identity helpers.
#include "core/mpi_util.hpp"

#include <mpi.h>

#include <unistd.h>

#include "core/error.hpp"

namespace trident {

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  // MULTIPLE: the data-parallel reducer's communication thread calls MPI while the main thread
  // computes (and, with tensor parallelism, communicates too). Where the library offers less,
  // the reducer runs without overlap (dp/reducer.cpp).
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int world_rank() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return -1;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return 0;
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

const std::string& host_name() {
  static const std::string name = [] {
    char buffer[256] = {0};
    if (gethostname(buffer, sizeof(buffer) - 1) != 0) return std::string("unknown-host");
    return std::string(buffer);
  }();
  return name;
}

}  // namespace trident
