// The typed operations of the Communicator interface on MPI: the dtypes mapped onto the
// algorithms (f32 sums by comm.node_algo's; 16-bit ones by the ring with 16-bit messages; an
// all-gather of any element width), point-to-point and the collectives of
// a few values posted as MPI non-blocking calls whose Work completes them under the watchdog.
#include <stdexcept>

#include "comm/mpi/mpi_communicator.hpp"
#include "comm/wrappers/widen.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"

namespace trident::comm {

// Requests posted by one operation: completed (and their transfers reported to the link
// emulation) by test() or wait(), the latter under the communicator's watchdog.
class RequestWork final : public PendingWork {
 public:
  RequestWork(MpiCommunicator& owner, std::vector<MPI_Request> requests, const char* operation,
              std::vector<int> peers, double start, std::vector<std::pair<int, double>> transfers)
      : owner_(owner), requests_(std::move(requests)), operation_(operation), peers_(std::move(peers)),
        start_(start), transfers_(std::move(transfers)) {}
  bool test() override {
    int done = 0;
    MPI_CHECK(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
    if (done) finish();
    return done != 0;
  }
  void wait() override {
    owner_.wait_all(requests_, operation_, peers_);
    finish();
  }

 private:
  void finish() {
    if (!transfers_.empty()) owner_.report(start_, transfers_);
  }
  MpiCommunicator& owner_;
  std::vector<MPI_Request> requests_;
  const char* operation_;
  std::vector<int> peers_;
  double start_;
  std::vector<std::pair<int, double>> transfers_;
};

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::bf16:
    case DType::fp16: return MPI_UINT16_T;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT;
  }
  return MPI_DATATYPE_NULL;
}

namespace {

bool reducible(DType dtype) { return dtype == DType::f32 || is_16bit(dtype); }
bool few_values(DType dtype) { return dtype == DType::f64 || dtype == DType::i32; }

void require_host(const Stream& stream, const char* operation) {
  REQUIRE(stream.device.is_cpu(), operation << ": the MPI communicator works on host memory (stream on the CPU)");
}

}  // namespace

Work MpiCommunicator::pending(std::vector<MPI_Request> requests, const char* operation, std::vector<int> peers,
                              double start, std::vector<std::pair<int, double>> transfers) {
  return Work(std::make_unique<RequestWork>(*this, std::move(requests), operation, std::move(peers), start,
                                            std::move(transfers)));
}

std::vector<int> MpiCommunicator::everyone_else() const {
  std::vector<int> peers;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) peers.push_back(r);
  return peers;
}

Work MpiCommunicator::all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) {
  require_host(stream, "all-reduce");
  if (size_ == 1 || count == 0) return Work();
  if (few_values(dtype)) {
    // MPI's own collective: not in the byte counts (MPI does not say what it sent, and a few
    // bytes per step would blur the exact per-level figures the tests hold to their formulas).
    std::vector<MPI_Request> requests(1);
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type(dtype),
                             op == Op::Sum ? MPI_SUM : MPI_MAX, comm_, &requests[0]));
    return pending(std::move(requests), "all-reduce (scalars)", everyone_else(), 0, {});
  }
  REQUIRE(reducible(dtype), "all-reduce of " << dtype_name(dtype));
  if (is_16bit(dtype)) {  // 16-bit messages: the ring, whatever the algorithm
    REQUIRE(op == Op::Sum, "all-reduce of " << dtype_name(dtype) << ": sums only");
    ring_reduce_scatter_low16(static_cast<uint16_t*>(data), count, dtype);
    all_gather_elements(data, count, dtype_size(dtype), Algo::Ring);
    return Work();
  }
  all_reduce_f32(static_cast<float*>(data), count, algo_, op);
  return Work();
}

