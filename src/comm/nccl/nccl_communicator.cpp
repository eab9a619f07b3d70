// The Communicator interface on NCCL: creation from an MPI communicator, the operations on
// device streams, and the watchdog around CUDA events and NCCL's asynchronous errors.
#include "comm/nccl/nccl_communicator.hpp"

#if TRIDENT_NCCL

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "comm/mpi/mpi_communicator.hpp"
#include "comm/watchdog.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/mpi_util.hpp"

namespace trident::comm {
namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::fp16: return ncclFloat16;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(Op op) { return op == Op::Sum ? ncclSum : ncclMax; }

// Aborting frees the kernels that wait for a peer, so that the process can end at all (a kernel
// spinning on a peer would hold the device's teardown). But ncclCommAbort can itself wait for
// ranks that never abort (NVIDIA/nccl#863): it runs on a thread of its own, and the watchdog goes
// on to its message and the job's end after `seconds` whether or not it has returned.
constexpr double kAbortSeconds = 10;
void abort_within(std::vector<ncclComm_t> comms, int device, double seconds) {
  auto finished = std::make_shared<std::promise<void>>();
  std::future<void> done = finished->get_future();
  std::thread([comms, device, finished] {
    cudaSetDevice(device);
    for (ncclComm_t c : comms)
      if (c) ncclCommAbort(c);
    finished->set_value();
  }).detach();
  done.wait_for(std::chrono::duration<double>(seconds));
}

cudaStream_t device_stream(const Stream& stream, const char* operation) {
  REQUIRE(!stream.device.is_cpu(), operation << " on an NCCL communicator: NCCL communicates device memory, "
                                                "and this call came with the CPU's stream");
  return static_cast<cudaStream_t>(stream.handle);
}

void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fatal_one(std::string(what) + ": " + cudaGetErrorString(status));
}

char* bytes(void* data) { return static_cast<char*>(data); }

// The communicator's device made current for the scope of a call, the caller's restored after:
// the current device is per thread, and a stream's events must be made on its device — the
// gradient reducer's thread starts on device 0 whatever its rank's GPU.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaGetDevice(&previous_);
    if (previous_ != device) cuda_check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace

// An operation enqueued on a stream: complete when the event recorded after it has happened.
// A point-to-point one runs on its direction's stream, not the caller's: left to the stream
// (let_go), the caller's stream waits for it there and then, so that what the caller enqueued
// between posting and letting go — the GEMM on the ring's block already here, the ring
// attention's current blocks — runs beside the transfer. (The event may be destroyed while a
// stream waits on it: CUDA keeps what the wait needs.)
class EventWork final : public PendingWork {
 public:
  EventWork(NcclCommunicator& owner, cudaEvent_t done, const char* operation, std::vector<int> peers,
            std::optional<cudaStream_t> follower)
      : owner_(owner), done_(done), operation_(operation), peers_(std::move(peers)), follower_(follower) {}
  ~EventWork() override { cudaEventDestroy(done_); }
  bool test() override { return owner_.happened(done_, operation_); }
  void wait() override { owner_.wait_for(done_, operation_, peers_); }
  bool stream_ordered() const override { return true; }
  void let_go() override {
    if (follower_) cuda_check(cudaStreamWaitEvent(*follower_, done_, 0), "cudaStreamWaitEvent");
  }

 private:
  NcclCommunicator& owner_;
  cudaEvent_t done_;
  const char* operation_;
  std::vector<int> peers_;
  // The caller's stream, for an operation on another one; else none. Not null for none: null is
  // CUDA's legacy default stream, the model's stream without cuda.graphs, which does not wait for
  // the non-blocking direction streams by itself.
  std::optional<cudaStream_t> follower_;
};

