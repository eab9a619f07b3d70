// All-reduce, reduce-scatter and all-gather through memory shared by the group's ranks
// (Algo::Shm, comm.node_algo = shm): the collectives of ranks on one host without messages.
//
// The data goes in chunks of the window's capacity C floats; chunk c is staged in buffer c mod 2
// of every rank's part of the window. All-reduce of a chunk of `len` floats over P ranks, rank r
// owning segment s_r = segment_of(len, P, r):
//   1. every rank copies its chunk into its buffer;                           barrier
//   2. rank r sums s_r over all P buffers, in rank order 0 … P−1 (so every element has one sum,
//      the same bits on every rank), and stores it into s_r of its own buffer; barrier
//   3. every rank copies s_k from rank k's buffer, for every k.
// Reduce-scatter is 1–2 with the owner's segment of the whole buffer and the sum written to the
// caller's data; all-gather is 1 (each rank its own segment) and 3.
// Two buffers make a third barrier unnecessary: a rank writes buffer c mod 2 again for chunk
// c + 2 only after the first barrier of chunk c + 1, which every rank passes only after it has
// read all it needed of chunk c.
//
// Counted as what the ranks read from each other's memory — the bytes a message would carry —
// so the per-level figures equal the ring's: sent 2(P−1)/P·S per all-reduce (S divisible by P),
// (P−1)/P·S per reduce-scatter or all-gather. Per rank, the memory traffic is about 3·S against
// the ring's 7·S (copy into a staging buffer, copy out, add, per step), and 2 synchronisations
// per chunk against the ring's 2(P−1) exchanges — what counts when ranks share few cores.
#include <algorithm>
#include <cstring>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/clock.hpp"
#include "core/log.hpp"

