// Bucketed, optionally overlapped, data-parallel gradient all-reduce.
#include "dp/reducer.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/backend.hpp"

namespace trident::dp {

GradientReducer::GradientReducer(comm::Communicator& data, Gradients gradients, double bucket_mb,
                                 bool overlap, int zero, DType wire)
    : data_(data), gradients_(std::move(gradients)), zero_(data.size() > 1 ? zero : 0), wire_(wire) {
  data_size_ = data.size();
  data_rank_ = data.rank();
  owned_ = {{0, gradients_.count}};
  if (data_size_ == 1) return;
  kernels::Backend& backend = kernels::backend_of(gradients_.device);
  for (const GradientSegment& s : gradients_.segments)
    REQUIRE(s.dtype == DType::f32, "gradient segment " << s.name << ": the reducer packs f32 buckets");
  REQUIRE(zero_ < 2 || gradients_.slots > 0, "ZeRO-2 and 3 reduce the model's gradient slots, and it has none");
  buckets_ = zero_ >= 2 ? plan_block_buckets(gradients_.segments, bucket_mb) : plan_buckets(gradients_.segments, bucket_mb);
  if (zero_) owned_ = owned_ranges(buckets_, data_rank_, data_size_);
  int64_t largest = 0;
  for (const Bucket& b : buckets_) largest = std::max(largest, packed_length(b));
  // Where the gradients are: the bucket is packed by the device's copies or roundings.
  packed_ = TensorBuffer(wire_, Shape{largest}, MemoryCategory::Communication, backend, MemoryKind::device);
  if (zero_) own_pieces_ = own_pieces(buckets_, data_rank_, data_size_);
  if (zero_ >= 2) {
    block_bucket_ = block_buckets(buckets_);
    owned_grads_ = Buffer<float>(static_cast<size_t>(model::total_count(owned_)), MemoryCategory::Gradients, backend,
                                 MemoryKind::device);
    if (wire_ != DType::f32)
      widened_ = Buffer<float>(static_cast<size_t>(largest / data_size_), MemoryCategory::Communication, backend,
                               MemoryKind::device);
    slot_reader_.assign(static_cast<size_t>(gradients_.slots), -1);
  }
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
  bucket_seconds_on_device();  // the marks of a step that did not finish, released
  if (device_overlap_) kernels::backend_of(gradients_.device).destroy_stream(comm_stream_);
}

model::FlatRanges GradientReducer::owned_by(int rank) const {
  return zero_ ? owned_ranges(buckets_, rank, data_size_) : owned_;
}

int64_t GradientReducer::packed_length(const Bucket& bucket) const {
  return zero_ ? shard_part(bucket, data_size_) * data_size_ : bucket.elements;
}

void GradientReducer::unpack(kernels::Context& ctx, const Bucket& bucket, const Tensor& packed, const Tensor& flat) {
  int64_t at = 0;  // the segment's first element in the packed bucket
  for (const GradientSegment& s : bucket.segments) {
    kernels::convert(ctx, flat.elements(s.offset, s.count), packed.elements(at, s.count));
    at += s.count;
  }
}

void GradientReducer::unpack_sums(kernels::Context& ctx, size_t b, const Tensor& packed) {
  const Bucket& bucket = buckets_[b];
  if (!zero_) {
    int64_t at = 0;
    for (const GradientSegment& s : bucket.segments) {
      kernels::convert(ctx, view(static_cast<float*>(s.data), s.count, packed.device), packed.elements(at, s.count));
      at += s.count;
    }
    return;
  }
  const bool add = zero_ >= 2 && bucket.ready_event >= 0;  // a block: one micro-batch's share of the step's sum
  for (const OwnPiece& piece : own_pieces_[b]) {
    const Tensor sums = packed.elements(piece.packed, piece.count);
    if (zero_ == 1) {
      kernels::convert(ctx, view(static_cast<float*>(piece.memory), piece.count, packed.device), sums);
      continue;
    }
    const Tensor own = owned_grads_.view().elements(piece.state, piece.count);
    if (!add) {
      kernels::convert(ctx, own, sums);
    } else if (wire_ == DType::f32) {
      kernels::add_inplace(ctx, own, sums);
    } else {
      const Tensor wide = widened_.view().elements(0, piece.count);
      kernels::convert(ctx, wide, sums);
      kernels::add_inplace(ctx, own, wide);
    }
  }
}

comm::Work GradientReducer::reduce(size_t b, Stream stream) {
  const Bucket& bucket = buckets_[b];
  const double start = steady_seconds();
  const int64_t length = packed_length(bucket);
  const Tensor packed = packed_.view().elements(0, length);
  kernels::Context ctx = gradients_.device;
  ctx.stream = stream;
  int64_t at = 0;
  for (const GradientSegment& s : bucket.segments) {  // a copy in f32, a rounding in 16 bits
    kernels::convert(ctx, packed.elements(at, s.count), view(static_cast<float*>(s.data), s.count, stream.device));
    at += s.count;
  }
  if (length > at) kernels::clear(ctx, packed.elements(at, length - at));  // ZeRO's padding adds nothing
  comm::Work reduced =
      zero_ ? data_.reduce_scatter(packed.data, static_cast<size_t>(length), wire_, comm::Op::Sum, stream)
            : data_.all_reduce(packed.data, static_cast<size_t>(length), wire_, comm::Op::Sum, stream);
  // The unpacking copies follow the collective in stream order where it is ordered on a device
  // stream (NCCL; a staged one is complete when it returns): the host waits only for a host one.
  if (!device_overlap_ && !reduced.stream_ordered()) reduced.wait();
  unpack_sums(ctx, b, packed);
  comm_seconds_ += steady_seconds() - start;
  return reduced;
}

void GradientReducer::launch(size_t b) {
  if (device_overlap_) launch_on_device(b);
  else launched_.push_back(stream_->enqueue([this, b] { reduce(b, gradients_.device.stream); }));
}

// The marks on the communication stream after its wait for backward: between them, the bucket's
// own copies and collective.
void GradientReducer::launch_on_device(size_t b) {
  kernels::Backend& backend = kernels::backend_of(gradients_.device);
  backend.stream_wait(comm_stream_, gradients_.device.stream);
  const kernels::Backend::Mark before = backend.mark(comm_stream_);
  launched_.push_back(reduce(b, comm_stream_));
  bucket_marks_.emplace_back(before, backend.mark(comm_stream_));
}

double GradientReducer::bucket_seconds_on_device() {
  kernels::Backend& backend = kernels::backend_of(gradients_.device);
  const auto marks = std::exchange(bucket_marks_, {});  // each pair released once (StreamIntervals')
  double seconds = 0;
  for (const auto& [before, after] : marks) seconds += backend.seconds_between(before, after);
  return seconds;
}

void GradientReducer::begin() {
  backward_running_ = true;
  next_to_launch_ = 0;
  launched_.clear();  // (waited for under the watchdog) before the marks after them are read
  bucket_seconds_on_device();  // marks a step left unread (it ended early) released
  waited_ = 0;
  comm_seconds_ = 0;
  if (zero_ < 2) return;
  std::fill(slot_reader_.begin(), slot_reader_.end(), -1);
  kernels::clear(gradients_.device, owned_grads_.view());
}

void GradientReducer::on_final(int event) {
  if (zero_ >= 2) {  // a block's bucket, every micro-batch; the rest waits for finish()
    if (event < 0) return;
    const size_t b = static_cast<size_t>(block_bucket_.at(static_cast<size_t>(event)));
    if (!overlapping()) {  // on the compute stream, before the slot's next writer
      reduce(b, gradients_.device.stream).leave_to_stream();
      return;
    }
    launch(b);
    slot_reader_[static_cast<size_t>(event % gradients_.slots)] = static_cast<int>(launched_.size()) - 1;
    return;
  }
  if (!stream_ && !device_overlap_) return;
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].ready_event >= event) launch(next_to_launch_++);
}