NcclCommunicator::NcclCommunicator(MPI_Comm comm, std::vector<topo::Level> level_of_rank,
                                   const NcclCommOptions& options, double timeout_s, Traffic kind)
    : mpi_(comm), level_of_rank_(std::move(level_of_rank)), name_(options.name), timeout_s_(timeout_s),
      kind_(kind) {
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  REQUIRE(static_cast<int>(level_of_rank_.size()) == size_, "one level per rank of " << name_);
  cuda_check(cudaGetDevice(&device_), "cudaGetDevice");
  world_of_rank_.resize(size_);
  const int me = world_rank();
  MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, world_of_rank_.data(), 1, MPI_INT, comm));
  comm_ = create(options);
  if (options.point_to_point) {
    up_ = create(options);
    down_ = create(options);
    cuda_check(cudaStreamCreateWithFlags(&up_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaStreamCreateWithFlags(&down_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  // [0]: the barrier's all-reduce; [1..4]: the words connect_neighbours exchanges.
  cuda_check(cudaMalloc(&barrier_word_, 5 * sizeof(int)), "cudaMalloc (barrier)");
  cuda_check(cudaMemset(barrier_word_, 0, 5 * sizeof(int)), "cudaMemset (barrier)");
  if (options.point_to_point) connect_neighbours();
}

// NCCL connects two ranks at their first send and receive, and that first call waits on the
// host for the peer's matching one: two neighbours whose first calls go different ways (one
// sends its activation on up_ while the other sends a gradient on down_) would each wait for the
// other's handshake until the watchdog ended the run. So every connection the pipeline uses —
// to each neighbour, in both directions — is made here, each direction a shift in one group
// (its sends and receives posted together), and waited for under the watchdog. The up shift is a
// whole ring, rank size − 1 to rank 0 included: the connection send_recv's ring steps use there.
void NcclCommunicator::connect_neighbours() {
  const std::pair<ncclComm_t, cudaStream_t> directions[] = {{up_, up_stream_}, {down_, down_stream_}};
  for (int d = 0; d < 2; ++d) {
    const auto [comm, stream] = directions[d];
    const int to = d == 0 ? (rank_ + 1) % size_ : rank_ - 1, from = d == 0 ? (rank_ + size_ - 1) % size_ : rank_ + 1;
    int* send_word = barrier_word_ + 1 + 2 * d;
    const auto connects = [&](int peer) { return peer >= 0 && peer < size_ && peer != rank_; };
    grouped(comm, "connecting point-to-point", [&] {
      if (connects(to)) settle(comm, ncclSend(send_word, 1, ncclInt32, to, comm, stream), "connecting point-to-point");
      if (connects(from))
        settle(comm, ncclRecv(send_word + 1, 1, ncclInt32, from, comm, stream), "connecting point-to-point");
    });
    std::vector<int> peers;
    if (connects(to)) peers.push_back(to);
    if (connects(from) && from != to) peers.push_back(from);
    enqueued(stream, "connecting point-to-point", peers).wait();
  }
}

// Finalize (which flushes what is in flight and may answer ncclInProgress: waited out under the
// watchdog), then destroy, after which the handle must not be touched again.
NcclCommunicator::~NcclCommunicator() {
  const DeviceScope scope(device_);
  for (ncclComm_t* c : {&comm_, &up_, &down_}) {
    if (!*c) continue;
    settle(*c, ncclCommFinalize(*c), "finalisation");
    ncclCommDestroy(*c);
    *c = nullptr;
  }
  for (cudaStream_t s : {up_stream_, down_stream_})
    if (s) cudaStreamDestroy(s);
  if (barrier_word_) cudaFree(barrier_word_);
}

// Rank 0 makes the id, MPI carries it to the others: the only use of MPI after creation is
// the world-rank table of the watchdog's message.
ncclComm_t NcclCommunicator::create(const NcclCommOptions& options) {
  ncclUniqueId id{};
  if (rank_ == 0 && ncclGetUniqueId(&id) != ncclSuccess)
    fatal_one("ncclGetUniqueId for the " + name_ + " group failed; is the network interface usable? (NCCL_DEBUG=WARN says more)");
  MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi_));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns; the watchdog waits out ncclInProgress
  config.commName = name_.c_str();
  if (options.collnet) config.collnetEnable = 1;  // unset otherwise: NCCL_COLLNET_ENABLE stands
  ncclComm_t comm = nullptr;
  // The call first, then settle with the comm it wrote: as two arguments of one call their order
  // would be the compiler's, and comm could be read still null.
  const ncclResult_t started = ncclCommInitRankConfig(&comm, size_, id, rank_, &config);
  settle(comm, started, "initialisation");
  return comm;
}

void NcclCommunicator::failed(ncclComm_t comm, ncclResult_t result, const char* operation) const {
  const char* detail = comm ? ncclGetLastError(comm) : nullptr;
  fatal_one("NCCL " + std::string(operation) + " on the " + name_ + " group (" + std::to_string(size_) +
            " ranks) failed: " + ncclGetErrorString(result) + (detail && *detail ? std::string(" (") + detail + ")" : "") +
            "; NCCL_DEBUG=WARN prints NCCL's own account, and comm.backend = mpi avoids NCCL");
}

void NcclCommunicator::settle(ncclComm_t comm, ncclResult_t result, const char* operation) {
  const double begin = steady_seconds(), deadline = begin + timeout_s_;
  while (result == ncclInProgress && comm) {
    if (ncclCommGetAsyncError(comm, &result) != ncclSuccess) break;
    if (result != ncclInProgress) break;
    if (steady_seconds() > deadline) expire(operation, everyone_else());
    pause_while_waiting(begin);
  }
  if (result != ncclSuccess) failed(comm, result, operation);
}

void NcclCommunicator::check_async(const char* operation) {
  for (ncclComm_t c : {comm_, up_, down_}) {
    ncclResult_t state = ncclSuccess;
    if (c && ncclCommGetAsyncError(c, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
      failed(c, state, operation);
  }
}

void NcclCommunicator::expire(const char* operation, const std::vector<int>& peers) {
  std::vector<std::pair<int, int>> awaited;
  for (int peer : peers) awaited.emplace_back(peer, world_of_rank_[peer]);
  const std::string message = watchdog_message(std::string(operation) + " (NCCL)", name_, size_, timeout_s_, awaited);
  abort_within({comm_, up_, down_}, device_, kAbortSeconds);
  comm_ = up_ = down_ = nullptr;
  fatal_one(message);
}

bool NcclCommunicator::happened(cudaEvent_t done, const char* operation) {
  const cudaError_t status = cudaEventQuery(done);
  if (status == cudaSuccess) return true;
  if (status != cudaErrorNotReady) cuda_check(status, operation);
  cudaGetLastError();  // "not ready" is no error: none left for the next launch's check (as PyTorch's events do)
  check_async(operation);
  return false;
}

void NcclCommunicator::wait_for(cudaEvent_t done, const char* operation, const std::vector<int>& peers) {
  const double begin = steady_seconds(), deadline = begin + timeout_s_;
  while (!happened(done, operation)) {
    if (steady_seconds() > deadline) expire(operation, peers);
    pause_while_waiting(begin);
  }
}

namespace {

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  return capture != cudaStreamCaptureStatusNone;
}

}  // namespace

Work NcclCommunicator::enqueued(cudaStream_t stream, const char* operation, std::vector<int> peers,
                                std::optional<cudaStream_t> follower) {
  if (capturing(stream)) return Work{};
  cudaEvent_t done = nullptr;
  cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  cuda_check(cudaEventRecord(done, stream), "cudaEventRecord");
  return Work(std::make_unique<EventWork>(*this, done, operation, std::move(peers), follower));
}

Work NcclCommunicator::fence(Stream stream) {
  const DeviceScope scope(device_);
  return enqueued(device_stream(stream, "fence"), "the fence after the operations left to the stream", everyone_else());
}

void NcclCommunicator::grouped(ncclComm_t comm, const char* operation, const std::function<void()>& calls) {
  settle(comm, ncclGroupStart(), operation);
  calls();
  settle(comm, ncclGroupEnd(), operation);
}

std::vector<int> NcclCommunicator::everyone_else() const {
  std::vector<int> peers;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) peers.push_back(r);
  return peers;
}

void NcclCommunicator::count(int peer, double sent_bytes, double received_bytes) {
  const int level = static_cast<int>(level_of_rank_[peer]);
  traffic_.sent[level] += sent_bytes;
  traffic_.received[level] += received_bytes;
  if (kind_ != Traffic::Count && sent_bytes > 0) count_sent(kind_, sent_bytes);
}

// NCCL does not say what it sent: counted as the ring it equals in bytes, like MPI's own.
void NcclCommunicator::count_ring(double bytes_each_way) {
  if (size_ == 1) return;
  count((rank_ + 1) % size_, bytes_each_way, 0);
  count((rank_ + size_ - 1) % size_, 0, bytes_each_way);
}

Work NcclCommunicator::all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) {
  const DeviceScope scope(device_);
  cudaStream_t s = device_stream(stream, "all-reduce");
  settle(comm_, ncclAllReduce(data, data, count, nccl_type(dtype), nccl_op(op), comm_, s), "all-reduce");
  if (dtype != DType::f64 && dtype != DType::i32)
    count_ring(2.0 * (size_ - 1) / size_ * static_cast<double>(count * dtype_size(dtype)));
  return enqueued(s, "all-reduce", everyone_else());
}

