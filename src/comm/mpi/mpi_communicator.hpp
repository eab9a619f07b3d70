// The communicator on MPI: our own ring and tree algorithms on MPI point-to-point, the
// collectives through memory shared by a node's ranks (Algo::Shm), and MPI's own collective
// (Algo::Mpi) for comparison.
//
// Every transfer is counted, in bytes sent and received, at the level of the cluster it
// crosses (node, rack, cross-rack: the level of the peer relative to this rank), and every wait
// has a deadline (the watchdog): a peer that never answers ends the job with the operation, the
// group and the peers still awaited, instead of a silent hang.
//
// When operations run (docs/COMMUNICATION.md): the collectives on model buffers (f32, bf16,
// fp16) run inside the call, on the calling thread, and return a complete Work — overlap
// comes from calling them on another host stream (comm/host_stream.hpp), the CPU counterpart
// of a communication stream; send, receive and the collectives of a few values (f64, i32,
// barrier) are posted in the call and completed by Work::wait() or Work::test(), under the
// watchdog.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/mpi/shared_window.hpp"
#include "comm/traffic.hpp"

namespace trident::comm {

// Shm: through memory shared by the group's ranks (comm/mpi/shared_window.hpp), when they are all
// on one host; otherwise the ring.
enum class Algo { Ring, Tree, Shm, Mpi };
Algo parse_algo(const std::string& name);  // "ring" | "tree" | "shm" | "mpi"
// into[0, n) = into op from, element-wise: the reduction step of every algorithm.
void combine(float* into, const float* from, size_t n, Op op);

// One pause of a wait that began at `since` (steady_seconds(), core/clock.hpp): a yield, or a
// short sleep in a patient thread (wait_patiently).
void pause_while_waiting(double since);

class MpiCommunicator final : public Communicator {
 public:
  // comm: the group; level_of_rank[i]: the level at which rank i of comm is from this rank;
  // name: for messages; timeout_s: the watchdog's deadline; kind: the per-group counter
  // (comm/traffic.hpp) its sent bytes also go to (Count: none); algo: the all-reduce's
  // algorithm through the interface (reduce-scatter and all-gather: Shm if algo is, else Ring).
  MpiCommunicator(MPI_Comm comm, std::vector<topo::Level> level_of_rank, std::string name,
                  double timeout_s, Traffic kind = Traffic::Count, Algo algo = Algo::Ring);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  // From now on the communicator frees `comm` when it is destroyed (one it was made over by
  // MPI_Comm_dup or a split: comm/world.cpp); otherwise `comm` stays its creator's.
  void own_handle() { owns_handle_ = true; }
  MPI_Comm handle() const { return comm_; }  // comm/mpi/native_handle.hpp's

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  LevelBytes traffic() const override { return traffic_; }
  Work all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) override;
  Work reduce_scatter(void* data, size_t count, DType dtype, Op op, Stream stream) override;
  Work all_gather(void* data, size_t count, DType dtype, Stream stream) override;
  Work broadcast(void* data, size_t count, DType dtype, int root, Stream stream) override;
  Work send(const void* data, size_t count, DType dtype, int peer, int tag, Stream stream) override;
  Work recv(void* data, size_t count, DType dtype, int peer, int tag, Stream stream) override;
  Work gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) override;
  Work all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) override;
  Work barrier(Stream stream) override;
  void observe_steps(StepObserver observer) override { observer_ = std::move(observer); }

  // The f32 algorithms by name, blocking: for the hierarchical collectives, commbench and the
  // tests. all_reduce_f32: any Algo; reduce_scatter_f32, all_gather_f32: Ring or Shm.
  void all_reduce_f32(float* data, size_t n, Algo algo, Op op = Op::Sum);
  void reduce_scatter_f32(float* data, size_t n, Algo algo = Algo::Ring, Op op = Op::Sum);
  void all_gather_f32(float* data, size_t n, Algo algo = Algo::Ring);
  // The same for elements of `width` bytes (2: bf16/fp16 values gathered as they are, half the
  // bytes of f32 on the wire): an all-gather moves values, it adds nothing.
  void all_gather_elements(void* data, size_t n, size_t width, Algo algo = Algo::Ring);
  topo::Level level_of(int peer) const { return level_of_rank_[peer]; }

  // The watchdog's wait: completes requests of this communicator, or aborts the job naming
  // `operation` and the `peers` still awaited.
  void wait_all(std::vector<MPI_Request>& requests, const char* operation, const std::vector<int>& peers);
  // The step of transfers just completed, to the observer (if any).
  void report(double start, const std::vector<std::pair<int, double>>& peer_bytes) const;

 private:
  void ring_reduce_scatter(float* data, size_t n, Op op);
  // The ring's reduce-scatter of 16-bit values (bf16, fp16) with 16-bit messages: at each hop the
  // partial sums received are widened, added in f32 to this rank's values and rounded to be sent
  // on (NCCL's way with 16-bit types): half the bytes of f32 on every link, and one rounding
  // per hop. Sums only.
  void ring_reduce_scatter_low16(uint16_t* data, size_t n, DType dtype);
  void ring_all_gather(char* data, size_t n, size_t width);
  void tree_all_reduce(float* data, size_t n, Op op);
  void tree_broadcast(void* data, size_t count, DType dtype, int root);
  // Shared memory (comm/mpi/shared_collectives.cpp), chunk by chunk through the window's buffers.
  bool shares_memory();  // creates the window at the first call (collective)
  void shm_all_reduce(float* data, size_t n, Op op);
  void shm_reduce_scatter(float* data, size_t n);
  void shm_all_gather(char* data, size_t n, size_t width);
  void shm_barrier(const char* operation);
  // The watchdog's verdict: prints what waited for whom, and aborts the job.
  [[noreturn]] void watchdog_expired(const char* operation, const std::vector<int>& peers) const;
  // Sends `count` floats to `to` and receives `count_in` from `from` (into `in`), in chunks,
  // adding the received values into `in` when reduce is set; waits under the watchdog.
  void exchange(const float* out, size_t count, int to, float* in, size_t count_in, int from,
                bool reduce, const char* operation, Op op = Op::Sum);
  // The same without reducing, for bytes: `bytes_out` from out to `to`, `bytes_in` from `from`.
  void exchange_bytes(const char* out, size_t bytes_out, int to, char* in, size_t bytes_in, int from,
                      const char* operation);
  // A Work for requests posted by an MPI non-blocking call; transfers: what to report at the
  // end (empty: nothing, for the uncounted collectives of a few values).
  Work pending(std::vector<MPI_Request> requests, const char* operation, std::vector<int> peers,
               double start, std::vector<std::pair<int, double>> transfers);
  std::vector<int> everyone_else() const;
  void count(int peer, double sent_bytes, double received_bytes);

  MPI_Comm comm_;
  bool owns_handle_ = false;
  int rank_ = 0, size_ = 1;
  std::vector<topo::Level> level_of_rank_;
  std::string name_;
  double timeout_s_;
  Traffic kind_;
  Algo algo_;
  LevelBytes traffic_;
  StepObserver observer_;
  std::vector<float> scratch_;  // a received chunk before it is added
  std::vector<float> wide_;     // a 16-bit segment widened to f32 for its reduction
  std::vector<uint16_t> landing16_;  // a 16-bit segment received
  std::unique_ptr<SharedWindow> shared_;  // Shm: the window, once created
  bool shared_checked_ = false;           // Shm: whether the window was tried
  uint64_t shm_epoch_ = 0;                // barriers passed through the window
  uint64_t shm_chunks_ = 0;               // chunks staged: buffer shm_chunks_ % 2 is next
};

// The MPI datatype of a DType's elements.
MPI_Datatype mpi_type(DType dtype);

}  // namespace trident::comm
