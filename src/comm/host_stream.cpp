// The host stream's thread and its Work.
#include "comm/host_stream.hpp"

#include <mpi.h>

#include "comm/communicator.hpp"

namespace trident::comm {

bool concurrent_callers_supported() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

const char* concurrent_callers_requirement() { return "MPI_THREAD_MULTIPLE"; }

class HostStream::TaskWork final : public PendingWork {
 public:
  TaskWork(HostStream& stream, uint64_t ticket) : stream_(stream), ticket_(ticket) {}
  bool test() override { return stream_.finished(ticket_); }
  void wait() override {
    std::unique_lock<std::mutex> lock(stream_.mutex_);
    stream_.ran_.wait(lock, [&] { return stream_.completed_ >= ticket_; });
  }

 private:
  HostStream& stream_;
  uint64_t ticket_;
};

HostStream::HostStream(const std::atomic<bool>* patient) : thread_(&HostStream::run, this, patient) {}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  queued_.notify_all();
  thread_.join();
}

Work HostStream::enqueue(std::function<void()> task) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    ticket = ++enqueued_;
  }
  queued_.notify_one();
  return Work(std::make_unique<TaskWork>(*this, ticket));
}

bool HostStream::finished(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= ticket;
}

void HostStream::run(const std::atomic<bool>* patient) {
  wait_patiently(patient);
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queued_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++completed_;
    }
    ran_.notify_all();
  }
}

}  // namespace trident::comm
