// Ring and tree collectives on MPI point-to-point, with per-level byte counts and a watchdog.
#include "comm/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/clock.hpp"
#include "core/error.hpp"

namespace trident::comm {
namespace {

constexpr size_t kChunk = 1 << 16;  // floats per message (256 KiB): the ring's pipelining unit
constexpr size_t kTreeChunk = 1 << 18;  // floats per tree step (1 MiB): levels work in parallel
constexpr int kTagBase = 1 << 20;       // collectives' tags, apart from user send/recv tags

// Waiting yields the core between polls. A background thread (the gradient reducer's) is
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

void parse_link(const std::string& text, LinkModel& model, int level) {
  if (text == "off") {
    model.latency_s[level] = model.bandwidth_Bps[level] = 0;
    return;
  }
  double latency_us = 0, bandwidth_gbps = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lf,%lf%c", &latency_us, &bandwidth_gbps, &tail) != 2 ||
      latency_us < 0 || bandwidth_gbps <= 0)
    throw std::invalid_argument("'" + text + "' is not 'LATENCY_US,BANDWIDTH_GBPS' (e.g. 5,25) or off");
  model.latency_s[level] = latency_us * 1e-6;
  model.bandwidth_Bps[level] = bandwidth_gbps * 1e9;
}

Communicator::Communicator(MPI_Comm comm, std::vector<topo::Level> level_of_rank, std::string name,
                           double timeout_s, const LinkModel& links, Traffic kind)
    : comm_(comm), level_of_rank_(std::move(level_of_rank)), name_(std::move(name)),
      timeout_s_(timeout_s), links_(links), kind_(kind) {
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  REQUIRE(static_cast<int>(level_of_rank_.size()) == size_, "one level per rank of " << name_);
}

std::pair<size_t, size_t> Communicator::segment_of(size_t n, int parts, int k) {
  const size_t base = n / parts, extra = n % parts;
  const size_t begin = k * base + std::min<size_t>(k, extra);
  return {begin, begin + base + (static_cast<size_t>(k) < extra ? 1 : 0)};
}

void Communicator::count(int peer, size_t sent_floats, size_t received_floats) {
  const int level = static_cast<int>(level_of_rank_[peer]);
  traffic_.sent[level] += static_cast<double>(sent_floats) * sizeof(float);
  traffic_.received[level] += static_cast<double>(received_floats) * sizeof(float);
  if (kind_ != Traffic::Count && sent_floats > 0)
    count_sent(kind_, static_cast<double>(sent_floats) * sizeof(float));
}

void Communicator::wait_all(std::vector<MPI_Request>& requests, const char* operation,
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

void Communicator::watchdog_expired(const char* operation, const std::vector<int>& peers) const {
  std::string waiting;
  for (int peer : peers)
    waiting += (waiting.empty() ? "" : ", ") + std::to_string(peer) + " (world rank " +
               std::to_string(world_rank_of(comm_, peer)) + ")";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeout_s_);
  fatal_one("watchdog: " + std::string(operation) + " on the " + name_ + " group (" +
            std::to_string(size_) + " ranks) has waited " + seconds +
            " s (comm.timeout_s) for rank(s) " + waiting +
            " of the group; aborting the job so that no rank hangs");
}

void Communicator::emulate(double start, const std::vector<std::pair<int, double>>& peer_bytes) const {
  double slowest = 0.0;
  for (const auto& [peer, bytes] : peer_bytes)
    slowest = std::max(slowest, links_.seconds(static_cast<int>(level_of_rank_[peer]), bytes));
  const double remaining = start + slowest - steady_seconds();
  if (remaining > 0) std::this_thread::sleep_for(std::chrono::duration<double>(remaining));
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

void Communicator::exchange(const float* out, size_t count_out, int to, float* in, size_t count_in,
                            int from, bool reduce, const char* operation, Op op) {
  const double start = steady_seconds();
  const std::vector<std::pair<int, double>> transfers = {{to, count_out * sizeof(float)},
                                                         {from, count_in * sizeof(float)}};
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
  count(to, count_out, 0);
  count(from, 0, count_in);
  if (!reduce) {
    wait_all(requests, operation, {from, to});
    emulate(start, transfers);
    return;
  }
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
  emulate(start, transfers);
}

void Communicator::ring_reduce_scatter(float* data, size_t n, Op op) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  for (int step = 0; step < size_ - 1; ++step) {
    const auto out = segment_of(n, size_, ((rank_ - step - 1) % size_ + size_) % size_);
    const auto in = segment_of(n, size_, ((rank_ - step - 2) % size_ + size_) % size_);
    exchange(data + out.first, out.second - out.first, right, data + in.first, in.second - in.first,
             left, true, "reduce-scatter (ring)", op);
  }
}

void Communicator::ring_all_gather(float* data, size_t n) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  for (int step = 0; step < size_ - 1; ++step) {
    const auto out = segment_of(n, size_, ((rank_ - step) % size_ + size_) % size_);
    const auto in = segment_of(n, size_, ((rank_ - step - 1) % size_ + size_) % size_);
    exchange(data + out.first, out.second - out.first, right, data + in.first, in.second - in.first,
             left, false, "all-gather (ring)");
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

void Communicator::tree_all_reduce(float* data, size_t n, Op op) {
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
    count(peer, len, 0);
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
      count(roles[t].children[k], 0, len);
      transfers.emplace_back(roles[t].children[k], len * sizeof(float));
    }
    wait_all(receives, "all-reduce (tree, up)", roles[t].children);
    emulate(start, transfers);
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
      count(roles[t].parent, 0, len);
      wait_all(receive, "all-reduce (tree, down)", {roles[t].parent});
      emulate(start, {{roles[t].parent, len * sizeof(float)}});
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

void Communicator::all_reduce(float* data, size_t n, Algo algo, Op op) {
  if (size_ == 1 || n == 0) return;
  switch (algo) {
    case Algo::Ring:
      ring_reduce_scatter(data, n, op);
      ring_all_gather(data, n);
      return;
    case Algo::Tree: tree_all_reduce(data, n, op); return;
    case Algo::Shm:
      if (shares_memory()) return shm_all_reduce(data, n, op);
      ring_reduce_scatter(data, n, op);
      ring_all_gather(data, n);
      return;
    case Algo::Mpi:
      // Counted as its ring equivalent: MPI does not say what it sent.
      for (int step = 0; step < 2 * (size_ - 1); ++step) {
        const auto seg = segment_of(n, size_, (rank_ + step) % size_);
        count((rank_ + 1) % size_, seg.second - seg.first, 0);
        count((rank_ + size_ - 1) % size_, 0, seg.second - seg.first);
      }
      for (size_t at = 0; at < n; at += size_t(1) << 30)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + at, static_cast<int>(std::min(n - at, size_t(1) << 30)),
                                MPI_FLOAT, op == Op::Sum ? MPI_SUM : MPI_MAX, comm_));
      return;
  }
}

