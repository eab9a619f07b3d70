// Work: the handle of an operation a communicator (or a host stream) has started. wait() blocks
// until it is complete — every wait of an MPI operation under the communicator's watchdog —
// and test() says whether it is, without blocking. A default Work is complete: an operation
// that finished inside the call that started it (docs/COMMUNICATION.md, "Work").
#pragma once

#include <memory>
#include <vector>

namespace trident::comm {

// What a Work waits for; implemented by each kind of pending operation.
class PendingWork {
 public:
  virtual ~PendingWork() = default;
  virtual bool test() = 0;  // true once complete (and then its completion steps have run)
  virtual void wait() = 0;  // returns once complete
  // Whether the operation is ordered on a device stream (an NCCL one): work enqueued after it on
  // that stream sees its result without the host waiting.
  virtual bool stream_ordered() const { return false; }
  // A stream-ordered operation about to be dropped without a wait (Work::leave_to_stream):
  // what it holds is let go the same way.
  virtual void let_go() {}
};

class Work {
 public:
  Work() = default;
  explicit Work(std::unique_ptr<PendingWork> pending) : pending_(std::move(pending)) {}
  Work(Work&&) = default;
  Work& operator=(Work&& other) {
    wait();  // an operation is never dropped while in flight: its buffers would be reused
    pending_ = std::move(other.pending_);
    return *this;
  }
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work() { wait(); }

  // Blocks until the operation is complete; afterwards its buffers may be reused.
  void wait() {
    if (!pending_) return;
    pending_->wait();
    pending_.reset();
  }
  // Whether the operation is complete (it progresses as a side effect); never blocks.
  bool test() {
    if (pending_ && pending_->test()) pending_.reset();
    return !pending_;
  }
  bool done() const { return !pending_; }  // complete, as last seen by wait() or test()
  bool stream_ordered() const { return pending_ && pending_->stream_ordered(); }
  // The caller will not wait: what reads or writes the operation's buffers next is enqueued on
  // the same device stream, whose order suffices (a tensor-parallel all-reduce between two
  // GEMMs). A stream-ordered operation is let go — its completion, and the watchdog over it, come
  // with a later Communicator::fence on that stream; any other is waited for here.
  void leave_to_stream() {
    if (pending_ && pending_->stream_ordered()) {
      pending_->let_go();
      pending_.reset();
    } else {
      wait();
    }
  }

 private:
  std::unique_ptr<PendingWork> pending_;
};

// Several operations as one Work, complete once all of them are: a sequence of operations
// ordered on one stream (the hierarchical all-reduce's levels on a device stream).
class AllOf final : public PendingWork {
 public:
  explicit AllOf(std::vector<Work> works) : works_(std::move(works)) {}
  bool test() override {
    for (Work& work : works_)
      if (!work.test()) return false;
    return true;
  }
  void wait() override {
    for (Work& work : works_) work.wait();
  }
  bool stream_ordered() const override {
    for (const Work& work : works_)
      if (!work.done() && !work.stream_ordered()) return false;
    return true;
  }
  void let_go() override {
    for (Work& work : works_) work.leave_to_stream();
  }

 private:
  std::vector<Work> works_;
};

inline Work all_of(std::vector<Work> works) { return Work(std::make_unique<AllOf>(std::move(works))); }

}  // namespace trident::comm
