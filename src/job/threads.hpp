// OpenMP threads per rank, from the cores a rank may use and the ranks that share them.
//
// libgomp reads OMP_NUM_THREADS and OMP_WAIT_POLICY once, when it loads, and starts as many
// threads as the rank's affinity mask has cores: with k ranks of a host each unbound, that is k
// times too many, and OpenMP's spinning waits then take whole time slices from the other ranks
// (measured on 2 cores, 2 ranks: 2.7-4.3 s a step instead of 17 ms). As LAMMPS and GROMACS
// do, Trident derives the count when the user has not set it — the cores of the rank's mask
// over the ranks of its host that share them — says it in the run header, warns when the
// user's own setting oversubscribes the host, and makes OpenMP's waits passive then.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"

namespace trident {

// Before MPI starts (main's first statement): OMP_NUM_THREADS unset -> the cores of this
// rank's affinity mask over the ranks of its host (from the launcher's environment: Open MPI,
// MPICH, Slurm; 1 when launched alone); set by the user and oversubscribing with OMP_WAIT_POLICY
// unset -> OMP_WAIT_POLICY = passive. Either is given to OpenMP by running this program again
// (execv of /proc/self/exe, once) when it differs from what OpenMP started with.
void settle_openmp_threads(char** argv);

// The OpenMP threads a rank of `ranks` on this host runs with: OMP_NUM_THREADS where the user set
// it, else the cores of this process's affinity mask over them (settle_openmp_threads' rule). The
// planner's per-thread workspaces of a layout on this host.
int openmp_threads_for(int ranks);

// What each rank runs with, agreed over the job's ranks (collective over `world`, every rank).
struct ThreadReport {
  int per_rank = 1;         // OpenMP threads of rank 0
  bool chosen = true;       // false: OMP_NUM_THREADS was the user's
  int host_threads = 1;     // of the busiest host: its ranks' threads together
  int host_cores = 1;       // the cores their affinity masks hold together
  int host_ranks = 1;
  bool passive_waits = false;  // OMP_WAIT_POLICY = passive set by settle_openmp_threads
  bool oversubscribed() const { return host_threads > host_cores; }
  std::string header() const;   // "threads: 1 per rank (...)"
  std::string warning() const;  // "" unless oversubscribed
  // As metrics.h5 attributes ("threads.per_rank", …), which trident doctor's threads rule reads.
  std::vector<std::pair<std::string, std::string>> attributes() const;
};
ThreadReport report_threads(comm::Communicator& world);

}  // namespace trident
