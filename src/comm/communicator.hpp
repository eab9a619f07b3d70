// The communicator interface every collective of the program goes through: all-reduce,
// reduce-scatter, all-gather, broadcast, send/recv over one group of ranks. This MPI
// implementation runs our own ring and tree algorithms on MPI point-to-point (MPI's own
// collective stays available as Algo::Mpi for comparison); an NCCL one can sit behind the same
// interface (docs/COMMUNICATION.md).
//
// Every transfer is counted, in bytes sent and received, at the level of the cluster it
// crosses (node, rack, cross-rack: the level of the peer relative to this rank), and every wait
// has a deadline (the watchdog): a peer that never answers ends the job with the operation, the
// group and the peers still awaited, instead of a silent hang.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/shared_window.hpp"
#include "comm/traffic.hpp"
#include "topo/topology.hpp"

namespace trident::comm {

// Shm: through memory shared by the group's ranks (comm/shared_window.hpp), when they are all
// on one host; otherwise the ring.
enum class Algo { Ring, Tree, Shm, Mpi };
enum class Op { Sum, Max };
Algo parse_algo(const std::string& name);  // "ring" | "tree" | "shm" | "mpi"
// into[0, n) = into op from, element-wise: the reduction step of every algorithm.
void combine(float* into, const float* from, size_t n, Op op);

// For the calling thread, a background one: while *overlapping is true, its waits sleep between
// polls after a short spin instead of yielding (see communicator.cpp); null: never.
void wait_patiently(const std::atomic<bool>* overlapping);
// One pause of a wait that began at `since` (steady_seconds(), core/clock.hpp): a yield, or a
// short sleep in a patient thread.
void pause_while_waiting(double since);

struct LevelBytes {
  std::array<double, 3> sent{}, received{};  // indexed by topo::Level
};

// The α-β link model of single-host emulation: a transfer of b bytes at a level takes at least
// latency + b / bandwidth (the real copy counts towards it); levels left off are not slowed.
struct LinkModel {
  std::array<double, 3> latency_s{}, bandwidth_Bps{};  // by topo::Level; bandwidth 0 = off
  bool enabled(int level) const { return bandwidth_Bps[level] > 0; }
  double seconds(int level, double bytes) const {
    return enabled(level) ? latency_s[level] + bytes / bandwidth_Bps[level] : 0.0;
  }
};
// "LATENCY_US,BANDWIDTH_GBPS" or "off"; throws std::invalid_argument.
void parse_link(const std::string& text, LinkModel& model, int level);

class Communicator {
 public:
  // comm: the group; level_of_rank[i]: the level at which rank i of comm is from this rank;
  // name: for messages ("data", "node of data", …); timeout_s: the watchdog's deadline;
  // kind: the per-group counter (comm/traffic.hpp) its sent bytes also go to (Count: none).
  Communicator(MPI_Comm comm, std::vector<topo::Level> level_of_rank, std::string name,
               double timeout_s, const LinkModel& links = {}, Traffic kind = Traffic::Count);
  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm mpi() const { return comm_; }
  const std::string& name() const { return name_; }

  // Sum (or maximum) over the group, in place, n floats.
  void all_reduce(float* data, size_t n, Algo algo, Op op = Op::Sum);
  // Segment r of the balanced split of n (segment_of) ends summed on rank r, in place; the
  // other segments are scratch afterwards. algo: Ring or Shm.
  void reduce_scatter(float* data, size_t n, Algo algo = Algo::Ring);
  // Rank r contributes segment r; every rank ends with all segments. algo: Ring or Shm.
  void all_gather(float* data, size_t n, Algo algo = Algo::Ring);
  void broadcast(float* data, size_t n, int root);
  // A few values in double precision (the loss, squared gradient norms, validation sums): MPI's
  // non-blocking collective under this communicator's watchdog (a device backend reduces them
  // where they were computed). Not in the byte counts: MPI does not say what it sent, and a few
  // bytes per step would blur the exact per-level figures the tests hold to their formulas.
  // Sum (or maximum), in place.
  void all_reduce_scalars(double* values, int n, Op op = Op::Sum);
  void broadcast_scalars(double* values, int n, int root);
  void send(const float* data, size_t n, int peer, int tag);
  void recv(float* data, size_t n, int peer, int tag);
  // A non-blocking send (counted now); complete it with wait().
  MPI_Request isend(const float* data, size_t n, int peer, int tag);
  // Completes a request of this communicator under the watchdog (MPI_REQUEST_NULL: no-op).
  void wait(MPI_Request& request, const char* operation, int peer);

  // [begin, end) of segment k when n elements are split over `parts` as evenly as possible.
  static std::pair<size_t, size_t> segment_of(size_t n, int parts, int k);

  const LevelBytes& traffic() const { return traffic_; }

 private:
  void ring_reduce_scatter(float* data, size_t n, Op op);
  void ring_all_gather(float* data, size_t n);
  void tree_all_reduce(float* data, size_t n, Op op);
  // Shared memory (comm/shared_collectives.cpp), chunk by chunk through the window's buffers.
  bool shares_memory();  // creates the window at the first call (collective)
  void shm_all_reduce(float* data, size_t n, Op op);
  void shm_reduce_scatter(float* data, size_t n);
  void shm_all_gather(float* data, size_t n);
  void shm_barrier(const char* operation);
  // The watchdog's verdict: prints what waited for whom, and aborts the job.
  [[noreturn]] void watchdog_expired(const char* operation, const std::vector<int>& peers) const;
  // Sends `count` floats to `to` and receives `count_in` from `from` (into `in`), in chunks,
  // adding the received values into `in` when reduce is set; waits under the watchdog.
  void exchange(const float* out, size_t count, int to, float* in, size_t count_in, int from,
                bool reduce, const char* operation, Op op = Op::Sum);
  void wait_all(std::vector<MPI_Request>& requests, const char* operation,
                const std::vector<int>& peers);
  // The link model: the transfers just completed, begun at `start`, to and from these peers
  // with these byte counts, take at least what the model says.
  void emulate(double start, const std::vector<std::pair<int, double>>& peer_bytes) const;
  void count(int peer, size_t sent_floats, size_t received_floats);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<topo::Level> level_of_rank_;
  std::string name_;
  double timeout_s_;
  LinkModel links_;
  Traffic kind_;
  LevelBytes traffic_;
  std::vector<float> scratch_;  // a received chunk before it is added
  std::unique_ptr<SharedWindow> shared_;  // Shm: the window, once created
  bool shared_checked_ = false;           // Shm: whether the window was tried
  uint64_t shm_epoch_ = 0;                // barriers passed through the window
  uint64_t shm_chunks_ = 0;               // chunks staged: buffer shm_chunks_ % 2 is next
};

}  // namespace trident::comm
