// Ring and tree collectives on MPI point-to-point, with per-level byte counts and a watchdog;
// the typed operations of the interface on top of them.
#include "comm/mpi/mpi_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "comm/watchdog.hpp"
#include "comm/wrappers/widen.hpp"

namespace trident::comm {
namespace {

constexpr size_t kChunk = 1 << 16;  // floats per message (256 KiB): the ring's pipelining unit
constexpr size_t kTreeChunk = 1 << 18;  // floats per tree step (1 MiB): levels work in parallel
constexpr int kTagBase = 1 << 20;       // collectives' tags, apart from user send/recv tags

double bytes_of(size_t floats) { return static_cast<double>(floats) * sizeof(float); }

// Waiting yields the core between polls. A background thread (the gradient reduction's stream) is
// patient while backward runs on the same core (and the pipeline's receives always are,
// pipeline/runner.cpp): after kSpinSeconds of a wait — most transfers
// end by then — it sleeps kPauseSeconds between polls, so that the wait does not take the CPU
// from the computation it overlaps. Once backward is over (the flag falls) nothing else needs
// the core and the rest of its reduction is on the critical path: it yields like the main
// thread, whose waits (a ring step, a stage's input) a sleep's wake-up latency would lengthen.
constexpr double kSpinSeconds = 100e-6, kPauseSeconds = 20e-6;
thread_local const std::atomic<bool>* patient_while = nullptr;

}  // namespace

void pause_while_waiting(double since) {
  const bool patient = patient_while && patient_while->load(std::memory_order_relaxed);
  if (!patient || steady_seconds() - since < kSpinSeconds) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::duration<double>(kPauseSeconds));
}

void wait_patiently(const std::atomic<bool>* overlapping) { patient_while = overlapping; }

namespace {

int world_rank_of(MPI_Comm comm, int rank) {
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int translated = MPI_UNDEFINED;
  MPI_Group_translate_ranks(group, 1, &rank, world, &translated);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return translated;
}

}  // namespace

Algo parse_algo(const std::string& name) {
  if (name == "ring") return Algo::Ring;
  if (name == "tree") return Algo::Tree;
  if (name == "shm") return Algo::Shm;
  if (name == "mpi") return Algo::Mpi;
  throw std::invalid_argument("unknown collective algorithm '" + name + "'");
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::vector<topo::Level> level_of_rank, std::string name,
                                 double timeout_s, Traffic kind, Algo algo)
    : comm_(comm), level_of_rank_(std::move(level_of_rank)), name_(std::move(name)),
      timeout_s_(timeout_s), kind_(kind), algo_(algo) {
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  REQUIRE(static_cast<int>(level_of_rank_.size()) == size_, "one level per rank of " << name_);
}

MpiCommunicator::~MpiCommunicator() {
  shared_.reset();  // the window lives on comm_
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_handle_ && comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

void MpiCommunicator::count(int peer, double sent_bytes, double received_bytes) {
  const int level = static_cast<int>(level_of_rank_[peer]);
  traffic_.sent[level] += sent_bytes;
  traffic_.received[level] += received_bytes;
  if (kind_ != Traffic::Count && sent_bytes > 0) count_sent(kind_, sent_bytes);
}

void MpiCommunicator::wait_all(std::vector<MPI_Request>& requests, const char* operation,
                            const std::vector<int>& peers) {
  const double begin = steady_seconds(), deadline = begin + timeout_s_;
  for (;;) {
    int done = 0;
    MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (steady_seconds() > deadline) watchdog_expired(operation, peers);
    pause_while_waiting(begin);
  }
}

void MpiCommunicator::watchdog_expired(const char* operation, const std::vector<int>& peers) const {
  std::vector<std::pair<int, int>> awaited;
  for (int peer : peers) awaited.emplace_back(peer, world_rank_of(comm_, peer));
  fatal_one(watchdog_message(operation, name_, size_, timeout_s_, awaited));
}

void MpiCommunicator::report(double start, const std::vector<std::pair<int, double>>& peer_bytes) const {
  if (!observer_) return;
  TransferStep step;
  step.start = start;
  for (const auto& [peer, bytes] : peer_bytes) step.level_bytes.emplace_back(level_of_rank_[peer], bytes);
  observer_(step);
}

void combine(float* into, const float* from, size_t n, Op op) {
  if (op == Op::Sum) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) into[i] += from[i];
    return;
  }
#pragma omp simd
  for (size_t i = 0; i < n; ++i) into[i] = from[i] > into[i] ? from[i] : into[i];
}

