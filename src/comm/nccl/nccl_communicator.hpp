// The communicator on NCCL (built where NCCL is, TRIDENT_NCCL): the Communicator interface on
// device buffers, each operation enqueued on the cudaStream_t of its Stream argument and its
// Work a CUDA event recorded after it.
//
// Created from an MPI communicator: its rank 0 makes an ncclUniqueId and broadcasts it over
// MPI, every member calls ncclCommInitRankConfig with the level's ncclConfig_t
// (comm/nccl/nccl_settings.hpp). Non-blocking (config.blocking = 0), so that no NCCL call can hang
// the thread: a call answering ncclInProgress is waited out under the watchdog.
//
// The watchdog: every wait polls the event (cudaEventQuery) and the communicator's
// asynchronous error (ncclCommGetAsyncError); an error ends the job naming NCCL's reason, and
// an operation still running after comm.timeout_s aborts the communicators (ncclCommAbort, which
// frees a kernel stuck waiting for a peer) and ends the job with the MPI communicator's message:
// the operation, the group and the peers.
//
// Point-to-point (the pipeline's messages; options.point_to_point): NCCL matches a pair's
// messages in the order they are posted on a communicator, and an ncclSend occupies its stream
// until the peer receives. Activations flow to higher stages while gradients flow to lower
// ones, so each direction has a communicator and a stream of its own: `up` carries messages to
// higher ranks, `down` to lower ones. Tags are not sent: messages between two ranks in one
// direction match in posting order, which is how the pipeline posts them.
#pragma once

#if TRIDENT_NCCL

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/nccl/nccl_settings.hpp"
#include "comm/traffic.hpp"

namespace trident::comm {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `comm` (not owned; it must outlive this). The device is the calling
  // thread's current one.
  NcclCommunicator(MPI_Comm comm, std::vector<topo::Level> level_of_rank, const NcclCommOptions& options,
                   double timeout_s, Traffic kind);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

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
  // Both on the up communicator, in one group (docs/COMMUNICATION.md, "Point to point").
  Work send_recv(const void* out, void* in, size_t count, DType dtype, int to, int from, int tag,
                 Stream stream) override;
  Work gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) override;
  Work all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) override;
  Work barrier(Stream stream) override;
  Work fence(Stream stream) override;  // an event on the stream, waited for under the watchdog
  // NCCL does not report its steps: the link emulation (an MPI-only tool) does not apply.
  void observe_steps(StepObserver) override {}

  // The watchdog's wait for `done`, recorded after `operation` (which awaits `peers`).
  void wait_for(cudaEvent_t done, const char* operation, const std::vector<int>& peers);
  // Whether `done` has happened; an asynchronous NCCL error ends the job.
  bool happened(cudaEvent_t done, const char* operation);

 private:
  ncclComm_t create(const NcclCommOptions& options);  // collective over mpi_
  // Both directions to both pipeline neighbours, and up_'s ring closed (send_recv's last rank to
  // rank 0), at construction.
  void connect_neighbours();
  // A call's result: ncclInProgress waited out under the watchdog, an error ends the job.
  void settle(ncclComm_t comm, ncclResult_t result, const char* operation);
  void check_async(const char* operation);
  [[noreturn]] void expire(const char* operation, const std::vector<int>& peers);
  [[noreturn]] void failed(ncclComm_t comm, ncclResult_t result, const char* operation) const;
  // The Work of what was just enqueued on `stream`: an event recorded after it — or, while the
  // stream is being captured into a graph (cuda.graphs), none: the operation is recorded, not
  // run (it runs at each launch of the graph, which a later fence covers), and an event
  // recorded in a capture cannot be waited for from the host.
  // `follower`: the caller's stream for an operation on another (point-to-point), which waits
  // for it when the Work is left to the stream.
  Work enqueued(cudaStream_t stream, const char* operation, std::vector<int> peers,
                std::optional<cudaStream_t> follower = std::nullopt);
  // Sends and receives of one operation inside one NCCL group call.
  void grouped(ncclComm_t comm, const char* operation, const std::function<void()>& calls);
  std::vector<int> everyone_else() const;
  void count(int peer, double sent_bytes, double received_bytes);
  void count_ring(double bytes_each_way);  // a ring's traffic: to the right, from the left

  MPI_Comm mpi_;
  int device_ = 0;  // the CUDA device its communicators, streams and events live on
  int rank_ = 0, size_ = 1;
  std::vector<topo::Level> level_of_rank_;
  std::vector<int> world_of_rank_;  // for the watchdog's message
  std::string name_;
  double timeout_s_;
  Traffic kind_;
  LevelBytes traffic_;
  ncclComm_t comm_ = nullptr;                  // the collectives
  ncclComm_t up_ = nullptr, down_ = nullptr;   // point-to-point, to higher / lower ranks
  cudaStream_t up_stream_ = nullptr, down_stream_ = nullptr;
  int* barrier_word_ = nullptr;                // device memory: the barrier's all-reduce
};

}  // namespace trident::comm

#endif  // TRIDENT_NCCL
