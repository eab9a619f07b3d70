// MPI session and identity helpers.
#include "core/mpi_util.hpp"

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

void broadcast_string(std::string& text, int root, MPI_Comm comm) {
  unsigned long long size = text.size();
  MPI_CHECK(MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG_LONG, root, comm));
  text.resize(size);
  if (size > 0) MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, root, comm));
}

std::vector<std::string> allgather_strings(const std::string& mine, MPI_Comm comm) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  int my_length = static_cast<int>(mine.size());
  std::vector<int> lengths(size), offsets(size, 0);
  MPI_CHECK(MPI_Allgather(&my_length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  for (int r = 1; r < size; ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
  std::string all(offsets[size - 1] + lengths[size - 1], '\0');
  MPI_CHECK(MPI_Allgatherv(mine.data(), my_length, MPI_CHAR, all.data(), lengths.data(),
                           offsets.data(), MPI_CHAR, comm));
  std::vector<std::string> result(size);
  for (int r = 0; r < size; ++r) result[r] = all.substr(offsets[r], lengths[r]);
  return result;
}

}  // namespace trident
