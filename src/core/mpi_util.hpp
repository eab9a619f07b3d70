// Small MPI helpers used everywhere: the MPI session, this rank's identity, string broadcast.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace trident {

// RAII for MPI_Init/MPI_Finalize. Installs MPI_ERRORS_RETURN on MPI_COMM_WORLD so that every
// MPI failure reaches MPI_CHECK (and its message) instead of MPI's silent default abort.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

int world_rank();             // -1 before MPI_Init
int world_size();             // 0 before MPI_Init
const std::string& host_name();  // MPI_Get_processor_name, or gethostname before MPI_Init

// Broadcast a string of any length from `root` (two messages: size, bytes).
void broadcast_string(std::string& text, int root, MPI_Comm comm);

// Every rank contributes one string; every rank receives all of them, in rank order.
std::vector<std::string> allgather_strings(const std::string& mine, MPI_Comm comm);

}  // namespace trident
