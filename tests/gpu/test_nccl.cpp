// The NCCL communicator on GPUs, one rank per GPU under mpirun: every operation of the
// interface against the MPI communicator's result on the same data (integer-valued, so sums
// are exact in f32 and bf16 and equality is the test), the hierarchical all-reduce over the
// NCCL level communicators against the same group's MPI hierarchy, and (with --hang) the
// watchdog: a rank that never joins an all-reduce ends the job with the MPI communicator's
// message. Rank 0 prints one PASS / FAIL / SKIP line per case; without NCCL, a GPU or a GPU
// per rank, every case is a SKIP and the exit status 0. tests/gpu/test_nccl.sh runs it.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "comm/group_collectives.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "comm/nccl/nccl.hpp"
#include "comm/nccl/nccl_settings.hpp"
#include "comm/wrappers/widen.hpp"
#include "core/mpi_util.hpp"
#include "deck/deck.hpp"
#include "job/job.hpp"
#include "comm/discover_topology.hpp"
#include "comm/mpi/native_handle.hpp"

#if TRIDENT_NCCL
#include <cuda_runtime.h>
#endif

using namespace trident;

namespace {

const char* const kCases[] = {"nccl_all_reduce", "nccl_reduce_scatter", "nccl_all_gather", "nccl_broadcast",
                              "nccl_send_recv", "nccl_receive_left_to_stream", "nccl_ring_steps", "nccl_gather_values", "nccl_barrier", "nccl_hierarchical",
                              "nccl_stream_order_and_graph"};

int skip_all(const std::string& why) {
  if (world_rank() == 0)
    for (const char* name : kCases) std::printf("SKIP %s (%s)\n", name, why.c_str());
  MPI_Finalize();
  return 0;
}

#if TRIDENT_NCCL

bool everywhere(bool ok) {
  int all = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all != 0;
}

void verdict(const char* name, bool ok, const std::string& detail = "") {
  const bool all = everywhere(ok);
  if (world_rank() == 0) std::printf("%s %s%s\n", all ? "PASS" : "FAIL", name, detail.empty() ? "" : (" (" + detail + ")").c_str());
  std::fflush(stdout);
}

// Rank r's value at i: (r + 1)·(i mod 7 + 1); sums over up to 8 ranks stay below 256 (exact in bf16).
std::vector<float> contribution(size_t n, int r) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float((r + 1) * int(i % 7 + 1));
  return v;
}