void MpiCommunicator::exchange(const float* out, size_t count_out, int to, float* in, size_t count_in,
                            int from, bool reduce, const char* operation, Op op) {
  const double start = steady_seconds();
  const std::vector<std::pair<int, double>> transfers = {{to, count_out * sizeof(float)},
                                                         {from, count_in * sizeof(float)}};
  if (!reduce)
    return exchange_bytes(reinterpret_cast<const char*>(out), count_out * sizeof(float), to,
                          reinterpret_cast<char*>(in), count_in * sizeof(float), from, operation);
  std::vector<MPI_Request> requests;
  if (reduce && scratch_.size() < count_in) scratch_.resize(count_in);
  float* landing = reduce ? scratch_.data() : in;
  for (size_t at = 0, chunk = 0; at < count_in; at += kChunk, ++chunk) {
    requests.emplace_back();
    MPI_CHECK(MPI_Irecv(landing + at, static_cast<int>(std::min(kChunk, count_in - at)), MPI_FLOAT,
                        from, kTagBase + static_cast<int>(chunk), comm_, &requests.back()));
  }
  const size_t receives = requests.size();
  for (size_t at = 0, chunk = 0; at < count_out; at += kChunk, ++chunk) {
    requests.emplace_back();
    MPI_CHECK(MPI_Isend(out + at, static_cast<int>(std::min(kChunk, count_out - at)), MPI_FLOAT, to,
                        kTagBase + static_cast<int>(chunk), comm_, &requests.back()));
  }
  count(to, bytes_of(count_out), 0);
  count(from, 0, bytes_of(count_in));
  // Add each chunk as it arrives, while the later ones are still in flight.
  const double begin = steady_seconds(), deadline = begin + timeout_s_;
  for (size_t done_receives = 0; done_receives < receives;) {
    int index = MPI_UNDEFINED, flag = 0;
    MPI_CHECK(MPI_Testany(static_cast<int>(receives), requests.data(), &index, &flag, MPI_STATUS_IGNORE));
    if (flag && index != MPI_UNDEFINED) {
      const size_t at = static_cast<size_t>(index) * kChunk, n = std::min(kChunk, count_in - at);
      combine(in + at, landing + at, n, op);
      ++done_receives;
      continue;
    }
    if (steady_seconds() > deadline) {
      std::vector<MPI_Request> rest(requests.begin(), requests.begin() + receives);
      wait_all(rest, operation, {from});  // reports and aborts
    }
    pause_while_waiting(begin);
  }
  std::vector<MPI_Request> sends(requests.begin() + receives, requests.end());
  wait_all(sends, operation, {to});
  report(start, transfers);
}

void MpiCommunicator::exchange_bytes(const char* out, size_t bytes_out, int to, char* in, size_t bytes_in, int from,
                                     const char* operation) {
  const double start = steady_seconds();
  const size_t chunk_bytes = kChunk * sizeof(float);
  std::vector<MPI_Request> requests;
  for (size_t at = 0, chunk = 0; at < bytes_in; at += chunk_bytes, ++chunk) {
    requests.emplace_back();
    MPI_CHECK(MPI_Irecv(in + at, static_cast<int>(std::min(chunk_bytes, bytes_in - at)), MPI_BYTE, from,
                        kTagBase + static_cast<int>(chunk), comm_, &requests.back()));
  }
  for (size_t at = 0, chunk = 0; at < bytes_out; at += chunk_bytes, ++chunk) {
    requests.emplace_back();
    MPI_CHECK(MPI_Isend(out + at, static_cast<int>(std::min(chunk_bytes, bytes_out - at)), MPI_BYTE, to,
                        kTagBase + static_cast<int>(chunk), comm_, &requests.back()));
  }
  count(to, static_cast<double>(bytes_out), 0);
  count(from, 0, static_cast<double>(bytes_in));
  wait_all(requests, operation, {from, to});
  report(start, {{to, static_cast<double>(bytes_out)}, {from, static_cast<double>(bytes_in)}});
}

void MpiCommunicator::ring_reduce_scatter(float* data, size_t n, Op op) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  for (int step = 0; step < size_ - 1; ++step) {
    const auto out = segment_of(n, size_, ((rank_ - step - 1) % size_ + size_) % size_);
    const auto in = segment_of(n, size_, ((rank_ - step - 2) % size_ + size_) % size_);
    exchange(data + out.first, out.second - out.first, right, data + in.first, in.second - in.first,
             left, true, "reduce-scatter (ring)", op);
  }
}

