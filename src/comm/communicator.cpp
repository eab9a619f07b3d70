// Ring and tree collectives on MPI point-to-point, with per-level byte counts and a watchdog.
#include "comm/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/error.hpp"

namespace trident::comm {
namespace {

constexpr size_t kChunk = 1 << 20;  // floats per message (4 MiB): the ring's pipelining unit
constexpr size_t kTreeChunk = 1 << 18;  // floats per tree step (1 MiB): levels work in parallel
constexpr int kTagBase = 1 << 20;       // collectives' tags, apart from user send/recv tags

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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
  if (name == "mpi") return Algo::Mpi;
  throw std::invalid_argument("unknown collective algorithm '" + name + "'");
}

Communicator::Communicator(MPI_Comm comm, std::vector<topo::Level> level_of_rank, std::string name,
                           double timeout_s)
    : comm_(comm), level_of_rank_(std::move(level_of_rank)), name_(std::move(name)), timeout_s_(timeout_s) {
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
}

void Communicator::wait_all(std::vector<MPI_Request>& requests, const char* operation,
                            const std::vector<int>& peers) {
  const double deadline = seconds_now() + timeout_s_;
  for (;;) {
    int done = 0;
    MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (seconds_now() > deadline) {
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
    std::this_thread::yield();
  }
}

void Communicator::exchange(const float* out, size_t count_out, int to, float* in, size_t count_in,
                            int from, bool reduce, const char* operation) {
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
    return;
  }
  // Add each chunk as it arrives, while the later ones are still in flight.
  const double deadline = seconds_now() + timeout_s_;
  for (size_t done_receives = 0; done_receives < receives;) {
    int index = MPI_UNDEFINED, flag = 0;
    MPI_CHECK(MPI_Testany(static_cast<int>(receives), requests.data(), &index, &flag, MPI_STATUS_IGNORE));
    if (flag && index != MPI_UNDEFINED) {
      const size_t at = static_cast<size_t>(index) * kChunk, n = std::min(kChunk, count_in - at);
#pragma omp simd
      for (size_t i = 0; i < n; ++i) in[at + i] += landing[at + i];
      ++done_receives;
      continue;
    }
    if (seconds_now() > deadline) {
      std::vector<MPI_Request> rest(requests.begin(), requests.begin() + receives);
      wait_all(rest, operation, {from});  // reports and aborts
    }
    std::this_thread::yield();
  }
  std::vector<MPI_Request> sends(requests.begin() + receives, requests.end());
  wait_all(sends, operation, {to});
}

void Communicator::ring_reduce_scatter(float* data, size_t n) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  for (int step = 0; step < size_ - 1; ++step) {
    const auto out = segment_of(n, size_, ((rank_ - step - 1) % size_ + size_) % size_);
    const auto in = segment_of(n, size_, ((rank_ - step - 2) % size_ + size_) % size_);
    exchange(data + out.first, out.second - out.first, right, data + in.first, in.second - in.first,
             left, true, "reduce-scatter (ring)");
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

// Binary tree (rank r's children 2r+1, 2r+2): sums flow up to rank 0 chunk by chunk, then the
// result flows down; the tree's levels work on different chunks at the same time.
void Communicator::tree_all_reduce(float* data, size_t n) {
  const int parent = (rank_ - 1) / 2;
  std::vector<int> children;
  for (int c : {2 * rank_ + 1, 2 * rank_ + 2})
    if (c < size_) children.push_back(c);
  if (scratch_.size() < 2 * kTreeChunk) scratch_.resize(2 * kTreeChunk);
  std::vector<MPI_Request> up;
  for (size_t at = 0; at < n; at += kTreeChunk) {
    const size_t len = std::min(kTreeChunk, n - at);
    std::vector<MPI_Request> from_children;
    for (size_t c = 0; c < children.size(); ++c) {
      from_children.emplace_back();
      MPI_CHECK(MPI_Irecv(scratch_.data() + c * kTreeChunk, static_cast<int>(len), MPI_FLOAT,
                          children[c], kTagBase, comm_, &from_children.back()));
      count(children[c], 0, len);
    }
    wait_all(from_children, "all-reduce (tree, up)", children);
    for (size_t c = 0; c < children.size(); ++c)
      for (size_t i = 0; i < len; ++i) data[at + i] += scratch_[c * kTreeChunk + i];
    if (rank_ == 0) continue;
    up.emplace_back();
    MPI_CHECK(MPI_Isend(data + at, static_cast<int>(len), MPI_FLOAT, parent, kTagBase, comm_, &up.back()));
    count(parent, len, 0);
  }
  wait_all(up, "all-reduce (tree, up)", {parent});
  std::vector<MPI_Request> down;
  for (size_t at = 0; at < n; at += kTreeChunk) {
    const size_t len = std::min(kTreeChunk, n - at);
    if (rank_ != 0) {
      std::vector<MPI_Request> from_parent(1);
      MPI_CHECK(MPI_Irecv(data + at, static_cast<int>(len), MPI_FLOAT, parent, kTagBase + 1, comm_,
                          &from_parent[0]));
      count(parent, 0, len);
      wait_all(from_parent, "all-reduce (tree, down)", {parent});
    }
    for (int child : children) {
      down.emplace_back();
      MPI_CHECK(MPI_Isend(data + at, static_cast<int>(len), MPI_FLOAT, child, kTagBase + 1, comm_, &down.back()));
      count(child, len, 0);
    }
  }
  wait_all(down, "all-reduce (tree, down)", children);
}

void Communicator::all_reduce(float* data, size_t n, Algo algo) {
  if (size_ == 1 || n == 0) return;
  switch (algo) {
    case Algo::Ring:
      ring_reduce_scatter(data, n);
      ring_all_gather(data, n);
      return;
    case Algo::Tree: tree_all_reduce(data, n); return;
    case Algo::Mpi:
      // Counted as its ring equivalent: MPI does not say what it sent.
      for (int step = 0; step < 2 * (size_ - 1); ++step) {
        const auto seg = segment_of(n, size_, (rank_ + step) % size_);
        count((rank_ + 1) % size_, seg.second - seg.first, 0);
        count((rank_ + size_ - 1) % size_, 0, seg.second - seg.first);
      }
      for (size_t at = 0; at < n; at += size_t(1) << 30)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + at, static_cast<int>(std::min(n - at, size_t(1) << 30)),
                                MPI_FLOAT, MPI_SUM, comm_));
      return;
  }
}