// The host stream runs its work in order: the reader done, everything before it is. On a device
// the compute stream waits for the whole communication stream (no finer wait is there), so
// that later readers are waited for too.
void GradientReducer::before_slot_reuse(int slot) {
  const int reader = slot_reader_.at(static_cast<size_t>(slot));
  if (reader < waited_) return;
  if (device_overlap_) kernels::backend_of(gradients_.device).stream_wait(gradients_.device.stream, comm_stream_);
  else launched_[static_cast<size_t>(reader)].wait();
  waited_ = device_overlap_ ? static_cast<int>(launched_.size()) : reader + 1;
}

comm::Work GradientReducer::launch_in_order(std::function<void(Stream)> work) {
  if (device_overlap_) {  // after the compute stream's work so far (the slot's last reader)
    kernels::backend_of(gradients_.device).stream_wait(comm_stream_, gradients_.device.stream);
    work(comm_stream_);
    return comm::Work{};
  }
  if (stream_) return stream_->enqueue([work = std::move(work), this] { work(gradients_.device.stream); });
  work(gradients_.device.stream);
  return comm::Work{};
}

void GradientReducer::wait_in_order(comm::Work& launched) {
  launched.wait();
  if (!device_overlap_) return;
  kernels::backend_of(gradients_.device).stream_wait(gradients_.device.stream, comm_stream_);
  waited_ = static_cast<int>(launched_.size());  // the compute stream waited for every reader
}