void MpiCommunicator::ring_reduce_scatter_low16(uint16_t* data, size_t n, DType dtype) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  for (int step = 0; step < size_ - 1; ++step) {
    const auto out = segment_of(n, size_, ((rank_ - step - 1) % size_ + size_) % size_);
    const auto in = segment_of(n, size_, ((rank_ - step - 2) % size_ + size_) % size_);
    const size_t len = in.second - in.first;
    if (landing16_.size() < len) landing16_.resize(len), wide_.resize(len), scratch_.resize(len);
    exchange_bytes(reinterpret_cast<const char*>(data + out.first), (out.second - out.first) * sizeof(uint16_t), right,
                   reinterpret_cast<char*>(landing16_.data()), len * sizeof(uint16_t), left,
                   "reduce-scatter (ring, 16-bit)");
    widen(dtype, data + in.first, wide_.data(), len);
    widen(dtype, landing16_.data(), scratch_.data(), len);
    for (size_t i = 0; i < len; ++i) wide_[i] += scratch_[i];
    narrow(dtype, wide_.data(), data + in.first, len);
  }
}

void MpiCommunicator::ring_all_gather(char* data, size_t n, size_t width) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  for (int step = 0; step < size_ - 1; ++step) {
    const auto out = segment_of(n, size_, ((rank_ - step) % size_ + size_) % size_);
    const auto in = segment_of(n, size_, ((rank_ - step - 1) % size_ + size_) % size_);
    exchange_bytes(data + out.first * width, (out.second - out.first) * width, right, data + in.first * width,
                   (in.second - in.first) * width, left, "all-gather (ring)");
  }
}

// Double binary tree (NCCL's): the first half of the buffer is summed up the binary tree of
// rank order (r's children 2r+1, 2r+2, root 0) and the second half up the mirrored tree (rank
// n−1−r in the first tree's place, root n−1), then the sums flow back down. Both trees run at
// once, chunk by chunk, so every link carries traffic both ways and the tree's levels work on
// different chunks at the same time.
namespace {

struct TreeRole {
  int parent = -1;  // -1: the root
  std::vector<int> children;
};

TreeRole tree_role(int rank, int size, bool mirrored) {
  auto to_rank = [&](int position) { return mirrored ? size - 1 - position : position; };
  const int position = mirrored ? size - 1 - rank : rank;
  TreeRole role;
  if (position > 0) role.parent = to_rank((position - 1) / 2);
  for (int c : {2 * position + 1, 2 * position + 2})
    if (c < size) role.children.push_back(to_rank(c));
  return role;
}

}  // namespace

void MpiCommunicator::tree_all_reduce(float* data, size_t n, Op op) {
  const TreeRole roles[2] = {tree_role(rank_, size_, false), tree_role(rank_, size_, true)};
  const size_t half = n / 2;
  const size_t begin[2] = {0, half}, length[2] = {half, n - half};
  if (scratch_.size() < 2 * kTreeChunk) scratch_.resize(2 * kTreeChunk);
  const size_t chunks = (std::max(length[0], length[1]) + kTreeChunk - 1) / kTreeChunk;
  std::vector<MPI_Request> pending;  // sends still in flight
  std::vector<int> pending_peers;
  auto send = [&](const float* from, size_t len, int peer, int tag) {
    pending.emplace_back();
    MPI_CHECK(MPI_Isend(from, static_cast<int>(len), MPI_FLOAT, peer, tag, comm_, &pending.back()));
    pending_peers.push_back(peer);
    count(peer, bytes_of(len), 0);
  };
  // Up, chunk c of tree t: the children's partial sums are added, the result goes to the parent.
  // Each tree's step waits only for that tree's messages, so the two never wait on each other.
  auto up = [&](int t, size_t c) {
    if (c * kTreeChunk >= length[t]) return;
    float* at = data + begin[t] + c * kTreeChunk;
    const size_t len = std::min(kTreeChunk, length[t] - c * kTreeChunk);
    std::vector<MPI_Request> receives;
    std::vector<std::pair<int, double>> transfers;
    const double start = steady_seconds();
    for (size_t k = 0; k < roles[t].children.size(); ++k) {
      receives.emplace_back();
      MPI_CHECK(MPI_Irecv(scratch_.data() + k * kTreeChunk, static_cast<int>(len), MPI_FLOAT,
                          roles[t].children[k], kTagBase + t, comm_, &receives.back()));
      count(roles[t].children[k], 0, bytes_of(len));
      transfers.emplace_back(roles[t].children[k], len * sizeof(float));
    }
    wait_all(receives, "all-reduce (tree, up)", roles[t].children);
    report(start, transfers);
    for (size_t k = 0; k < roles[t].children.size(); ++k) combine(at, scratch_.data() + k * kTreeChunk, len, op);
    if (roles[t].parent >= 0) send(at, len, roles[t].parent, kTagBase + t);
  };
  // Down, chunk c of tree t: the total from the parent, passed on to the children.
  auto down = [&](int t, size_t c) {
    if (c * kTreeChunk >= length[t]) return;
    float* at = data + begin[t] + c * kTreeChunk;
    const size_t len = std::min(kTreeChunk, length[t] - c * kTreeChunk);
    if (roles[t].parent >= 0) {
      std::vector<MPI_Request> receive(1);
      const double start = steady_seconds();
      MPI_CHECK(MPI_Irecv(at, static_cast<int>(len), MPI_FLOAT, roles[t].parent, kTagBase + 2 + t,
                          comm_, &receive[0]));
      count(roles[t].parent, 0, bytes_of(len));
      wait_all(receive, "all-reduce (tree, down)", {roles[t].parent});
      report(start, {{roles[t].parent, len * sizeof(float)}});
    }
    for (int child : roles[t].children) send(at, len, child, kTagBase + 2 + t);
  };
  // Per chunk, the tree in which this rank waits for nobody goes first (a leaf sends up at
  // once, a root sends down at once), so that the two trees' transfers run side by side.
  const int leaf_first = roles[1].children.empty() && !roles[0].children.empty() ? 1 : 0;
  for (size_t c = 0; c < chunks; ++c) up(leaf_first, c), up(1 - leaf_first, c);
  // The down phase receives into the buffers the up phase sent from: those sends complete first.
  wait_all(pending, "all-reduce (tree, up)", pending_peers);
  pending.clear(), pending_peers.clear();
  const int root_first = roles[1].parent < 0 && roles[0].parent >= 0 ? 1 : 0;
  for (size_t c = 0; c < chunks; ++c) down(root_first, c), down(1 - root_first, c);
  wait_all(pending, "all-reduce (tree)", pending_peers);
}

