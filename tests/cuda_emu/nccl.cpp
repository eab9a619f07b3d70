// The CUDA emulator's NCCL (tests/cuda_emu/README.md), built as libnccl.so.2: the calls the NCCL
// communicator (src/comm/nccl) makes, between the ranks of an MPI job, each its own emulated GPU
// (TRIDENT_CUDA_EMU_GPUS gives a process several, so that ranks on one host have devices of their
// own). A communicator's members meet through its id: the id names the MPI world rank that made
// it, which collects every member's world rank and hands the table out. Each operation is one of
// its stream's (cudaEmuLaunchPolled): when the stream reaches it, it posts its point-to-point
// messages on MPI_COMM_WORLD under the communicator's own tags, and it is done once they are all
// here — until then the stream's later work waits and the host goes on, as a GPU's NCCL kernel
// waits for its peers. Every member's contribution is combined in rank order (the same bits on
// every rank). A collective's tag is its number among the communicator's collectives, a
// point-to-point message's its number among those between the two members, both counted when
// the host calls (so streams that run in another order on another rank still match, as NCCL's
// operations match in the order they are issued); sends are buffered and done once posted; a
// group's operations are one operation of its first one's stream, posted together.
#include <mpi.h>
#include <nccl.h>

#include <atomic>
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
  // Its collectives issued so far, and its point-to-point messages to and from each member.
  uint32_t collectives = 0;
  std::vector<uint32_t> sent_to, received_from;
  // Aborted: its operations under way end at once (NCCL's abort frees its kernels). Destroyed:
  // deleted once no operation of a stream or a graph holds it.
  std::atomic<bool> aborted{false};
  bool destroyed = false;
  int holders = 0;
};