// A device buffer holding `host`'s bytes, and the way back.
struct DeviceBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(const void* host, size_t n) : bytes(n) {
    cudaMalloc(&data, n);
    cudaMemcpy(data, host, n, cudaMemcpyHostToDevice);
  }
  ~DeviceBuffer() { cudaFree(data); }
  template <class T>
  std::vector<T> fetch(size_t count) const {
    std::vector<T> host(count);
    cudaMemcpy(host.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
};

struct Pair {
  comm::Communicator& nccl;
  comm::MpiCommunicator& mpi;
  Stream device;
};

// NCCL's and MPI's results of one in-place operation on the same 16-bit or f32 data.
template <class T>
bool same_in_place(Pair& p, std::vector<T> data, const std::function<comm::Work(comm::Communicator&, void*, Stream)>& op) {
  DeviceBuffer on_device(data.data(), data.size() * sizeof(T));
  op(p.nccl, on_device.data, p.device).wait();
  op(p.mpi, data.data(), Stream{}).wait();
  return on_device.fetch<T>(data.size()) == data;
}

bool check_all_reduce(Pair& p) {
  const int r = p.mpi.rank();
  bool ok = true;
  for (comm::Op op : {comm::Op::Sum, comm::Op::Max})
    ok &= same_in_place(p, contribution(1001, r), [&](comm::Communicator& c, void* d, Stream s) { return c.all_reduce(d, 1001, DType::f32, op, s); });
  std::vector<uint16_t> narrow(1001);
  comm::narrow(DType::bf16, contribution(1001, r).data(), narrow.data(), narrow.size());
  ok &= same_in_place(p, narrow, [&](comm::Communicator& c, void* d, Stream s) { return c.all_reduce(d, 1001, DType::bf16, comm::Op::Sum, s); });
  ok &= same_in_place(p, std::vector<double>{r + 0.5, 2.0 * r}, [&](comm::Communicator& c, void* d, Stream s) { return c.all_reduce(d, 2, DType::f64, comm::Op::Sum, s); });
  ok &= same_in_place(p, std::vector<int32_t>{r, -r, 7}, [&](comm::Communicator& c, void* d, Stream s) { return c.all_reduce(d, 3, DType::i32, comm::Op::Max, s); });
  return ok;
}

// Only this rank's segment is defined after a reduce-scatter: compared there alone.
bool check_reduce_scatter(Pair& p) {
  bool ok = true;
  for (size_t count : {size_t(4096) * p.mpi.size(), size_t(4099)}) {  // equal segments, then unequal
    std::vector<float> host = contribution(count, p.mpi.rank());
    DeviceBuffer on_device(host.data(), count * sizeof(float));
    p.nccl.reduce_scatter(on_device.data, count, DType::f32, comm::Op::Sum, p.device).wait();
    p.mpi.reduce_scatter(host.data(), count, DType::f32, comm::Op::Sum, Stream{}).wait();
    const std::vector<float> got = on_device.fetch<float>(count);
    const auto [begin, end] = comm::segment_of(count, p.mpi.size(), p.mpi.rank());
    ok &= std::equal(got.begin() + begin, got.begin() + end, host.begin() + begin);
  }
  return ok;
}

bool check_all_gather(Pair& p) {
  bool ok = true;
  for (size_t count : {size_t(4096) * p.mpi.size(), size_t(4099)})
    ok &= same_in_place(p, contribution(count, p.mpi.rank()), [&](comm::Communicator& c, void* d, Stream s) { return c.all_gather(d, count, DType::f32, s); });
  return ok;
}

bool check_broadcast(Pair& p) {
  const int root = p.mpi.size() - 1;
  return same_in_place(p, contribution(3000, p.mpi.rank()), [&](comm::Communicator& c, void* d, Stream s) { return c.broadcast(d, 3000, DType::f32, root, s); });
}

// Around the ring both ways at once — up to rank + 1 and down to rank − 1 — as a pipeline's
// activations and gradients cross: each direction's communicator and stream of its own.
bool check_send_recv(Pair& p) {
  const int n = p.mpi.size(), r = p.mpi.rank(), up = (r + 1) % n, down = (r + n - 1) % n;
  if (n == 1) return true;
  const std::vector<float> mine = contribution(5000, r);
  DeviceBuffer out(mine.data(), mine.size() * sizeof(float)), from_below(mine.data(), mine.size() * sizeof(float)),
      from_above(mine.data(), mine.size() * sizeof(float));
  // A ring closes on itself: ranks 0 and n−1 talk both ways over the "wrong" direction, which
  // the posting order below keeps matched (everyone sends up first, then down).
  comm::Work sent_up = p.nccl.send(out.data, mine.size(), DType::f32, up, 0, p.device);
  comm::Work sent_down = p.nccl.send(out.data, mine.size(), DType::f32, down, 1, p.device);
  comm::Work got_below = p.nccl.recv(from_below.data, mine.size(), DType::f32, down, 0, p.device);
  comm::Work got_above = p.nccl.recv(from_above.data, mine.size(), DType::f32, up, 1, p.device);
  got_below.wait(), got_above.wait(), sent_up.wait(), sent_down.wait();
  return from_below.fetch<float>(mine.size()) == contribution(5000, down) &&
         from_above.fetch<float>(mine.size()) == contribution(5000, up);
}

// A receive orders the caller's stream only where its Work is left to it: a copy enqueued on
// the caller's stream after leave_to_stream reads the message (the ring overlap's and the ring
// attention's use), with no host wait between posting and reading.
bool check_receive_left_to_stream(Pair& p) {
  const int n = p.mpi.size(), r = p.mpi.rank(), up = (r + 1) % n, down = (r + n - 1) % n;
  if (n == 1) return true;
  const std::vector<float> mine = contribution(1 << 20, r), zeros(mine.size(), 0.0f);
  DeviceBuffer out(mine.data(), mine.size() * sizeof(float)), in(zeros.data(), zeros.size() * sizeof(float)),
      copy(zeros.data(), zeros.size() * sizeof(float));
  auto stream = static_cast<cudaStream_t>(p.device.handle);
  comm::Work received = p.nccl.recv(in.data, mine.size(), DType::f32, down, 0, p.device);
  comm::Work sent = p.nccl.send(out.data, mine.size(), DType::f32, up, 0, p.device);
  received.leave_to_stream();
  bool ok = cudaMemcpyAsync(copy.data, in.data, in.bytes, cudaMemcpyDeviceToDevice, stream) == cudaSuccess;
  sent.leave_to_stream();
  p.nccl.fence(p.device).wait();
  return ok && copy.fetch<float>(mine.size()) == contribution(1 << 20, down);
}

// Ring steps (Communicator::send_recv, the context ring's and the TP overlap's): two steps, the
// second passing on what the first brought, each left to the stream and read there by a copy;
// after them every rank holds rank r − 2's values. Against the MPI communicator's default
// send_recv on the same data.
bool check_ring_steps(Pair& p) {
  const int n = p.mpi.size(), r = p.mpi.rank(), up = (r + 1) % n, down = (r + n - 1) % n;
  if (n == 1) return true;
  const size_t count = (1 << 20) + 3;
  const std::vector<float> mine = contribution(count, r), zeros(count, 0.0f);
  DeviceBuffer held(mine.data(), count * sizeof(float)), arriving(zeros.data(), count * sizeof(float));
  auto stream = static_cast<cudaStream_t>(p.device.handle);
  bool ok = true;
  for (int step = 0; step < 2; ++step) {
    p.nccl.send_recv(held.data, arriving.data, count, DType::f32, up, down, step, p.device).leave_to_stream();
    ok &= cudaMemcpyAsync(held.data, arriving.data, held.bytes, cudaMemcpyDeviceToDevice, stream) == cudaSuccess;
  }
  p.nccl.fence(p.device).wait();
  std::vector<float> host_held = mine, host_arriving(count);
  for (int step = 0; step < 2; ++step) {
    p.mpi.send_recv(host_held.data(), host_arriving.data(), count, DType::f32, up, down, step, Stream{}).wait();
    host_held = host_arriving;
  }
  return ok && host_held == contribution(count, (r + 2 * n - 2) % n) && held.fetch<float>(count) == host_held;
}

bool check_gather_values(Pair& p) {
  const int n = p.mpi.size(), r = p.mpi.rank();
  const std::vector<double> mine = {r * 1.5, -r * 2.0};
  std::vector<double> by_mpi(2 * n), by_mpi_all(2 * n);
  p.mpi.gather(mine.data(), by_mpi.data(), 2, DType::f64, 0, Stream{}).wait();
  p.mpi.all_gather_values(mine.data(), by_mpi_all.data(), 2, DType::f64, Stream{}).wait();
  DeviceBuffer in(mine.data(), 2 * sizeof(double)), out(by_mpi.data(), 2 * n * sizeof(double)),
      out_all(by_mpi.data(), 2 * n * sizeof(double));
  p.nccl.gather(in.data, out.data, 2, DType::f64, 0, p.device).wait();
  p.nccl.all_gather_values(in.data, out_all.data, 2, DType::f64, p.device).wait();
  return (r != 0 || out.fetch<double>(2 * n) == by_mpi) && out_all.fetch<double>(2 * n) == by_mpi_all;
}

bool check_barrier(Pair& p) {
  for (int i = 0; i < 3; ++i) p.nccl.barrier(p.device).wait();
  return true;  // a barrier that did not complete would have ended the job (watchdog)
}

// The data group over emulated nodes of 2 ranks (1 with 2 ranks), racks of 2 nodes where the
// count allows: the device all-reduce through the NCCL level communicators against the host
// all-reduce through the MPI ones, f32 and bf16.
void check_hierarchical(Stream device) {
  const int n = world_size();
  if (n < 2) return verdict("nccl_hierarchical", true, "one rank: nothing to reduce");
  const int per_node = n >= 4 && n % 2 == 0 ? 2 : 1, nodes = n / per_node;
  const int per_rack = nodes % 2 == 0 && nodes >= 4 ? 2 : 1;
  const deck::Deck deck = deck::Deck::parse(
      "t.deck", "[model]\nlayers = 2\nheads = 2\nhidden = 8\nvocab = 16\nseq_len = 4\n",
      {{"parallel.data", std::to_string(n)}, {"topology.ranks_per_node", std::to_string(per_node)},
       {"topology.nodes_per_rack", std::to_string(per_rack)}});
  const topo::Topology t = comm::discover_topology(*comm::over_native(MPI_COMM_WORLD, "world"), read_settings(deck).topology);
  comm::CollectiveSettings settings;
  settings.algo = "hierarchical";
  settings.backend = "nccl";
  comm::GroupCollectives g(MPI_COMM_WORLD, t, "data", settings, comm::Traffic::Data);
  const size_t count = (size_t(1) << 20) + 3;
  std::vector<float> host = contribution(count, world_rank());
  DeviceBuffer on_device(host.data(), count * sizeof(float));
  g.all_reduce(on_device.data, count, DType::f32, comm::Op::Sum, device).wait();
  g.all_reduce(host.data(), count, DType::f32, comm::Op::Sum, Stream{}).wait();
  bool ok = on_device.fetch<float>(count) == host;
  std::vector<uint16_t> narrow(count), narrow_host(count);
  comm::narrow(DType::bf16, contribution(count, world_rank()).data(), narrow.data(), count);
  narrow_host = narrow;
  DeviceBuffer narrow_device(narrow.data(), count * 2);
  g.all_reduce(narrow_device.data, count, DType::bf16, comm::Op::Sum, device).wait();
  g.all_reduce(narrow_host.data(), count, DType::bf16, comm::Op::Sum, Stream{}).wait();
  ok &= narrow_device.fetch<uint16_t>(count) == narrow_host;
  verdict("nccl_hierarchical", ok && g.hierarchical(), g.describe());
}

// What the tensor group does on a device: all-reduces left to the stream (no host wait; the
// second reads the first's result in stream order) and a fence; then an all-reduce captured into
// a CUDA Graph (its Work complete at once: recorded, not run) and the graph launched twice, then
// a fence. Four sums in all, against four on MPI.
bool check_stream_order_and_graph(Pair& p) {
  std::vector<float> host = contribution(1001, p.mpi.rank());
  for (float& x : host) x /= 64.0f;  // four sums over up to 8 ranks stay exact
  DeviceBuffer on_device(host.data(), host.size() * sizeof(float));
  auto stream = static_cast<cudaStream_t>(p.device.handle);
  for (int i = 0; i < 2; ++i) {
    p.nccl.all_reduce(on_device.data, host.size(), DType::f32, comm::Op::Sum, p.device).leave_to_stream();
    p.mpi.all_reduce(host.data(), host.size(), DType::f32, comm::Op::Sum, Stream{}).wait();
  }
  p.nccl.fence(p.device).wait();
  bool ok = on_device.fetch<float>(host.size()) == host;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t launchable = nullptr;
  ok &= cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  comm::Work recorded = p.nccl.all_reduce(on_device.data, host.size(), DType::f32, comm::Op::Sum, p.device);
  ok &= recorded.done();
  ok &= cudaStreamEndCapture(stream, &graph) == cudaSuccess;
  ok &= ok && cudaGraphInstantiate(&launchable, graph, 0) == cudaSuccess;
  for (int i = 0; ok && i < 2; ++i) {
    ok &= cudaGraphLaunch(launchable, stream) == cudaSuccess;
    p.mpi.all_reduce(host.data(), host.size(), DType::f32, comm::Op::Sum, Stream{}).wait();
  }
  p.nccl.fence(p.device).wait();
  ok &= on_device.fetch<float>(host.size()) == host;
  if (launchable) cudaGraphExecDestroy(launchable);
  if (graph) cudaGraphDestroy(graph);
  return ok;
}

// Rank 0 all-reduces, the others never join: rank 0's watchdog must end the job.
int hang(comm::Communicator& nccl, Stream device) {
  float* data = nullptr;
  cudaMalloc(&data, 1024 * sizeof(float));
  if (world_rank() == 0) nccl.all_reduce(data, 1024, DType::f32, comm::Op::Sum, device).wait();
  else MPI_Barrier(MPI_COMM_WORLD);  // never completes: rank 0 is not there
  std::printf("FAIL nccl_watchdog (rank %d returned)\n", world_rank());
  return 1;
}

#endif  // TRIDENT_NCCL

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (!comm::nccl_built_in()) return skip_all("built without NCCL");
  const comm::DeviceChoice choice = comm::choose_cuda_device(*comm::over_native(MPI_COMM_WORLD, "world"));
  if (!choice.problem.empty()) return skip_all(choice.problem);
#if TRIDENT_NCCL
  const bool hang_mode = argc > 1 && std::strcmp(argv[1], "--hang") == 0;
  comm::use_cuda_device(choice.index);
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const Stream device{Device{DeviceKind::cuda, choice.index}, stream};
  const int n = world_size();
  comm::NcclCommOptions options;
  options.name = "world";
  options.point_to_point = true;
  std::vector<topo::Level> levels(n, topo::Level::Node);
  auto nccl = comm::make_nccl_communicator(MPI_COMM_WORLD, levels, options, hang_mode ? 3.0 : 120.0, comm::Traffic::Count);
  if (hang_mode) return hang(*nccl, device);
  comm::MpiCommunicator mpi(MPI_COMM_WORLD, levels, "world", 120.0);
  Pair p{*nccl, mpi, device};
  verdict("nccl_all_reduce", check_all_reduce(p));
  verdict("nccl_reduce_scatter", check_reduce_scatter(p));
  verdict("nccl_all_gather", check_all_gather(p));
  verdict("nccl_broadcast", check_broadcast(p));
  verdict("nccl_send_recv", check_send_recv(p));
  verdict("nccl_receive_left_to_stream", check_receive_left_to_stream(p));
  verdict("nccl_ring_steps", check_ring_steps(p));
  verdict("nccl_gather_values", check_gather_values(p));
  verdict("nccl_barrier", check_barrier(p));
  check_hierarchical(device);
  verdict("nccl_stream_order_and_graph", check_stream_order_and_graph(p));
  nccl.reset();
  cudaStreamDestroy(stream);
#endif
  MPI_Finalize();
  return 0;
}
