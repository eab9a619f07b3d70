// The heartbeat ring.
#include "comm/heartbeat.hpp"

#include <chrono>
#include <cstdio>
#include <deque>

#include "comm/agreement.hpp"
#include "comm/mpi/native_handle.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/mpi_util.hpp"

namespace trident::comm {
namespace {

constexpr int kTag = 7;
constexpr long long kDone = -1;
constexpr double kPollSeconds = 0.05;

bool thread_multiple() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

}  // namespace

Heartbeat::Heartbeat(Communicator& world, double interval_s, double timeout_s)
    : rank_(world.rank()), size_(world.size()), interval_s_(interval_s), timeout_s_(timeout_s) {
  if (size_ == 1 || timeout_s <= 0) return;
  if (!thread_multiple()) {  // every rank sees the same answer: none starts
    warn0("no heartbeat (comm.heartbeat_timeout_s): this MPI does not provide MPI_THREAD_MULTIPLE; a stopped "
          "rank is detected by the collective watchdog (comm.timeout_s) only");
    return;
  }
  MPI_CHECK(MPI_Comm_dup(native_handle(world), &comm_));
  left_host_ = all_gather_strings(world, host_name())[(rank_ + size_ - 1) % size_];
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  thread_.join();
  MPI_Comm_free(&comm_);
}

void Heartbeat::run() {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  MPI_Irecv(&received_, 1, MPI_LONG_LONG, left, kTag, comm_, &receive_);
  struct Beat {
    long long payload;
    MPI_Request request;
  };
  std::deque<Beat> in_flight;  // sends not yet received (a deque keeps their addresses)
  double heard_at = steady_seconds(), last_loop = heard_at, sent_at = -1e300;
  long long beats = 0;
  bool sent_done = false;
  while (!left_done_ || !sent_done) {
    const double now = steady_seconds();
    if (!sent_done && (stopping_ || now - sent_at >= interval_s_)) {
      sent_done = stopping_;
      in_flight.push_back({sent_done ? kDone : beats++, MPI_REQUEST_NULL});
      MPI_Isend(&in_flight.back().payload, 1, MPI_LONG_LONG, right, kTag, comm_, &in_flight.back().request);
      sent_at = now;
    }
    for (int done = 1; done && !in_flight.empty();) {
      MPI_Test(&in_flight.front().request, &done, MPI_STATUS_IGNORE);
      if (done) in_flight.pop_front();
    }
    if (!left_done_) watch_left(heard_at, last_loop);
    std::this_thread::sleep_for(std::chrono::duration<double>(kPollSeconds));
  }
  for (Beat& beat : in_flight) MPI_Wait(&beat.request, MPI_STATUS_IGNORE);
}

// Receives what the left neighbour sent; aborts the job when it has been silent too long.
void Heartbeat::watch_left(double& heard_at, double& last_loop) {
  const double now = steady_seconds();
  // This thread itself did not run for a while (the job was suspended, or this rank was):
  // the neighbour's silence is not its fault; count again.
  if (now - last_loop > interval_s_ + 1.0) heard_at = now;
  last_loop = now;
  int arrived = 1;
  while (arrived && !left_done_) {
    MPI_Test(&receive_, &arrived, MPI_STATUS_IGNORE);
    if (!arrived) break;
    heard_at = now;
    if (received_ == kDone) left_done_ = true;
    else MPI_Irecv(&received_, 1, MPI_LONG_LONG, (rank_ + size_ - 1) % size_, kTag, comm_, &receive_);
  }
  if (!left_done_ && now - heard_at > timeout_s_) {
    char message[512];
    std::snprintf(message, sizeof message,
                  "rank %d (host %s) has sent no heartbeat for %.1f s: it is stopped (SIGSTOP?), hung or its "
                  "node is unresponsive; ending the job so that it can be restarted (comm.heartbeat_timeout_s)",
                  (rank_ + size_ - 1) % size_, left_host_.c_str(), now - heard_at);
    fatal_one(message);
  }
}

}  // namespace trident::comm
