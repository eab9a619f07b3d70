// The communicator interface every collective and point-to-point transfer of the program goes
// through: typed (buffer, count, DType, op) operations over one group of ranks, each started
// on an explicit Stream and returning a Work handle (comm/work.hpp). MpiCommunicator
// (comm/mpi/mpi_communicator.hpp) implements it on MPI, GroupCollectives (comm/group_collectives.hpp) over
// the levels of the cluster, EmulatedLinks (comm/wrappers/emulated_links.hpp) wraps any of them with the
// α-β link model; NcclCommunicator (comm/nccl/nccl_communicator.hpp) implements it on NCCL for
// device buffers (docs/COMMUNICATION.md).
//
// Element types: f32, bf16 and fp16 for the collectives on model buffers — a 16-bit reduction
// sums in f32 and rounds the result back once (16-bit storage, f32 arithmetic); f64 and i32
// for the few values exchanged per step (losses, squared norms, digests, figures). Nothing in
// this header knows MPI: callers outside comm/ see only this interface.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "comm/work.hpp"
#include "tensor/device.hpp"
#include "topo/topology.hpp"

namespace trident::comm {

enum class Op { Sum, Max };

struct LevelBytes {
  std::array<double, 3> sent{}, received{};  // indexed by topo::Level
};

// One step of an algorithm's transfers, as the link emulation sees it: begun at `start`
// (steady_seconds(), core/clock.hpp), with the bytes moved to or from a peer at each level.
struct TransferStep {
  double start = 0;
  std::vector<std::pair<topo::Level, double>> level_bytes;
};
// Called once a step's transfers are complete, on the thread that made them.
using StepObserver = std::function<void(const TransferStep&)>;

// [begin, end) of segment k when n elements are split over `parts` as evenly as possible: the
// part of a reduce-scatter's buffer rank k ends with, and of an all-gather's it contributes.
std::pair<size_t, size_t> segment_of(size_t n, int parts, int k);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // for messages ("data", "node level of data")
  virtual LevelBytes traffic() const = 0;        // everything this rank sent and received

  // In place: sum (or maximum) over the group. f32, bf16, fp16, and f64 / i32 (a few values).
  virtual Work all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) = 0;
  // In place: segment_of(count, size, r) ends summed (or maximised) on rank r; the other
  // segments are scratch afterwards. f32, bf16, fp16.
  virtual Work reduce_scatter(void* data, size_t count, DType dtype, Op op, Stream stream) = 0;
  // In place: rank r contributes segment_of(count, size, r); every rank ends with all of them.
  virtual Work all_gather(void* data, size_t count, DType dtype, Stream stream) = 0;
  // root's count elements to every rank, in place.
  virtual Work broadcast(void* data, size_t count, DType dtype, int root, Stream stream) = 0;
  virtual Work send(const void* data, size_t count, DType dtype, int peer, int tag, Stream stream) = 0;
  virtual Work recv(void* data, size_t count, DType dtype, int peer, int tag, Stream stream) = 0;
  // One step of a ring: `count` elements of `out` to rank `to` and as many into `in` from rank
  // `from`, both in flight at once; complete once both are. Every rank of the ring posts its
  // step this way. By default the receive and the send as they are (MPI's run side by side);
  // NCCL posts them in one group, where on one stream the send would wait for the receive.
  virtual Work send_recv(const void* out, void* in, size_t count, DType dtype, int to, int from, int tag,
                         Stream stream);
  // Out of place, a few values (f64, i32): rank r's `count` elements to out[r·count, (r+1)·count)
  // on root (gather; out is only read there) or on every rank (all_gather_values).
  virtual Work gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) = 0;
  virtual Work all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) = 0;
  // Complete once every rank of the group has started it.
  virtual Work barrier(Stream stream) = 0;
  // Complete once what this rank enqueued on `stream` so far has run — this group's operations
  // that their callers left to the stream (Work::leave_to_stream), recorded ones replayed by a
  // graph launch included — waited for under this group's watchdog. No communication. Where
  // operations complete inside their calls (MPI, staged), it is complete at once.
  virtual Work fence(Stream /*stream*/) { return Work{}; }

  // The link emulation's hook (comm/wrappers/emulated_links.hpp): from now on, every step of transfers
  // this communicator (and those it is made of) completes is reported to `observer`, which may
  // delay its completion. Empty: none.
  virtual void observe_steps(StepObserver observer) = 0;
};

// For the calling thread: while *overlapping is true, its waits sleep between polls after a
// short spin instead of yielding (see mpi_communicator.cpp); null: never. The gradient
// reduction's stream and the pipeline's receives wait patiently while computation runs on the
// same cores.
void wait_patiently(const std::atomic<bool>* overlapping);

}  // namespace trident::comm
