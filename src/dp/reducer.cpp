// Bucketed, optionally overlapped, data-parallel gradient all-reduce.
#include "dp/reducer.hpp"

#include <algorithm>
#include <string>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/backend.hpp"

namespace trident::dp {

Shard shard_of(int64_t n, int rank, int size) {
  const auto segment = comm::segment_of(static_cast<size_t>(n), size, rank);
  return {static_cast<int64_t>(segment.first), static_cast<int64_t>(segment.second)};
}

GradientReducer::GradientReducer(comm::Communicator& data, Gradients gradients, double bucket_mb,
                                 bool overlap, bool zero, DType wire)
    : data_(data), gradients_(std::move(gradients)), zero_(zero), wire_(wire) {
  data_size_ = data.size();
  data_rank_ = data.rank();
  const int64_t n = gradients_.count;
  shard_ = zero ? shard_of(n, data_rank_, data_size_) : Shard{0, n};
  if (data_size_ == 1) return;
  kernels::Backend& backend = kernels::backend_of(gradients_.device);
  if (zero) {  // the reduce-scatter works in place on the gradient buffer (narrowed in place for 16 bits)
    if (wire_ != DType::f32)
      shard16_ = TensorBuffer(wire_, Shape{shard_.count()}, MemoryCategory::Communication, backend, MemoryKind::device);
    return;
  }
  for (const GradientSegment& s : gradients_.segments)
    REQUIRE(s.dtype == DType::f32, "gradient segment " << s.name << ": the reducer packs f32 buckets");
  buckets_ = plan_buckets(gradients_.segments, bucket_mb);
  int64_t largest = 0;
  for (const Bucket& b : buckets_) largest = std::max(largest, b.elements);
  // Where the gradients are: the bucket is packed by the device's copies or roundings.
  packed_ = TensorBuffer(wire_, Shape{largest}, MemoryCategory::Communication, backend, MemoryKind::device);
  // On a device the overlap is a communication stream ordered by events, not a host thread: from
  // another thread a bucket's kernels and collective would run on another device's default
  // stream, unordered with backward's kernels. (The guarded backend takes this path too, its
  // streams the host's, so that the path runs in every test.)
  if (overlap && !gradients_.device.stream.device.is_cpu()) {
    device_overlap_ = true;
    comm_stream_ = kernels::backend_of(gradients_.device).create_stream();
    return;
  }
  const bool can_overlap = overlap && comm::concurrent_callers_supported();
  if (overlap && !can_overlap)
    warn0(std::string("comm.overlap = true needs ") + comm::concurrent_callers_requirement() +
          ", which this MPI does not provide; the gradient reduction runs after backward");
  if (can_overlap) stream_ = std::make_unique<comm::HostStream>(&backward_running_);  // backward shares the core
}

GradientReducer::~GradientReducer() {
  launched_.clear();  // every bucket done before the stream stops
  if (device_overlap_) kernels::backend_of(gradients_.device).destroy_stream(comm_stream_);
}

comm::Work GradientReducer::reduce(const Bucket& bucket, Stream stream) {
  const double start = steady_seconds();
  const Tensor packed = packed_.view();
  const Device device = stream.device;
  kernels::Context ctx = gradients_.device;
  ctx.stream = stream;
  int64_t at = 0;
  for (const GradientSegment& s : bucket.segments) {  // a copy in f32, a rounding in 16 bits
    kernels::convert(ctx, packed.elements(at, s.count), view(static_cast<float*>(s.data), s.count, device));
    at += s.count;
  }
  comm::Work reduced = data_.all_reduce(packed.data, static_cast<size_t>(bucket.elements), wire_, comm::Op::Sum, stream);
  // The unpacking copies follow the all-reduce in stream order where it is ordered on a device
  // stream (NCCL; a staged one is complete when it returns): the host waits only for a host one.
  if (!device_overlap_ && !reduced.stream_ordered()) reduced.wait();
  at = 0;
  for (const GradientSegment& s : bucket.segments) {
    kernels::convert(ctx, view(static_cast<float*>(s.data), s.count, device), packed.elements(at, s.count));
    at += s.count;
  }
  comm_seconds_ += steady_seconds() - start;
  return reduced;
}

void GradientReducer::launch_on_device(const Bucket& bucket) {
  kernels::backend_of(gradients_.device).stream_wait(comm_stream_, gradients_.device.stream);
  launched_.push_back(reduce(bucket, comm_stream_));
}

void GradientReducer::begin() {
  backward_running_ = true;
  next_to_launch_ = 0;
  launched_.clear();
  comm_seconds_ = 0;
}

void GradientReducer::on_final(int event) {
  if (!stream_ && !device_overlap_) return;
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].ready_event >= event) {
    const Bucket& bucket = buckets_[next_to_launch_++];
    if (device_overlap_) launch_on_device(bucket);
    else launched_.push_back(stream_->enqueue([this, &bucket] { reduce(bucket, gradients_.device.stream); }));
  }
}