namespace {

constexpr int kTagBlock = 4096, kTagFirst = 1 << 20;
constexpr int kInitTag = kTagBlock - 1, kTableTag = kTagBlock - 2;
constexpr int kCollectiveTags = 2048, kPointTags = kTagBlock - 2 - kCollectiveTags;  // each counted modulo

// The id: who made it, and its number among that rank's ids.
struct Id {
  uint32_t magic;
  int world;
  uint32_t number;
};
constexpr uint32_t kMagic = 0x54524944;  // "TRID"

std::mutex g_mutex;  // the ids' numbers, the communicators' holders
uint32_t g_ids = 0;

void hold(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(g_mutex);
  ++comm->holders;
}
void let_go(ncclComm* comm) {
  std::unique_lock<std::mutex> lock(g_mutex);
  if (--comm->holders == 0 && comm->destroyed) {
    lock.unlock();
    delete comm;
  }
}

using Bytes = std::vector<unsigned char>;
// Sends in flight and their buffers: a send is done once posted, as NCCL's leaves the host free
// (two pipeline neighbours may each send before they receive), and MPI completes it later.
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
void send_buffered(Bytes bytes, int world, int tag) {
  InFlight sending{MPI_REQUEST_NULL, std::make_shared<Bytes>(std::move(bytes))};
  MPI_Isend(sending.buffer->data(), static_cast<int>(sending.buffer->size()), MPI_BYTE, world, tag, MPI_COMM_WORLD,
            &sending.request);
  std::lock_guard<std::mutex> lock(g_sends_mutex);
  g_sends.push_back(std::move(sending));
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

// An operation under way: its receives, the bytes they bring (by member; this one's own left
// empty), and what is done with them once all are here.
struct Exchange {
  std::vector<MPI_Request> requests;
  std::vector<Bytes> incoming;
  std::function<void(std::vector<Bytes>&)> finish;
};
// What the host issued: each part begins an exchange when the stream reaches it.
using Part = std::function<Exchange()>;

// Posts the receives of `bytes` from each of `from`, and sends to each of `to` its bytes (what(r)
// for member r), under the tag of the collective numbered `number`.
Exchange post(ncclComm* comm, uint32_t number, const std::function<Bytes(int)>& what, size_t bytes, Peers to, Peers from) {
  const int tag = comm->tags + static_cast<int>(number % kCollectiveTags);
  Exchange x;
  x.incoming.resize(static_cast<size_t>(comm->ranks));
  for (int r = 0; r < comm->ranks; ++r) {
    if (r == comm->rank || !from.has(r)) continue;
    x.incoming[r].resize(bytes);
    x.requests.emplace_back();
    MPI_Irecv(x.incoming[r].data(), static_cast<int>(bytes), MPI_BYTE, comm->world[r], tag, MPI_COMM_WORLD,
              &x.requests.back());
  }
  for (int r = 0; r < comm->ranks; ++r)
    if (r != comm->rank && to.has(r)) send_buffered(what(r), comm->world[r], tag);
  return x;
}

// Every member's contribution (this one's its own), combined in rank order into `receive`.
void reduce_into(void* receive, std::vector<Bytes>& all, Bytes own, size_t count, ncclDataType_t type, ncclRedOp_t op,
                 const ncclComm* comm) {
  all[static_cast<size_t>(comm->rank)] = std::move(own);
  Bytes sum = all[0];
  for (int r = 1; r < comm->ranks; ++r) combine_into(sum.data(), all[r].data(), count, type, op);
  std::memcpy(receive, sum.data(), sum.size());
}

// One operation of a stream: its parts (one, or a group's), begun together, done once all are.
struct Operation {
  ncclComm* comm;
  std::vector<Part> parts;
};
struct Running {
  ncclComm* comm;
  std::vector<Exchange> exchanges;
  std::vector<bool> finished;
};
void* start(void* data) {
  auto* operation = static_cast<Operation*>(data);
  auto* running = new Running{operation->comm, {}, {}};
  for (const Part& part : operation->parts) running->exchanges.push_back(part());
  running->finished.assign(running->exchanges.size(), false);
  return running;
}
int poll(void* state) {
  auto* running = static_cast<Running*>(state);
  complete_sends(false);
  bool all = true;
  for (size_t i = 0; i < running->exchanges.size(); ++i) {
    Exchange& x = running->exchanges[i];
    if (running->finished[i]) continue;
    int here = 0;
    MPI_Testall(static_cast<int>(x.requests.size()), x.requests.data(), &here, MPI_STATUSES_IGNORE);
    if (here) {
      if (x.finish) x.finish(x.incoming);
      running->finished[i] = true;
    } else if (running->comm->aborted) {
      for (MPI_Request& request : x.requests)
        if (request != MPI_REQUEST_NULL) MPI_Cancel(&request), MPI_Request_free(&request);
      running->finished[i] = true;
    } else {
      all = false;
    }
  }
  if (all) delete running;
  return all ? 1 : 0;
}
void release(void* data) {
  auto* operation = static_cast<Operation*>(data);
  let_go(operation->comm);
  delete operation;
}

thread_local int t_group_depth = 0;
struct Grouped {
  ncclComm* comm;
  cudaStream_t stream;
  Part part;
};
thread_local std::vector<Grouped> t_group;

// One operation of the stream, holding its communicator until it is released.
ncclResult_t launch(cudaStream_t stream, std::vector<Part> parts, ncclComm* comm) {
  hold(comm);
  auto* operation = new Operation{comm, std::move(parts)};
  return cudaEmuLaunchPolled(stream, start, poll, release, operation) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

// Issues `part` on the stream (or, in a group, at its end).
ncclResult_t issue(ncclComm* comm, cudaStream_t stream, Part part) {
  complete_sends(false);
  if (comm->aborted) return ncclInvalidUsage;
  if (t_group_depth > 0) {
    t_group.push_back({comm, stream, std::move(part)});
    return ncclSuccess;
  }
  std::vector<Part> parts;
  parts.push_back(std::move(part));
  return launch(stream, std::move(parts), comm);
}

// A collective's number, counted when the host issues it.
uint32_t next_collective(ncclComm* comm) { return comm->collectives++; }

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
  comm->sent_to.assign(static_cast<size_t>(ranks), 0);
  comm->received_from.assign(static_cast<size_t>(ranks), 0);
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
  comm->holders = 1;  // the caller's handle
  *out = comm.release();
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t) {
  complete_sends(true);
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    comm->destroyed = true;
  }
  let_go(comm);
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  comm->aborted = true;
  return ncclCommDestroy(comm);
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* error) {
  *error = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}
// The group's operations, one operation of the first one's stream: all its messages posted
// together (two ranks that each send to the other and receive from it do not wait on each other).
ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return ncclInvalidUsage;
  if (--t_group_depth > 0 || t_group.empty()) return ncclSuccess;
  std::vector<Grouped> group;
  group.swap(t_group);
  std::vector<Part> parts;
  for (Grouped& g : group) parts.push_back(std::move(g.part));
  return launch(group.front().stream, std::move(parts), group.front().comm);
}