void Communicator::reduce_scatter(float* data, size_t n, Algo algo) {
  if (size_ == 1 || n == 0) return;
  if (algo == Algo::Shm && shares_memory()) return shm_reduce_scatter(data, n);
  ring_reduce_scatter(data, n, Op::Sum);
}

void Communicator::all_gather(float* data, size_t n, Algo algo) {
  if (size_ == 1 || n == 0) return;
  if (algo == Algo::Shm && shares_memory()) return shm_all_gather(data, n);
  ring_all_gather(data, n);
}

void Communicator::broadcast(float* data, size_t n, int root) {
  if (size_ == 1 || n == 0) return;
  const int relative = (rank_ - root + size_) % size_;
  auto absolute = [&](int r) { return (r + root) % size_; };
  if (relative != 0) recv(data, n, absolute((relative - 1) / 2), kTagBase + 2);
  for (int c : {2 * relative + 1, 2 * relative + 2})
    if (c < size_) send(data, n, absolute(c), kTagBase + 2);
}

void Communicator::all_reduce_scalars(double* values, int n, Op op) {
  if (size_ == 1 || n == 0) return;
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, op == Op::Sum ? MPI_SUM : MPI_MAX, comm_, &requests[0]));
  std::vector<int> everyone;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) everyone.push_back(r);
  wait_all(requests, "all-reduce (scalars)", everyone);
}

void Communicator::broadcast_scalars(double* values, int n, int root) {
  if (size_ == 1 || n == 0) return;
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Ibcast(values, n, MPI_DOUBLE, root, comm_, &requests[0]));
  wait_all(requests, "broadcast (scalars)", {root});
}

void Communicator::send(const float* data, size_t n, int peer, int tag) {
  const double start = steady_seconds();
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Isend(data, static_cast<int>(n), MPI_FLOAT, peer, tag, comm_, &requests[0]));
  count(peer, n, 0);
  wait_all(requests, "send", {peer});
  emulate(start, {{peer, n * sizeof(float)}});
}

MPI_Request Communicator::isend(const float* data, size_t n, int peer, int tag) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Isend(data, static_cast<int>(n), MPI_FLOAT, peer, tag, comm_, &request));
  count(peer, n, 0);
  return request;
}

void Communicator::wait(MPI_Request& request, const char* operation, int peer) {
  if (request == MPI_REQUEST_NULL) return;
  std::vector<MPI_Request> requests{request};
  wait_all(requests, operation, {peer});
  request = MPI_REQUEST_NULL;
}

void Communicator::recv(float* data, size_t n, int peer, int tag) {
  const double start = steady_seconds();
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Irecv(data, static_cast<int>(n), MPI_FLOAT, peer, tag, comm_, &requests[0]));
  count(peer, 0, n);
  wait_all(requests, "receive", {peer});
  emulate(start, {{peer, n * sizeof(float)}});
}

}  // namespace trident::comm