void GradientReducer::reduce_scatter() {
  const double start = steady_seconds();
  kernels::Context& ctx = gradients_.device;
  const Tensor flat = view(gradients_.flat, static_cast<size_t>(gradients_.count), ctx.stream.device);
  // Own shard summed in place (16 bits: in the first half of the buffer, rounded there).
  const Tensor sent = wire_ == DType::f32 ? flat : kernels::narrow(ctx, flat, wire_);
  data_.reduce_scatter(sent.data, static_cast<size_t>(gradients_.count), wire_, comm::Op::Sum, ctx.stream).wait();
  if (wire_ != DType::f32) {  // widened back through a copy: the 16-bit shard overlaps its f32 place
    kernels::copy(ctx, shard16_.view(), sent.elements(shard_.begin, shard_.count()));
    kernels::convert(ctx, flat.elements(shard_.begin, shard_.count()), shard16_.view());
  }
  comm_seconds_ += steady_seconds() - start;
}

void GradientReducer::all_gather_params(const Tensor& params) {
  if (!zero_ || data_size_ == 1) return;
  REQUIRE(static_cast<int64_t>(params.numel()) == gradients_.count, "all_gather_params: " << params.numel() << " parameters for "
                                                                    << gradients_.count << " gradients");
  const double start = steady_seconds();
  data_.all_gather(params.data, static_cast<size_t>(gradients_.count), params.dtype, gradients_.device.stream).wait();
  comm_seconds_ += steady_seconds() - start;
}

// The exposed communication on the device's clock (seed §3.2): from the point where the compute
// stream has finished backward to the point where it may go on (the optimizer next), after the
// communication stream's last unpacking — the time the compute stream stood waiting. The host
// does not wait for the compute stream in between; it waits for the buckets' collectives here
// and for the mark after them (by then backward is done: the last bucket follows all of it).
double GradientReducer::finish_on_device() {
  kernels::Backend& backend = kernels::backend_of(gradients_.device);
  const kernels::Backend::Mark backward_done = backend.mark(gradients_.device.stream);
  on_final(-1);
  backend.stream_wait(gradients_.device.stream, comm_stream_);
  const kernels::Backend::Mark may_go_on = backend.mark(gradients_.device.stream);
  for (comm::Work& work : launched_) work.wait();
  return backend.seconds_between(backward_done, may_go_on);
}

double GradientReducer::finish() {
  if (data_size_ == 1) return 0.0;
  const double start = steady_seconds();
  if (zero_) {
    reduce_scatter();
  } else if (device_overlap_) {
    return finish_on_device();
  } else if (stream_) {
    backward_running_ = false;  // the reduction left is on the critical path now
    on_final(-1);  // launches whatever backward did not report (nothing, if the hook ran)
    for (comm::Work& work : launched_) work.wait();
  } else {
    // Each bucket left to the stream (waited for inside reduce where it is a host operation), and
    // one fence for all of them: no host wait per bucket on a device.
    for (const Bucket& bucket : buckets_) reduce(bucket, gradients_.device.stream).leave_to_stream();
    data_.fence(gradients_.device.stream).wait();
  }
  return steady_seconds() - start;
}

}  // namespace trident::dp
