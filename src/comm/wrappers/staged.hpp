// Device buffers over a host communicator: with comm.backend = mpi and the model on a device
// (several ranks sharing one GPU, which NCCL refuses; or the guarded backend, kernels/guard),
// an operation on a device stream is staged — its device buffer copied into host memory, the
// host operation run there, and the result copied back: collectives complete before they return
// (as a device stream would order them), a send or receive when it completes (wait() or a
// successful test()). Operations on the host's stream pass straight through.
//
// The copies are the kernel backend's (upload, download), handed in as DeviceCopies so that
// comm/ depends on nothing above it. Each staged operation holds its own host buffer until it
// completes, so sends and receives in flight do not share one.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.hpp"

namespace trident::comm {

struct DeviceCopies {
  // count values of dtype between host memory and memory on stream.device, ordered on stream;
  // complete when the call returns.
  std::function<void(void* host, const void* device, size_t count, DType dtype, Stream stream)> to_host;
  std::function<void(void* device, const void* host, size_t count, DType dtype, Stream stream)> to_device;
  bool set() const { return to_host && to_device; }
};

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> host, DeviceCopies copies);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }
  LevelBytes traffic() const override { return host_->traffic(); }
  Work all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) override;
  Work reduce_scatter(void* data, size_t count, DType dtype, Op op, Stream stream) override;
  Work all_gather(void* data, size_t count, DType dtype, Stream stream) override;
  Work broadcast(void* data, size_t count, DType dtype, int root, Stream stream) override;
  Work send(const void* data, size_t count, DType dtype, int peer, int tag, Stream stream) override;
  Work recv(void* data, size_t count, DType dtype, int peer, int tag, Stream stream) override;
  Work gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) override;
  Work all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) override;
  Work barrier(Stream stream) override { return host_->barrier(Stream{}); }
  void observe_steps(StepObserver observer) override { host_->observe_steps(std::move(observer)); }

 private:
  // An in-place operation on `data` (count values): staged in, run by `operation` on the host
  // copy, staged out; complete on return.
  Work in_place(void* data, size_t count, DType dtype, Stream stream, const std::function<Work(void*)>& operation);
  std::unique_ptr<Communicator> host_;
  DeviceCopies copies_;
};

// `inner` itself without copies, else staged.
std::unique_ptr<Communicator> with_staging(std::unique_ptr<Communicator> inner, const DeviceCopies& copies);

}  // namespace trident::comm