void Communicator::reduce_scatter(float* data, size_t n) {
  if (size_ > 1) ring_reduce_scatter(data, n);
}

void Communicator::all_gather(float* data, size_t n) {
  if (size_ > 1) ring_all_gather(data, n);
}

void Communicator::broadcast(float* data, size_t n, int root) {
  if (size_ == 1 || n == 0) return;
  const int relative = (rank_ - root + size_) % size_;
  auto absolute = [&](int r) { return (r + root) % size_; };
  if (relative != 0) recv(data, n, absolute((relative - 1) / 2), kTagBase + 2);
  for (int c : {2 * relative + 1, 2 * relative + 2})
    if (c < size_) send(data, n, absolute(c), kTagBase + 2);
}

void Communicator::send(const float* data, size_t n, int peer, int tag) {
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Isend(data, static_cast<int>(n), MPI_FLOAT, peer, tag, comm_, &requests[0]));
  count(peer, n, 0);
  wait_all(requests, "send", {peer});
}

void Communicator::recv(float* data, size_t n, int peer, int tag) {
  std::vector<MPI_Request> requests(1);
  MPI_CHECK(MPI_Irecv(data, static_cast<int>(n), MPI_FLOAT, peer, tag, comm_, &requests[0]));
  count(peer, 0, n);
  wait_all(requests, "receive", {peer});
}

}  // namespace trident::comm
