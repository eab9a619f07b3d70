// The CUDA emulator's NCCL (tests/cuda_emu/README.md), built as libnccl.so.2: the calls the NCCL
// communicator (src/comm/nccl) makes, between the ranks of an MPI job, each its own emulated GPU
// (TRIDENT_CUDA_EMU_GPUS gives a process several, so that ranks on one host have devices of their
// own). A communicator's members meet through its id: the id names the MPI world rank that made
// it, which collects every member's world rank and hands the table out. Each collective is an
// operation on its stream (cudaLaunchHostFunc) of point-to-point messages on MPI_COMM_WORLD
// under the communicator's own tags, every member's contribution combined in rank order (so the
// same bits on every rank); sends are buffered, so a send never waits for its receive; a group's
// operations run at ncclGroupEnd, its sends posted first. Streams run in their order
// (TRIDENT_CUDA_EMU_STREAMS=deferred is not for jobs that use it: a held collective would wait
// on the host for ranks that hold theirs).
#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

struct ncclComm {
  int ranks = 0, rank = 0;
  std::vector<int> world;  // each member's MPI world rank
  int tags = 0;            // the first of its 4096 tags
  uint32_t sequence = 0;   // its collectives so far (every member calls them in one order)
};

namespace {

constexpr int kTagBlock = 4096, kTagFirst = 1 << 20;
constexpr int kInitTag = kTagBlock - 1, kTableTag = kTagBlock - 2, kPointTag = kTagBlock - 3;

// The id: who made it, and its number among that rank's ids.
struct Id {
  uint32_t magic;
  int world;
  uint32_t number;
};
constexpr uint32_t kMagic = 0x54524944;  // "TRID"

std::mutex g_mutex;  // the ids' numbers
uint32_t g_ids = 0;
thread_local int t_group_depth = 0;
struct Pending {
  cudaStream_t stream;
  bool send;
  std::function<void()> run;
};
thread_local std::vector<Pending> t_group;

using Bytes = std::vector<unsigned char>;
// Sends in flight and their buffers: a send returns at once, as NCCL's leaves the host free (two
// pipeline neighbours may each send before they receive), and is completed later.
struct InFlight {
  MPI_Request request;
  std::shared_ptr<Bytes> buffer;
};
std::mutex g_sends_mutex;
std::vector<InFlight> g_sends;
void complete_sends(bool wait) {
  std::lock_guard<std::mutex> lock(g_sends_mutex);
  for (size_t i = 0; i < g_sends.size();) {
    int done = 0;
    if (wait) MPI_Wait(&g_sends[i].request, MPI_STATUS_IGNORE), done = 1;
    else MPI_Test(&g_sends[i].request, &done, MPI_STATUS_IGNORE);
    if (done) g_sends.erase(g_sends.begin() + static_cast<long>(i));
    else ++i;
  }
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

size_t size_of(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

float to_float(const void* p, ncclDataType_t type, size_t i) {
  uint16_t bits;
  std::memcpy(&bits, static_cast<const unsigned char*>(p) + 2 * i, 2);
  if (type == ncclBfloat16) {
    const uint32_t word = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &word, 4);
    return f;
  }
  __half h;
  std::memcpy(&h, &bits, 2);
  return __half2float(h);
}
void from_float(void* p, ncclDataType_t type, size_t i, float value) {
  uint16_t bits;
  if (type == ncclBfloat16) {
    const __nv_bfloat16 b = __float2bfloat16_rn(value);
    std::memcpy(&bits, &b, 2);
  } else {
    const __half h = __float2half_rn(value);
    std::memcpy(&bits, &h, 2);
  }
  std::memcpy(static_cast<unsigned char*>(p) + 2 * i, &bits, 2);
}

template <class T>
T combine(T a, T b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return a + b;
  }
}
template <class T>
void combine_into(T* into, const T* x, size_t count, ncclRedOp_t op) {
  for (size_t i = 0; i < count; ++i) into[i] = combine(into[i], x[i], op);
}
// into = into ⊕ x, elementwise (16-bit types through f32, rounded once a step).
void combine_into(void* into, const void* x, size_t count, ncclDataType_t type, ncclRedOp_t op) {
  switch (type) {
    case ncclFloat32: return combine_into(static_cast<float*>(into), static_cast<const float*>(x), count, op);
    case ncclFloat64: return combine_into(static_cast<double*>(into), static_cast<const double*>(x), count, op);
    case ncclInt32: return combine_into(static_cast<int32_t*>(into), static_cast<const int32_t*>(x), count, op);
    case ncclUint32: return combine_into(static_cast<uint32_t*>(into), static_cast<const uint32_t*>(x), count, op);
    case ncclInt64: return combine_into(static_cast<int64_t*>(into), static_cast<const int64_t*>(x), count, op);
    case ncclUint64: return combine_into(static_cast<uint64_t*>(into), static_cast<const uint64_t*>(x), count, op);
    case ncclInt8: return combine_into(static_cast<int8_t*>(into), static_cast<const int8_t*>(x), count, op);
    case ncclUint8: return combine_into(static_cast<uint8_t*>(into), static_cast<const uint8_t*>(x), count, op);
    default:
      for (size_t i = 0; i < count; ++i)
        from_float(into, type, i, combine(to_float(into, type, i), to_float(x, type, i), op));
  }
}

Bytes copy_of(const void* p, size_t bytes) {
  return Bytes(static_cast<const unsigned char*>(p), static_cast<const unsigned char*>(p) + bytes);
}

// The members one side of an exchange reaches: all of them, one, or none.
struct Peers {
  bool all = true;
  int one = -1;
  bool has(int r) const { return all || r == one; }
};
Peers everyone() { return {}; }
Peers only(int r) { return {false, r}; }
Peers nobody() { return {false, -1}; }

// `bytes` from this member to each of `to` (what(r): the bytes for member r), and those of each
// of `from` here (index: the member; this one's own left empty).
std::vector<Bytes> exchange(ncclComm* comm, const std::function<Bytes(int)>& what, size_t bytes, Peers to = everyone(),
                            Peers from = everyone()) {
  const int tag = comm->tags + static_cast<int>(comm->sequence++ % (kTagBlock - 3));
  std::vector<Bytes> outgoing(static_cast<size_t>(comm->ranks)), incoming(static_cast<size_t>(comm->ranks));
  std::vector<MPI_Request> requests;
  for (int r = 0; r < comm->ranks; ++r) {
    if (r == comm->rank) continue;
    if (from.has(r)) {
      incoming[r].resize(bytes);
      requests.emplace_back();
      MPI_Irecv(incoming[r].data(), static_cast<int>(bytes), MPI_BYTE, comm->world[r], tag, MPI_COMM_WORLD, &requests.back());
    }
  }
  for (int r = 0; r < comm->ranks; ++r) {
    if (r == comm->rank || !to.has(r)) continue;
    outgoing[r] = what(r);
    requests.emplace_back();
    MPI_Isend(outgoing[r].data(), static_cast<int>(bytes), MPI_BYTE, comm->world[r], tag, MPI_COMM_WORLD, &requests.back());
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  return incoming;
}

// Every member's contribution (this one's its own), combined in rank order into `receive`.
void reduce_into(void* receive, std::vector<Bytes> all, Bytes own, size_t count, ncclDataType_t type, ncclRedOp_t op,
                 const ncclComm* comm) {
  all[static_cast<size_t>(comm->rank)] = std::move(own);
  Bytes sum = all[0];
  for (int r = 1; r < comm->ranks; ++r) combine_into(sum.data(), all[r].data(), count, type, op);
  std::memcpy(receive, sum.data(), sum.size());
}

// Runs `operation` on the stream (or, in a group, at its end).
ncclResult_t enqueue(cudaStream_t stream, bool send, std::function<void()> operation) {
  complete_sends(false);
  if (t_group_depth > 0) {
    t_group.push_back({stream, send, std::move(operation)});
    return ncclSuccess;
  }
  auto* work = new std::function<void()>(std::move(operation));
  const cudaError_t status = cudaLaunchHostFunc(stream, [](void* data) {
    auto* w = static_cast<std::function<void()>*>(data);
    (*w)();
    delete w;
  }, work);
  return status == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t result) { return result == ncclSuccess ? "no error" : "emulated NCCL error"; }
const char* ncclGetLastError(ncclComm_t) { return ""; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::lock_guard<std::mutex> lock(g_mutex);
  const Id made{kMagic, world_rank(), g_ids++};
  std::memcpy(id->internal, &made, sizeof made);
  return ncclSuccess;
}

// The members meet at the id's maker: each sends it (its rank, its world rank), it answers every
// one with the table.
ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int ranks, ncclUniqueId id_bytes, int rank, ncclConfig_t*) {
  Id id;
  std::memcpy(&id, id_bytes.internal, sizeof id);
  if (id.magic != kMagic || ranks < 1 || rank < 0 || rank >= ranks) return ncclInvalidArgument;
  auto comm = std::make_unique<ncclComm>();
  comm->ranks = ranks, comm->rank = rank;
  comm->world.assign(static_cast<size_t>(ranks), -1);
  // A block of tags of its own: distinct for every id of up to 1024 from each of up to 390 ranks
  // (the largest tag stays under 2^31, Open MPI's bound).
  comm->tags = kTagFirst + static_cast<int>((static_cast<uint64_t>(id.world) * 1024 + id.number) % 400000) * kTagBlock;
  const int me[2] = {rank, world_rank()};
  if (me[1] == id.world) {
    comm->world[static_cast<size_t>(rank)] = me[1];
    for (int i = 1; i < ranks; ++i) {
      int member[2];
      MPI_Recv(member, 2, MPI_INT, MPI_ANY_SOURCE, comm->tags + kInitTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      comm->world[static_cast<size_t>(member[0])] = member[1];
    }
    for (int r = 0; r < ranks; ++r)
      if (r != rank) MPI_Send(comm->world.data(), ranks, MPI_INT, comm->world[r], comm->tags + kTableTag, MPI_COMM_WORLD);
  } else {
    MPI_Send(me, 2, MPI_INT, id.world, comm->tags + kInitTag, MPI_COMM_WORLD);
    MPI_Recv(comm->world.data(), ranks, MPI_INT, id.world, comm->tags + kTableTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  *out = comm.release();
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t) {
  complete_sends(true);
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* error) {
  *error = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}
// The group's sends posted first (buffered), then its receives and collectives in order, then the
// sends completed: two ranks that each send to the other and receive from it do not wait on
// each other. One operation on the first one's stream.
ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return ncclInvalidUsage;
  if (--t_group_depth > 0 || t_group.empty()) return ncclSuccess;
  std::vector<Pending> group;
  group.swap(t_group);
  const cudaStream_t stream = group.front().stream;
  return enqueue(stream, false, [group] {
    for (const Pending& p : group)
      if (p.send) p.run();
    for (const Pending& p : group)
      if (!p.send) p.run();
  });
}

ncclResult_t ncclSend(const void* data, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  return enqueue(stream, true, [=] {
    InFlight sending{MPI_REQUEST_NULL, std::make_shared<Bytes>(copy_of(data, bytes))};
    MPI_Isend(sending.buffer->data(), static_cast<int>(bytes), MPI_BYTE, comm->world[peer], comm->tags + kPointTag,
              MPI_COMM_WORLD, &sending.request);
    std::lock_guard<std::mutex> lock(g_sends_mutex);
    g_sends.push_back(std::move(sending));
  });
}
ncclResult_t ncclRecv(void* data, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  return enqueue(stream, false, [=] {
    MPI_Recv(data, static_cast<int>(bytes), MPI_BYTE, comm->world[peer], comm->tags + kPointTag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
  });
}

ncclResult_t ncclAllReduce(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  return enqueue(stream, false, [=] {
    const Bytes mine = copy_of(send, bytes);
    reduce_into(receive, exchange(comm, [&](int) { return mine; }, bytes), mine, count, type, op, comm);
  });
}

ncclResult_t ncclReduce(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  return enqueue(stream, false, [=] {
    const Bytes mine = copy_of(send, bytes);
    const bool at_root = comm->rank == root;
    std::vector<Bytes> all = exchange(comm, [&](int) { return mine; }, bytes, at_root ? nobody() : only(root),
                                      at_root ? everyone() : nobody());
    if (at_root) reduce_into(receive, std::move(all), mine, count, type, op, comm);
  });
}

ncclResult_t ncclReduceScatter(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  return enqueue(stream, false, [=] {
    const Bytes everything = copy_of(send, bytes * static_cast<size_t>(comm->ranks));
    const auto block = [&](int r) {
      return Bytes(everything.begin() + static_cast<long>(bytes * r), everything.begin() + static_cast<long>(bytes * (r + 1)));
    };
    reduce_into(receive, exchange(comm, block, bytes), block(comm->rank), count, type, op, comm);
  });
}

ncclResult_t ncclAllGather(const void* send, void* receive, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  return enqueue(stream, false, [=] {
    const Bytes mine = copy_of(send, bytes);
    std::vector<Bytes> all = exchange(comm, [&](int) { return mine; }, bytes);
    all[static_cast<size_t>(comm->rank)] = mine;
    for (int r = 0; r < comm->ranks; ++r) std::memcpy(static_cast<unsigned char*>(receive) + bytes * r, all[r].data(), bytes);
  });
}

ncclResult_t ncclBroadcast(const void* send, void* receive, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  return enqueue(stream, false, [=] {
    const bool at_root = comm->rank == root;
    const Bytes mine = at_root ? copy_of(send, bytes) : Bytes();
    std::vector<Bytes> all = exchange(comm, [&](int) { return mine; }, bytes, at_root ? everyone() : nobody(), only(root));
    std::memcpy(receive, at_root ? mine.data() : all[static_cast<size_t>(root)].data(), bytes);
  });
}

}  // extern "C"