// Equal segments: NCCL's reduce-scatter, in place (rank r's segment is where it receives).
// Unequal ones (count not a multiple of the size): one reduce per segment, rooted at its owner.
Work NcclCommunicator::reduce_scatter(void* data, size_t count, DType dtype, Op op, Stream stream) {
  const DeviceScope scope(device_);
  cudaStream_t s = device_stream(stream, "reduce-scatter");
  const size_t width = dtype_size(dtype);
  if (count % size_ == 0) {
    const size_t each = count / size_;
    settle(comm_, ncclReduceScatter(data, bytes(data) + rank_ * each * width, each, nccl_type(dtype), nccl_op(op), comm_, s),
           "reduce-scatter");
  } else {
    grouped(comm_, "reduce-scatter", [&] {
      for (int r = 0; r < size_; ++r) {
        const auto [begin, end] = segment_of(count, size_, r);
        char* at = bytes(data) + begin * width;
        settle(comm_, ncclReduce(at, at, end - begin, nccl_type(dtype), nccl_op(op), r, comm_, s), "reduce-scatter");
      }
    });
  }
  count_ring((size_ - 1.0) / size_ * static_cast<double>(count * width));
  return enqueued(s, "reduce-scatter", everyone_else());
}

// The mirror of reduce_scatter: NCCL's all-gather in place, or one broadcast per segment.
Work NcclCommunicator::all_gather(void* data, size_t count, DType dtype, Stream stream) {
  const DeviceScope scope(device_);
  cudaStream_t s = device_stream(stream, "all-gather");
  const size_t width = dtype_size(dtype);
  if (count % size_ == 0) {
    const size_t each = count / size_;
    settle(comm_, ncclAllGather(bytes(data) + rank_ * each * width, data, each, nccl_type(dtype), comm_, s), "all-gather");
  } else {
    grouped(comm_, "all-gather", [&] {
      for (int r = 0; r < size_; ++r) {
        const auto [begin, end] = segment_of(count, size_, r);
        char* at = bytes(data) + begin * width;
        settle(comm_, ncclBroadcast(at, at, end - begin, nccl_type(dtype), r, comm_, s), "all-gather");
      }
    });
  }
  count_ring((size_ - 1.0) / size_ * static_cast<double>(count * width));
  return enqueued(s, "all-gather", everyone_else());
}