Work MpiCommunicator::reduce_scatter(void* data, size_t count, DType dtype, Op op, Stream stream) {
  require_host(stream, "reduce-scatter");
  REQUIRE(reducible(dtype), "reduce-scatter of " << dtype_name(dtype));
  if (is_16bit(dtype)) {
    REQUIRE(op == Op::Sum, "reduce-scatter of " << dtype_name(dtype) << ": sums only");
    if (size_ > 1 && count > 0) ring_reduce_scatter_low16(static_cast<uint16_t*>(data), count, dtype);
    return Work();
  }
  const Algo algo = algo_ == Algo::Shm ? Algo::Shm : Algo::Ring;
  reduce_scatter_f32(static_cast<float*>(data), count, algo, op);
  return Work();
}

Work MpiCommunicator::all_gather(void* data, size_t count, DType dtype, Stream stream) {
  require_host(stream, "all-gather");
  REQUIRE(reducible(dtype), "all-gather of " << dtype_name(dtype));
  const Algo algo = algo_ == Algo::Shm ? Algo::Shm : Algo::Ring;
  all_gather_elements(data, count, dtype_size(dtype), algo);  // 16-bit values as they are: nothing is added
  return Work();
}

Work MpiCommunicator::broadcast(void* data, size_t count, DType dtype, int root, Stream stream) {
  require_host(stream, "broadcast");
  if (size_ == 1 || count == 0) return Work();
  if (few_values(dtype)) {
    std::vector<MPI_Request> requests(1);
    MPI_CHECK(MPI_Ibcast(data, static_cast<int>(count), mpi_type(dtype), root, comm_, &requests[0]));
    return pending(std::move(requests), "broadcast (scalars)", {root}, 0, {});
  }
  tree_broadcast(data, count, dtype, root);
  return Work();
}

Work MpiCommunicator::send(const void* data, size_t count, DType dtype, int peer, int tag, Stream stream) {
  require_host(stream, "send");
  const double bytes = static_cast<double>(count) * dtype_size(dtype);
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Isend(data, static_cast<int>(count), mpi_type(dtype), peer, tag, comm_, &requests[0]));
  this->count(peer, bytes, 0);
  // Not a step for the link model: the receiver's completion carries the transfer's time (a
  // send is complete once its buffer may be reused), so a message is not delayed twice.
  return pending(std::move(requests), "send", {peer}, 0, {});
}

Work MpiCommunicator::recv(void* data, size_t count, DType dtype, int peer, int tag, Stream stream) {
  require_host(stream, "receive");
  const double start = steady_seconds(), bytes = static_cast<double>(count) * dtype_size(dtype);
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Irecv(data, static_cast<int>(count), mpi_type(dtype), peer, tag, comm_, &requests[0]));
  this->count(peer, 0, bytes);
  return pending(std::move(requests), "receive", {peer}, start, {{peer, bytes}});
}

Work MpiCommunicator::gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) {
  require_host(stream, "gather");
  REQUIRE(few_values(dtype), "gather of " << dtype_name(dtype) << " (a few values: f64 or i32)");
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Igather(in, static_cast<int>(count), mpi_type(dtype), out, static_cast<int>(count),
                        mpi_type(dtype), root, comm_, &requests[0]));
  return pending(std::move(requests), "gather", rank_ == root ? everyone_else() : std::vector<int>{root}, 0, {});
}

Work MpiCommunicator::all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) {
  require_host(stream, "all-gather (values)");
  REQUIRE(few_values(dtype), "all-gather of " << dtype_name(dtype) << " values (a few values: f64 or i32)");
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Iallgather(in, static_cast<int>(count), mpi_type(dtype), out, static_cast<int>(count),
                           mpi_type(dtype), comm_, &requests[0]));
  return pending(std::move(requests), "all-gather (values)", everyone_else(), 0, {});
}

Work MpiCommunicator::barrier(Stream stream) {
  require_host(stream, "barrier");
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Ibarrier(comm_, &requests[0]));
  return pending(std::move(requests), "barrier", everyone_else(), 0, {});
}

}  // namespace trident::comm
