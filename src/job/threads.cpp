// OpenMP threads per rank: chosen before MPI starts, reported and checked after.
#include "job/threads.hpp"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/world.hpp"

namespace trident {
namespace {

// Set by settle_openmp_threads for the process it runs again, and read by report_threads.
constexpr const char* kChosenVar = "TRIDENT_OMP_CHOSEN";     // "1": OMP_NUM_THREADS is ours
constexpr const char* kPassiveVar = "TRIDENT_OMP_PASSIVE";   // "1": OMP_WAIT_POLICY is ours
constexpr const char* kRunAgainVar = "TRIDENT_OMP_SETTLED";  // "1": this process was run again

bool is_set(const char* name) {
  const char* value = std::getenv(name);
  return value && *value;
}

cpu_set_t affinity() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
    const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    for (long c = 0; c < cores && c < CPU_SETSIZE; ++c) CPU_SET(c, &mask);
  }
  return mask;
}

// The ranks of this host as the launcher tells them before MPI starts: Open MPI, MPICH's Hydra,
// or Slurm's tasks per node ("2(x3),1": the most of any node); 1 when launched alone.
int ranks_on_host_from_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (is_set(name)) return std::max(1, std::atoi(std::getenv(name)));
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (!is_set(name)) continue;
    int most = 1;
    const char* at = std::getenv(name);
    while (at) {
      most = std::max(most, std::atoi(at));
      at = std::strchr(at, ',');
      if (at) ++at;
    }
    return most;
  }
  return 1;
}

void run_again(char** argv) {
  setenv(kRunAgainVar, "1", 1);
  execv("/proc/self/exe", argv);  // returns only when it failed: go on with what OpenMP has
}

std::string plural(int n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

int cores_of_mask() {
  const cpu_set_t mask = affinity();
  return std::max(1, CPU_COUNT(&mask));
}

// The rule where the user has not chosen: the cores shared out between the host's ranks.
int cores_per_rank(int cores, int ranks) { return std::max(1, cores / std::max(1, ranks)); }

}  // namespace

void settle_openmp_threads(char** argv) {
  if (is_set(kRunAgainVar)) return;
  const int cores = cores_of_mask();
  const int ranks = ranks_on_host_from_launcher();
  if (!is_set("OMP_NUM_THREADS")) {
    const int threads = cores_per_rank(cores, ranks);
    setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
    setenv(kChosenVar, "1", 1);
    if (threads != cores) run_again(argv);  // OpenMP started with one thread per core of the mask
    return;
  }
  const int threads = std::max(1, std::atoi(std::getenv("OMP_NUM_THREADS")));
  if (threads > 1 && threads * ranks > cores && !is_set("OMP_WAIT_POLICY") && !is_set("GOMP_SPINCOUNT")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    setenv(kPassiveVar, "1", 1);
    run_again(argv);
  }
}

int openmp_threads_for(int ranks) {
  if (is_set("OMP_NUM_THREADS") && !is_set(kChosenVar)) return std::max(1, std::atoi(std::getenv("OMP_NUM_THREADS")));
  return cores_per_rank(cores_of_mask(), ranks);
}

ThreadReport report_threads(comm::Communicator& world) {
  const std::unique_ptr<comm::Communicator> host = comm::split_by_host(world, "host");
  const int host_size = host->size();
  // The affinity masks as 32-bit words, the element type of the values a communicator gathers.
  static_assert(sizeof(cpu_set_t) % sizeof(int32_t) == 0, "cpu_set_t in whole words");
  constexpr size_t kWords = sizeof(cpu_set_t) / sizeof(int32_t);
  const cpu_set_t mine = affinity();
  std::vector<cpu_set_t> masks(static_cast<size_t>(host_size));
  host->all_gather_values(&mine, masks.data(), kWords, DType::i32, Stream{}).wait();
  int32_t threads = omp_get_max_threads(), host_threads = threads;
  host->all_reduce(&host_threads, 1, DType::i32, comm::Op::Sum, Stream{}).wait();
  cpu_set_t all;
  CPU_ZERO(&all);
  for (cpu_set_t& m : masks) CPU_OR(&all, &all, &m);
  // The busiest host's figures on every rank: the one with the most threads per core.
  const int32_t figures[3] = {host_threads, std::max(1, CPU_COUNT(&all)), host_size};
  std::vector<int32_t> every(3 * static_cast<size_t>(world.size()));
  world.all_gather_values(figures, every.data(), 3, DType::i32, Stream{}).wait();
  ThreadReport report;
  int32_t rank0_threads = threads;
  world.broadcast(&rank0_threads, 1, DType::i32, 0, Stream{}).wait();
  report.per_rank = rank0_threads;
  report.chosen = is_set(kChosenVar);
  report.passive_waits = is_set(kPassiveVar);
  for (size_t r = 0; r < every.size(); r += 3)
    if (r == 0 || double(every[r]) / every[r + 1] > double(report.host_threads) / report.host_cores)
      report.host_threads = every[r], report.host_cores = every[r + 1], report.host_ranks = every[r + 2];
  return report;
}

std::string ThreadReport::header() const {
  std::string text = "threads: " + std::to_string(per_rank) + " OpenMP " + (per_rank == 1 ? "thread" : "threads") +
                     " per rank (" + (chosen ? "chosen: OMP_NUM_THREADS unset" : "OMP_NUM_THREADS") + "; " +
                     plural(host_ranks, "rank", "ranks") + " with " + plural(host_cores, "core", "cores") + " on the busiest host";
  if (oversubscribed() && per_rank == 1) text += ": more ranks than cores";
  if (oversubscribed() && per_rank > 1) text += ": " + std::to_string(host_threads) + " threads, oversubscribed";
  if (passive_waits) text += "; OpenMP waits passive";
  return text + ")";
}

std::vector<std::pair<std::string, std::string>> ThreadReport::attributes() const {
  return {{"threads.per_rank", std::to_string(per_rank)},
          {"threads.chosen", chosen ? "true" : "false"},
          {"threads.host_threads", std::to_string(host_threads)},
          {"threads.host_cores", std::to_string(host_cores)},
          {"threads.host_ranks", std::to_string(host_ranks)}};
}

std::string ThreadReport::warning() const {
  if (!oversubscribed() || per_rank == 1) return "";
  const int fair = std::max(1, host_cores / host_ranks);
  return "warning: OMP_NUM_THREADS = " + std::to_string(per_rank) + " with " + plural(host_ranks, "rank", "ranks") +
         " on a host of " + plural(host_cores, "core", "cores") + " (in their affinity masks) makes " +
         std::to_string(host_threads) + " threads: oversubscribed, each step waits for threads that have no core (measured "
         "10-250x slower); unset OMP_NUM_THREADS and trident takes " + std::to_string(fair) +
         " per rank, or set at most " + std::to_string(fair) + (passive_waits ? "" : ", or OMP_WAIT_POLICY = passive");
}

}  // namespace trident