void MpiCommunicator::all_reduce_f32(float* data, size_t n, Algo algo, Op op) {
  if (size_ == 1 || n == 0) return;
  switch (algo) {
    case Algo::Ring:
      ring_reduce_scatter(data, n, op);
      ring_all_gather(reinterpret_cast<char*>(data), n, sizeof(float));
      return;
    case Algo::Tree: tree_all_reduce(data, n, op); return;
    case Algo::Shm:
      if (shares_memory()) return shm_all_reduce(data, n, op);
      ring_reduce_scatter(data, n, op);
      ring_all_gather(reinterpret_cast<char*>(data), n, sizeof(float));
      return;
    case Algo::Mpi:
      // Counted as its ring equivalent: MPI does not say what it sent.
      for (int step = 0; step < 2 * (size_ - 1); ++step) {
        const auto seg = segment_of(n, size_, (rank_ + step) % size_);
        count((rank_ + 1) % size_, bytes_of(seg.second - seg.first), 0);
        count((rank_ + size_ - 1) % size_, 0, bytes_of(seg.second - seg.first));
      }
      for (size_t at = 0; at < n; at += size_t(1) << 30)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + at, static_cast<int>(std::min(n - at, size_t(1) << 30)),
                                MPI_FLOAT, op == Op::Sum ? MPI_SUM : MPI_MAX, comm_));
      return;
  }
}

void MpiCommunicator::reduce_scatter_f32(float* data, size_t n, Algo algo, Op op) {
  if (size_ == 1 || n == 0) return;
  if (algo == Algo::Shm && op == Op::Sum && shares_memory()) return shm_reduce_scatter(data, n);
  ring_reduce_scatter(data, n, op);
}

void MpiCommunicator::all_gather_f32(float* data, size_t n, Algo algo) { all_gather_elements(data, n, sizeof(float), algo); }

void MpiCommunicator::all_gather_elements(void* data, size_t n, size_t width, Algo algo) {
  if (size_ == 1 || n == 0) return;
  char* bytes = static_cast<char*>(data);
  if (algo == Algo::Shm && shares_memory()) return shm_all_gather(bytes, n, width);
  ring_all_gather(bytes, n, width);
}

// A binary tree rooted at `root`: each rank receives from its parent, then sends to its
// children, each transfer waited for (and reported) before the next.
void MpiCommunicator::tree_broadcast(void* data, size_t count, DType dtype, int root) {
  const int relative = (rank_ - root + size_) % size_;
  auto absolute = [&](int r) { return (r + root) % size_; };
  if (relative != 0) recv(data, count, dtype, absolute((relative - 1) / 2), kTagBase + 2, Stream{}).wait();
  for (int c : {2 * relative + 1, 2 * relative + 2})
    if (c < size_) send(data, count, dtype, absolute(c), kTagBase + 2, Stream{}).wait();
}

}  // namespace trident::comm