void GradientReducer::all_gather_params(const Tensor& params) {
  if (!zero_) return;
  REQUIRE(static_cast<int64_t>(params.numel()) == gradients_.count, "all_gather_params: " << params.numel() << " parameters for "
                                                                    << gradients_.count << " gradients");
  const double start = steady_seconds();
  kernels::Context& ctx = gradients_.device;
  if (gathered_.size() == 0 || gathered_.dtype() != params.dtype) {
    gathered_ = TensorBuffer();  // freed before its replacement exists
    gathered_ = TensorBuffer(params.dtype, Shape{static_cast<int64_t>(packed_.size())}, MemoryCategory::Communication,
                             kernels::backend_of(ctx), MemoryKind::device);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const int64_t length = packed_length(buckets_[b]);
    const Tensor packed = gathered_.view().elements(0, length);
    for (const OwnPiece& piece : own_pieces_[b])  // the own part packed, in the parameters' type
      kernels::copy(ctx, packed.elements(piece.packed, piece.count), params.elements(piece.flat, piece.count));
    // A host gather complete before its copies; a device one ordered before them on the stream.
    data_.all_gather(packed.data, static_cast<size_t>(length), params.dtype, ctx.stream).leave_to_stream();
    unpack(ctx, buckets_[b], packed, params);
  }
  data_.fence(ctx.stream).wait();  // the stream-ordered ones, under the watchdog
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
  comm_seconds_ = bucket_seconds_on_device();
  return backend.seconds_between(backward_done, may_go_on);
}

// ZeRO-2: the blocks' reductions that are still in flight, then the rest's buckets (nothing of
// them overlaps).
double GradientReducer::finish_zero2() {
  const double start = steady_seconds();
  backward_running_ = false;
  if (device_overlap_) kernels::backend_of(gradients_.device).stream_wait(gradients_.device.stream, comm_stream_);
  for (comm::Work& work : launched_) work.wait();
  auto reduce_the_rest = [&] {
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (buckets_[b].ready_event < 0) reduce(b, gradients_.device.stream).leave_to_stream();
    data_.fence(gradients_.device.stream).wait();
  };
  if (!device_overlap_) {  // comm_seconds_ is the host's clock, which reduce keeps
    reduce_the_rest();
    return steady_seconds() - start;
  }
  // On the device's clock: the blocks' reductions on their stream, and the rest between two marks.
  kernels::Backend& backend = kernels::backend_of(gradients_.device);
  const kernels::Backend::Mark rest_start = backend.mark(gradients_.device.stream);
  reduce_the_rest();
  const double rest = backend.seconds_between(rest_start, backend.mark(gradients_.device.stream));
  comm_seconds_ = bucket_seconds_on_device() + rest;
  return steady_seconds() - start;
}

void GradientReducer::sum_tied(comm::Communicator* embedding) {
  const Stream stream = gradients_.device.stream;
  auto sum = [&](void* memory, int64_t count) {
    REQUIRE(embedding != nullptr, "sum_tied: a copy of the tied embedding and no embedding group to sum it over");
    embedding->all_reduce(memory, static_cast<size_t>(count), DType::f32, comm::Op::Sum, stream).wait();
  };
  if (!zero_) {  // every element reduced in place (or one replica)
    for (const GradientSegment& s : gradients_.segments)
      if (s.tied) sum(s.data, s.count);
    return;
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!buckets_[b].segments.front().tied) continue;  // a tied segment's pieces are alone in theirs
    for (const OwnPiece& piece : own_pieces_[b])
      sum(zero_ == 1 ? piece.memory : owned_grads_.data() + piece.state, piece.count);
  }
}

double GradientReducer::finish() {
  if (data_size_ == 1) return 0.0;
  if (zero_ >= 2) return finish_zero2();
  const double start = steady_seconds();
  if (device_overlap_) {
    return finish_on_device();
  } else if (stream_) {
    backward_running_ = false;  // the reduction left is on the critical path now
    on_final(-1);  // launches whatever backward did not report (nothing, if the hook ran)
    for (comm::Work& work : launched_) work.wait();
  } else {
    // Each bucket left to the stream (waited for inside reduce where it is a host operation), and
    // one fence for all of them: no host wait per bucket on a device.
    for (size_t b = 0; b < buckets_.size(); ++b) reduce(b, gradients_.device.stream).leave_to_stream();
    data_.fence(gradients_.device.stream).wait();
  }
  return steady_seconds() - start;
}

}  // namespace trident::dp
