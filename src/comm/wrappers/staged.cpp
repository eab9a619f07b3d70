// Device buffers over a host communicator (the header says when and how).
#include "comm/wrappers/staged.hpp"

#include <vector>

namespace trident::comm {
namespace {

// The host operation in flight, its host buffer, and what completes it (the copy back to the
// device, for results): run once, on the first wait() or successful test().
class StagedWork final : public PendingWork {
 public:
  StagedWork(Work host, std::vector<unsigned char> buffer, std::function<void(const unsigned char*)> finish)
      : host_(std::move(host)), buffer_(std::move(buffer)), finish_(std::move(finish)) {}
  bool test() override {
    if (!host_.test()) return false;
    complete();
    return true;
  }
  void wait() override {
    host_.wait();
    complete();
  }

 private:
  void complete() {
    if (finish_) finish_(buffer_.data());
    finish_ = nullptr;
  }
  Work host_;
  std::vector<unsigned char> buffer_;  // the heap block stays where it is when the vector moves
  std::function<void(const unsigned char*)> finish_;
};

std::vector<unsigned char> host_buffer(size_t count, DType dtype) {
  return std::vector<unsigned char>(count * dtype_size(dtype));
}

}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> host, DeviceCopies copies)
    : host_(std::move(host)), copies_(std::move(copies)) {}

// Complete when it returns: a caller on a device stream may enqueue work that reads the result
// next (the gradient reducer's unpacking on its communication stream), as after an NCCL
// collective, without waiting on the host.
Work StagedCommunicator::in_place(void* data, size_t count, DType dtype, Stream stream,
                                  const std::function<Work(void*)>& operation) {
  std::vector<unsigned char> buffer = host_buffer(count, dtype);
  copies_.to_host(buffer.data(), data, count, dtype, stream);
  operation(buffer.data()).wait();
  copies_.to_device(data, buffer.data(), count, dtype, stream);
  return Work();
}

Work StagedCommunicator::all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) {
  if (stream.device.is_cpu()) return host_->all_reduce(data, count, dtype, op, stream);
  return in_place(data, count, dtype, stream,
                  [&](void* host) { return host_->all_reduce(host, count, dtype, op, Stream{}); });
}

Work StagedCommunicator::reduce_scatter(void* data, size_t count, DType dtype, Op op, Stream stream) {
  if (stream.device.is_cpu()) return host_->reduce_scatter(data, count, dtype, op, stream);
  return in_place(data, count, dtype, stream,
                  [&](void* host) { return host_->reduce_scatter(host, count, dtype, op, Stream{}); });
}

Work StagedCommunicator::all_gather(void* data, size_t count, DType dtype, Stream stream) {
  if (stream.device.is_cpu()) return host_->all_gather(data, count, dtype, stream);
  return in_place(data, count, dtype, stream,
                  [&](void* host) { return host_->all_gather(host, count, dtype, Stream{}); });
}

Work StagedCommunicator::broadcast(void* data, size_t count, DType dtype, int root, Stream stream) {
  if (stream.device.is_cpu()) return host_->broadcast(data, count, dtype, root, stream);
  return in_place(data, count, dtype, stream,
                  [&](void* host) { return host_->broadcast(host, count, dtype, root, Stream{}); });
}

Work StagedCommunicator::send(const void* data, size_t count, DType dtype, int peer, int tag, Stream stream) {
  if (stream.device.is_cpu()) return host_->send(data, count, dtype, peer, tag, stream);
  std::vector<unsigned char> buffer = host_buffer(count, dtype);
  copies_.to_host(buffer.data(), data, count, dtype, stream);
  Work host = host_->send(buffer.data(), count, dtype, peer, tag, Stream{});
  return Work(std::make_unique<StagedWork>(std::move(host), std::move(buffer), nullptr));
}

Work StagedCommunicator::recv(void* data, size_t count, DType dtype, int peer, int tag, Stream stream) {
  if (stream.device.is_cpu()) return host_->recv(data, count, dtype, peer, tag, stream);
  std::vector<unsigned char> buffer = host_buffer(count, dtype);
  Work host = host_->recv(buffer.data(), count, dtype, peer, tag, Stream{});
  auto finish = [this, data, count, dtype, stream](const unsigned char* values) {
    copies_.to_device(data, values, count, dtype, stream);
  };
  return Work(std::make_unique<StagedWork>(std::move(host), std::move(buffer), finish));
}

Work StagedCommunicator::gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) {
  if (stream.device.is_cpu()) return host_->gather(in, out, count, dtype, root, stream);
  std::vector<unsigned char> mine = host_buffer(count, dtype), all = host_buffer(count * size(), dtype);
  copies_.to_host(mine.data(), in, count, dtype, stream);
  host_->gather(mine.data(), all.data(), count, dtype, root, Stream{}).wait();
  if (rank() == root) copies_.to_device(out, all.data(), count * size(), dtype, stream);
  return Work();
}

Work StagedCommunicator::all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) {
  if (stream.device.is_cpu()) return host_->all_gather_values(in, out, count, dtype, stream);
  std::vector<unsigned char> mine = host_buffer(count, dtype), all = host_buffer(count * size(), dtype);
  copies_.to_host(mine.data(), in, count, dtype, stream);
  host_->all_gather_values(mine.data(), all.data(), count, dtype, Stream{}).wait();
  copies_.to_device(out, all.data(), count * size(), dtype, stream);
  return Work();
}

std::unique_ptr<Communicator> with_staging(std::unique_ptr<Communicator> inner, const DeviceCopies& copies) {
  if (!copies.set()) return inner;
  return std::make_unique<StagedCommunicator>(std::move(inner), copies);
}

}  // namespace trident::comm