Work NcclCommunicator::broadcast(void* data, size_t count, DType dtype, int root, Stream stream) {
  const DeviceScope scope(device_);
  cudaStream_t s = device_stream(stream, "broadcast");
  settle(comm_, ncclBroadcast(data, data, count, nccl_type(dtype), root, comm_, s), "broadcast");
  const double total = static_cast<double>(count * dtype_size(dtype));
  if (size_ > 1 && (rank_ + 1) % size_ != root) this->count((rank_ + 1) % size_, total, 0);  // a chain from root
  if (size_ > 1 && rank_ != root) this->count((rank_ + size_ - 1) % size_, 0, total);
  return enqueued(s, "broadcast", rank_ == root ? everyone_else() : std::vector<int>{root});
}

namespace {

// `later` runs what is enqueued on it next only after what `earlier` holds now.
void order_after(cudaStream_t later, cudaStream_t earlier) {
  cudaEvent_t mark = nullptr;
  cuda_check(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming), "cudaEventCreate");
  cuda_check(cudaEventRecord(mark, earlier), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(later, mark, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(mark);  // released by CUDA once the wait on it is done
}

}  // namespace

// On the direction's own stream, after what the caller's stream has enqueued so far (the
// buffer's contents). The caller's stream does not wait for the send: its Work does — the
// host's wait, or the caller's stream once the Work is left to it — before the buffer is
// written again, as on the CPU.
Work NcclCommunicator::send(const void* data, size_t count, DType dtype, int peer, int tag, Stream stream) {
  const DeviceScope scope(device_);
  cudaStream_t caller = device_stream(stream, "send");
  REQUIRE(up_ != nullptr, "send on the " << name_ << " group: its NCCL communicator was made without point-to-point");
  ncclComm_t comm = peer > rank_ ? up_ : down_;
  cudaStream_t own = peer > rank_ ? up_stream_ : down_stream_;
  order_after(own, caller);
  settle(comm, ncclSend(data, count, nccl_type(dtype), peer, comm, own), "send");
  if (capturing(caller)) order_after(caller, own);  // a capture must join every stream it forked
  this->count(peer, static_cast<double>(count * dtype_size(dtype)), 0);
  return enqueued(own, "send", {peer}, caller);
}

// On the direction's own stream, after what the caller's stream has enqueued so far (earlier
// readers of the buffer). The caller's stream waits for the message only where its Work is
// waited for or left to the stream: the kernels enqueued before that run beside the transfer.
// A graph being captured orders it at once: a captured Work is none, and nothing would let it go.
Work NcclCommunicator::recv(void* data, size_t count, DType dtype, int peer, int tag, Stream stream) {
  const DeviceScope scope(device_);
  cudaStream_t caller = device_stream(stream, "receive");
  REQUIRE(up_ != nullptr, "receive on the " << name_ << " group: its NCCL communicator was made without point-to-point");
  ncclComm_t comm = peer < rank_ ? up_ : down_;
  cudaStream_t own = peer < rank_ ? up_stream_ : down_stream_;
  order_after(own, caller);
  settle(comm, ncclRecv(data, count, nccl_type(dtype), peer, comm, own), "receive");
  if (capturing(caller)) order_after(caller, own);
  this->count(peer, 0, static_cast<double>(count * dtype_size(dtype)));
  return enqueued(own, "receive", {peer}, caller);
}

// A ring step: the send to `to` and the receive from `from` in one group on the up communicator
// and its stream, after what the caller's stream has enqueued so far. NCCL runs a group's sends
// and receives at once; posted apart on one direction's stream, the send would start only once
// the receive was done, and a ring's step would run as a chain of p − 1 transfers. Every rank of
// the ring posts its steps here, on up_ whichever way each peer lies, so the two ends of every
// transfer meet on one communicator (rank p − 1 to 0 included: connected at construction). The
// caller's stream waits as for send and recv (EventWork), one event for both.
Work NcclCommunicator::send_recv(const void* out, void* in, size_t count, DType dtype, int to, int from, int tag,
                                 Stream stream) {
  const DeviceScope scope(device_);
  cudaStream_t caller = device_stream(stream, "ring step");
  REQUIRE(up_ != nullptr, "ring step on the " << name_ << " group: its NCCL communicator was made without point-to-point");
  order_after(up_stream_, caller);
  grouped(up_, "ring step", [&] {
    settle(up_, ncclSend(out, count, nccl_type(dtype), to, up_, up_stream_), "ring step's send");
    settle(up_, ncclRecv(in, count, nccl_type(dtype), from, up_, up_stream_), "ring step's receive");
  });
  if (capturing(caller)) order_after(caller, up_stream_);
  const double bytes = static_cast<double>(count * dtype_size(dtype));
  this->count(to, bytes, 0);
  this->count(from, 0, bytes);
  std::vector<int> peers = {to};
  if (from != to) peers.push_back(from);
  return enqueued(up_stream_, "ring step", peers, caller);
}

Work NcclCommunicator::gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) {
  const DeviceScope scope(device_);
  cudaStream_t s = device_stream(stream, "gather");
  const size_t row = count * dtype_size(dtype);
  grouped(comm_, "gather", [&] {
    if (rank_ != root) return settle(comm_, ncclSend(in, count, nccl_type(dtype), root, comm_, s), "gather");
    for (int r = 0; r < size_; ++r)
      if (r != root) settle(comm_, ncclRecv(bytes(out) + r * row, count, nccl_type(dtype), r, comm_, s), "gather");
  });
  if (rank_ == root) cuda_check(cudaMemcpyAsync(bytes(out) + root * row, in, row, cudaMemcpyDeviceToDevice, s), "gather's own row");
  return enqueued(s, "gather", rank_ == root ? everyone_else() : std::vector<int>{root});
}

Work NcclCommunicator::all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) {
  const DeviceScope scope(device_);
  cudaStream_t s = device_stream(stream, "all-gather of values");
  settle(comm_, ncclAllGather(in, out, count, nccl_type(dtype), comm_, s), "all-gather of values");
  return enqueued(s, "all-gather of values", everyone_else());
}

Work NcclCommunicator::barrier(Stream stream) {
  const DeviceScope scope(device_);
  cudaStream_t s = device_stream(stream, "barrier");
  settle(comm_, ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, s), "barrier");
  return enqueued(s, "barrier", everyone_else());
}

}  // namespace trident::comm

#endif  // TRIDENT_NCCL
