// A host stream: an ordered queue of work run by one thread of its own — the CPU counterpart
// of a CUDA communication stream. What is enqueued runs in enqueue order, after everything
// enqueued before it; the Work returned completes when it has run. Collectives called from a
// task run on the stream's thread (their Stream argument is the CPU's: they run in the caller),
// so the caller's thread computes meanwhile: this is how the gradient reduction overlaps
// backward on the CPU (dp/reducer.hpp). A device communicator gets the same overlap from its
// device streams instead.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/work.hpp"

namespace trident::comm {

// Whether communicators may be driven from a host stream's thread while other threads
// communicate too (MPI: MPI_THREAD_MULTIPLE).
bool concurrent_callers_supported();
const char* concurrent_callers_requirement();  // what it takes: "MPI_THREAD_MULTIPLE"

class HostStream {
 public:
  // patient: while *patient is true the stream thread's waits sleep between polls instead of
  // yielding (wait_patiently, comm/communicator.hpp); null: never.
  explicit HostStream(const std::atomic<bool>* patient = nullptr);
  ~HostStream();  // runs what is queued, then stops
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  // The Work must be waited for (or dropped, which waits) before the stream is destroyed.
  Work enqueue(std::function<void()> task);

 private:
  class TaskWork;
  void run(const std::atomic<bool>* patient);
  bool finished(uint64_t ticket);

  std::mutex mutex_;
  std::condition_variable queued_, ran_;
  std::deque<std::function<void()>> tasks_;
  uint64_t enqueued_ = 0, completed_ = 0;  // tickets: task k completes when completed_ ≥ k
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace trident::comm