namespace trident::comm {
namespace {

constexpr size_t kBlock = 1024;                     // floats summed on the stack at a time

// into[0, n) = Σ_k parts[k][0, n), k in order: the same bits on whichever rank computes it.
void sum_in_rank_order(float* into, const std::vector<const float*>& parts, size_t n, Op op) {
  float block[kBlock];
  for (size_t at = 0; at < n; at += kBlock) {
    const size_t len = std::min(kBlock, n - at);
    std::memcpy(block, parts[0] + at, len * sizeof(float));
    for (size_t k = 1; k < parts.size(); ++k) combine(block, parts[k] + at, len, op);
    std::memcpy(into + at, block, len * sizeof(float));
  }
}

// [begin, end) ∩ [lo, hi), as a pair with lo ≤ begin ≤ end ≤ hi (empty: begin = end).
std::pair<size_t, size_t> overlap(std::pair<size_t, size_t> range, size_t lo, size_t hi) {
  const size_t begin = std::min(std::max(range.first, lo), hi), end = std::min(range.second, hi);
  return {begin, std::max(begin, end)};
}

size_t length(std::pair<size_t, size_t> range) { return range.second - range.first; }

double floats(size_t n) { return static_cast<double>(n) * sizeof(float); }  // their bytes

}  // namespace

// Only a group inside one node (as the topology says; every member sees the same) shares
// memory: across emulated nodes the transfers must go through the link model's levels.
bool MpiCommunicator::shares_memory() {
  if (!shared_checked_) {
    shared_checked_ = true;
    const bool one_node = std::all_of(level_of_rank_.begin(), level_of_rank_.end(),
                                      [](topo::Level l) { return l == topo::Level::Node; });
    if (one_node) shared_ = SharedWindow::create(comm_, SharedWindow::kCapacity);
    if (!shared_)
      warn0("comm.node_algo = shm: the " + name_ + " group " +
            (one_node ? "is not on one host" : "spans more than one node") +
            "; its collectives use the ring instead");
  }
  return shared_ != nullptr;
}

// Each rank arrives with the next epoch and waits for all others, under the watchdog.
void MpiCommunicator::shm_barrier(const char* operation) {
  const uint64_t epoch = ++shm_epoch_;
  shared_->arrive(rank_, epoch);
  const double begin = steady_seconds(), deadline = begin + timeout_s_;
  for (int k = 0; k < size_; ++k)
    while (!shared_->arrived(k, epoch)) {
      if (steady_seconds() > deadline) {
        std::vector<int> missing;
        for (int m = 0; m < size_; ++m)
          if (!shared_->arrived(m, epoch)) missing.push_back(m);
        watchdog_expired(operation, missing);
      }
      pause_while_waiting(begin);
    }
}

void MpiCommunicator::shm_all_reduce(float* data, size_t n, Op op) {
  const size_t capacity = shared_->capacity();
  std::vector<const float*> parts(size_);
  for (size_t at = 0; at < n; at += capacity) {
    const double start = steady_seconds();
    const size_t len = std::min(capacity, n - at);
    const int which = static_cast<int>(shm_chunks_++ % 2);
    for (int k = 0; k < size_; ++k) parts[k] = shared_->buffer(k, which);
    float* mine = shared_->buffer(rank_, which);
    std::memcpy(mine, data + at, len * sizeof(float));
    shm_barrier("all-reduce (shared memory, staging)");
    const auto own = segment_of(len, size_, rank_);
    std::vector<const float*> own_parts(parts);
    for (const float*& p : own_parts) p += own.first;
    sum_in_rank_order(mine + own.first, own_parts, length(own), op);
    shm_barrier("all-reduce (shared memory, sums)");
    std::vector<std::pair<int, double>> transfers;
    for (int k = 0; k < size_; ++k) {
      const auto seg = segment_of(len, size_, k);
      std::memcpy(data + at + seg.first, parts[k] + seg.first, length(seg) * sizeof(float));
      if (k == rank_) continue;
      count(k, floats(length(seg) + length(own)), floats(length(own) + length(seg)));
      transfers.emplace_back(k, double(length(seg) + length(own)) * sizeof(float));
    }
    report(start, transfers);
  }
}

void MpiCommunicator::shm_reduce_scatter(float* data, size_t n) {
  const size_t capacity = shared_->capacity();
  const auto own = segment_of(n, size_, rank_);
  std::vector<const float*> parts(size_);
  for (size_t at = 0; at < n; at += capacity) {
    const double start = steady_seconds();
    const size_t len = std::min(capacity, n - at);
    const int which = static_cast<int>(shm_chunks_++ % 2);
    std::memcpy(shared_->buffer(rank_, which), data + at, len * sizeof(float));
    shm_barrier("reduce-scatter (shared memory)");
    const auto part = overlap(own, at, at + len);
    for (int k = 0; k < size_; ++k) parts[k] = shared_->buffer(k, which) + (part.first - at);
    sum_in_rank_order(data + part.first, parts, length(part), Op::Sum);
    std::vector<std::pair<int, double>> transfers;
    for (int k = 0; k < size_; ++k) {
      if (k == rank_) continue;
      const size_t theirs = length(overlap(segment_of(n, size_, k), at, at + len));
      count(k, floats(theirs), floats(length(part)));
      transfers.emplace_back(k, double(std::max(theirs, length(part))) * sizeof(float));
    }
    report(start, transfers);
  }
}

void MpiCommunicator::shm_all_gather(char* data, size_t n, size_t width) {
  const size_t capacity = shared_->capacity() * sizeof(float) / width;  // elements a buffer holds
  const auto own = segment_of(n, size_, rank_);
  for (size_t at = 0; at < n; at += capacity) {
    const double start = steady_seconds();
    const size_t len = std::min(capacity, n - at);
    const int which = static_cast<int>(shm_chunks_++ % 2);
    const auto mine = overlap(own, at, at + len);
    char* my_buffer = reinterpret_cast<char*>(shared_->buffer(rank_, which));
    std::memcpy(my_buffer + (mine.first - at) * width, data + mine.first * width, length(mine) * width);
    shm_barrier("all-gather (shared memory)");
    std::vector<std::pair<int, double>> transfers;
    for (int k = 0; k < size_; ++k) {
      if (k == rank_) continue;
      const auto theirs = overlap(segment_of(n, size_, k), at, at + len);
      const char* their_buffer = reinterpret_cast<const char*>(shared_->buffer(k, which));
      std::memcpy(data + theirs.first * width, their_buffer + (theirs.first - at) * width, length(theirs) * width);
      const double sent = double(length(mine) * width), received = double(length(theirs) * width);
      count(k, sent, received);
      transfers.emplace_back(k, std::max(sent, received));
    }
    report(start, transfers);
  }
}

}  // namespace trident::comm
