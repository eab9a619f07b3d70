// The MPI session and this process's identity (its world rank, for messages); communication
// goes through comm/ (comm/world.hpp, comm/agreement.hpp).
#pragma once


#include <string>

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
const std::string& host_name();  // gethostname (what MPI_Get_processor_name gives with Open MPI)

}  // namespace trident