ncclResult_t ncclSend(const void* data, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  const int tag = comm->tags + kCollectiveTags + static_cast<int>(comm->sent_to[peer]++ % kPointTags);
  return issue(comm, stream, [=] {
    send_buffered(copy_of(data, bytes), comm->world[peer], tag);
    return Exchange{};
  });
}
ncclResult_t ncclRecv(void* data, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  const int tag = comm->tags + kCollectiveTags + static_cast<int>(comm->received_from[peer]++ % kPointTags);
  return issue(comm, stream, [=] {
    Exchange x;
    x.requests.emplace_back();
    MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, comm->world[peer], tag, MPI_COMM_WORLD, &x.requests.back());
    return x;
  });
}

ncclResult_t ncclAllReduce(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  const uint32_t number = next_collective(comm);
  return issue(comm, stream, [=] {
    auto mine = std::make_shared<Bytes>(copy_of(send, bytes));
    Exchange x = post(comm, number, [&](int) { return *mine; }, bytes, everyone(), everyone());
    x.finish = [=](std::vector<Bytes>& all) { reduce_into(receive, all, *mine, count, type, op, comm); };
    return x;
  });
}

ncclResult_t ncclReduce(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  const uint32_t number = next_collective(comm);
  return issue(comm, stream, [=] {
    auto mine = std::make_shared<Bytes>(copy_of(send, bytes));
    const bool at_root = comm->rank == root;
    Exchange x = post(comm, number, [&](int) { return *mine; }, bytes, at_root ? nobody() : only(root),
                      at_root ? everyone() : nobody());
    if (at_root) x.finish = [=](std::vector<Bytes>& all) { reduce_into(receive, all, *mine, count, type, op, comm); };
    return x;
  });
}

ncclResult_t ncclReduceScatter(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  const uint32_t number = next_collective(comm);
  return issue(comm, stream, [=] {
    const auto* everything = static_cast<const unsigned char*>(send);
    const auto block = [=](int r) { return copy_of(everything + bytes * r, bytes); };
    auto own = std::make_shared<Bytes>(block(comm->rank));
    Exchange x = post(comm, number, block, bytes, everyone(), everyone());
    x.finish = [=](std::vector<Bytes>& all) { reduce_into(receive, all, *own, count, type, op, comm); };
    return x;
  });
}

ncclResult_t ncclAllGather(const void* send, void* receive, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  const uint32_t number = next_collective(comm);
  return issue(comm, stream, [=] {
    auto mine = std::make_shared<Bytes>(copy_of(send, bytes));
    Exchange x = post(comm, number, [&](int) { return *mine; }, bytes, everyone(), everyone());
    x.finish = [=](std::vector<Bytes>& all) {
      all[static_cast<size_t>(comm->rank)] = *mine;
      for (int r = 0; r < comm->ranks; ++r) std::memcpy(static_cast<unsigned char*>(receive) + bytes * r, all[r].data(), bytes);
    };
    return x;
  });
}

ncclResult_t ncclBroadcast(const void* send, void* receive, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * size_of(type);
  const uint32_t number = next_collective(comm);
  return issue(comm, stream, [=] {
    const bool at_root = comm->rank == root;
    auto mine = std::make_shared<Bytes>(at_root ? copy_of(send, bytes) : Bytes());
    Exchange x = post(comm, number, [&](int) { return *mine; }, bytes, at_root ? everyone() : nobody(), only(root));
    x.finish = [=](std::vector<Bytes>& all) {
      std::memcpy(receive, at_root ? mine->data() : all[static_cast<size_t>(root)].data(), bytes);
    };
    return x;
  });
}

}  // extern "C"
