// ZeRO-3's sharded parameters: the own parts, their gathers into the model's slots and copies.
#include "dp/parameter_shards.hpp"

#include <algorithm>

#include "comm/wrappers/widen.hpp"
#include "core/error.hpp"
#include "kernels/backend.hpp"

namespace trident::dp {

ParameterShards::ParameterShards(comm::Communicator& data, GradientReducer& reducer,
                                 std::vector<GradientSegment> parameters, double bucket_mb, int slots,
                                 const kernels::Context& device)
    : data_(data), reducer_(reducer), device_(device), data_size_(data.size()) {
  REQUIRE(!parameters.empty(), "ParameterShards: no parameters");
  const DType dtype = parameters.front().dtype;
  buckets_ = plan_block_buckets(parameters, bucket_mb);  // a bucket per block, then the rest's: the reducer's
  own_pieces_ = own_pieces(buckets_, data.rank(), data_size_);
  const model::FlatRanges owned = owned_ranges(buckets_, data.rank(), data_size_);
  REQUIRE(buckets_.size() == reducer.buckets() && total_count(owned) == total_count(reducer.owned()),
          "ParameterShards: the parameters' buckets are not the reducer's (" << buckets_.size() << " against "
                                                                           << reducer.buckets() << ")");
  block_bucket_ = block_buckets(buckets_);
  int64_t largest = 0;
  for (const Bucket& b : buckets_) largest = std::max(largest, shard_part(b, data_size_) * data_size_);
  slot_block_.assign(static_cast<size_t>(slots), -1);
  prefetch_.resize(static_cast<size_t>(slots));
  kernels::Backend& backend = kernels::backend_of(device_);
  shard_ = TensorBuffer(dtype, Shape{total_count(owned)}, MemoryCategory::Parameters, backend, MemoryKind::device);
  gathered_ = TensorBuffer(dtype, Shape{largest}, MemoryCategory::Communication, backend, MemoryKind::device);
}

comm::Work ParameterShards::gather_packed(size_t b, const Tensor& packed, Stream stream) {
  kernels::Context ctx = device_;
  ctx.stream = stream;
  for (const OwnPiece& piece : own_pieces_[b])  // the own part at its place, in the storage type
    kernels::copy(ctx, packed.elements(piece.packed, piece.count), shard_.view().elements(piece.state, piece.count));
  return data_.all_gather(packed.data, static_cast<size_t>(packed.numel()), packed.dtype, stream);
}

// The copies out of `packed` follow the all-gather in stream order where it is ordered on a
// device stream (NCCL), which the host leaves to the stream; a host one is waited for first
// (Work::leave_to_stream does either).
comm::Work ParameterShards::launch_gather(size_t b) {
  return reducer_.launch_in_order([this, b](Stream stream) {
    const Bucket& bucket = buckets_[b];
    const Tensor packed = gathered_.view().elements(0, shard_part(bucket, data_size_) * data_size_);
    // The fence of the model's pass, or after_update's, waits for a device one.
    gather_packed(b, packed, stream).leave_to_stream();
    kernels::Context ctx = device_;
    ctx.stream = stream;
    int64_t at = 0;
    for (const GradientSegment& s : bucket.segments) {
      kernels::copy(ctx, view(s.data, s.dtype, static_cast<size_t>(s.count), stream.device), packed.elements(at, s.count));
      at += s.count;
    }
  });
}

void ParameterShards::gather(size_t b) {
  comm::Work gathered = launch_gather(b);
  reducer_.wait_in_order(gathered);
}

void ParameterShards::finish_prefetch(int slot) {
  Prefetch& p = prefetch_[static_cast<size_t>(slot)];
  if (p.block < 0) return;
  reducer_.wait_in_order(p.work);
  slot_block_[static_cast<size_t>(slot)] = p.block;
  p.block = -1;
}

// The prefetch shares gathered_ with a later gather: the reducer's path runs them in order, and
// each unpacks before the next packs.
bool ParameterShards::gather_block(int layer, int next) {
  const int slots = static_cast<int>(slot_block_.size()), slot = layer % slots;
  const bool prefetched = prefetch_[static_cast<size_t>(slot)].block == layer;
  finish_prefetch(slot);  // this block's, or another's that the slot is to hold no longer
  const bool fresh = prefetched || slot_block_[static_cast<size_t>(slot)] != layer;
  if (slot_block_[static_cast<size_t>(slot)] != layer) {
    slot_block_[static_cast<size_t>(slot)] = -1;  // while it is written
    gather(static_cast<size_t>(block_bucket_.at(static_cast<size_t>(layer))));
    slot_block_[static_cast<size_t>(slot)] = layer;
  }
  if (next >= 0 && next < static_cast<int>(block_bucket_.size()) && next % slots != slot) {
    const int other = next % slots;
    if (slot_block_[static_cast<size_t>(other)] != next && prefetch_[static_cast<size_t>(other)].block != next) {
      finish_prefetch(other);
      slot_block_[static_cast<size_t>(other)] = -1;
      prefetch_[static_cast<size_t>(other)] = {next, launch_gather(static_cast<size_t>(block_bucket_[static_cast<size_t>(next)]))};
    }
  }
  return fresh;
}

void ParameterShards::settle() {
  for (int slot = 0; slot < static_cast<int>(prefetch_.size()); ++slot) finish_prefetch(slot);
}

comm::Work ParameterShards::fence() { return data_.fence(device_.stream); }

// One wait for the step's gathers outside the blocks, under the watchdog: the host reads the
// model's stream next (the step's figures), which waits for them.
void ParameterShards::after_update() {
  settle();
  std::fill(slot_block_.begin(), slot_block_.end(), -1);
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (buckets_[b].ready_event < 0) gather(b);
  fence().wait();
}

void ParameterShards::load(const float* owned_values) {
  if (shard_.dtype() == DType::f32) return kernels::upload(device_, shard_.view(), owned_values);
  std::vector<kernels::low16> rounded(shard_.size());
  comm::narrow(shard_.dtype(), owned_values, rounded.data(), rounded.size());
  kernels::upload(device_, shard_.view(), rounded.data());
}

}  // namespace trident::dp
