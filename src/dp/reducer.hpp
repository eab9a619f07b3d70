// Data-parallel gradient reduction: the gradients are summed over the data group in buckets of
// about comm.bucket_mb.
//
// Math: after every replica's backward, g = Σ_r g_r over the data group (each replica scaled its
// loss by 1/(micro-batches · data), so g is the gradient of the global mean loss).
// Communication: per bucket, over the data communicator,
//   without ZeRO  one all-reduce (sum) of the bucket's E elements; every replica receives the
//                 same bytes, so the replicas stay bitwise identical.
//   ZeRO (optim.zero = 1, the distributed optimizer, as Megatron-Core's): the bucket packed and
//                 padded to d·P elements, P = ⌈E/d⌉, and one reduce-scatter leaves replica r the
//                 sums of packed [r·P, (r+1)·P) — its part of every bucket, the flat ranges it
//                 owns (owned(); dp::owned_ranges), written back into its gradient buffer (the
//                 rest of that buffer is then stale). After the optimizer updated the owned
//                 parameters, all_gather_params gathers them per bucket the same way: P elements
//                 of the parameters' own type from each replica.
//   ZeRO-2 (optim.zero = 2): the same ownership, but the buckets are the blocks and the rest (cut
//                 every comm.bucket_mb, dp::plan_block_buckets)
//                 (the embeddings, final norm and head, reduced after the step's backward like
//                 ZeRO-1's), and a block's bucket is reduce-scattered after each micro-batch's
//                 backward of it, out of the model's gradient slot (Transformer::set_gradient_slots),
//                 its own part added into owned_gradients() — the only full-precision gradients
//                 of the blocks this replica keeps. micro-batches times ZeRO-1's block bytes.
//   ZeRO-3 (optim.zero = 3): the gradients as ZeRO-2's; the parameters are not gathered here
//                 but block by block when they are used (dp/parameter_shards.hpp, whose
//                 collectives launch_in_order puts on this reduction's path).
// comm.grad_dtype = bf16: each bucket is packed rounded to bf16 and reduced as bf16 (half the
// bytes; NCCL's bf16 sums, or our MPI ring's bf16 messages adding in f32 at each hop), then
// widened back into the f32 gradients.
//
// The reducer knows the model only as gradient segments (dp/segments.hpp), in the order
// backward finishes them. With overlap, backward reports each finished event (on_final); a
// bucket whose segments are all final is enqueued on the reduction's host stream
// (comm/host_stream.hpp), which packs, reduces and unpacks it while backward goes on; each
// bucket's Work says when it is done. finish() waits for what is left: the exposed
// communication time (on a device, measured with events on the compute stream). ZeRO overlaps
// as the all-reduce does: its reduce-scatters are bucket by bucket too.
#pragma once

#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/host_stream.hpp"
#include "dp/segments.hpp"
#include "kernels/backend.hpp"
#include "kernels/kernels.hpp"
#include "model/flat_ranges.hpp"
#include "tensor/buffer.hpp"

namespace trident::dp {

// The gradients as the reducer takes them: the segments in backward order (each at its memory,
// and at its offset in the flat layout of count elements).
struct Gradients {
  std::vector<GradientSegment> segments;
  int64_t count = 0;
  kernels::Context device;  // the backend the gradients live on and the stream their kernels run on
  // ZeRO-2: the model's gradient slots; block l's segments are in slot l % slots.
  int slots = 0;
};

class GradientReducer {
 public:
  // data: the data-parallel communicator (size 1: nothing to do). overlap needs communicators
  // that other threads may drive too (comm::concurrent_callers_supported); without it the
  // reduction runs after backward. zero: the ZeRO stage (0, 1 or 2) — reduce-scatters leave
  // each replica the summed gradients of the ranges it owns only. wire: the type the gradients
  // travel in (f32, bf16). ZeRO-2's and 3's buckets are its blocks whatever bucket_mb says, and
  // the rest cut every bucket_mb (dp::plan_block_buckets).
  GradientReducer(comm::Communicator& data, Gradients gradients, double bucket_mb, bool overlap, int zero,
                  DType wire = DType::f32);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before the backward whose gradients are to be reduced (the step's last micro-batch; with
  // ZeRO-2 the step's first: its own gradients cleared).
  void begin();
  // The backward hook: event `event` (a block, or -1: everything else) is final. ZeRO-2: block
  // `event` of this micro-batch's backward is complete in its slot (every micro-batch's).
  void on_final(int event);
  // ZeRO-2, the model's hook before it writes gradient slot `slot` again: the reduction that
  // reads it done (on a device: the compute stream waits for it).
  void before_slot_reuse(int slot);
  bool every_micro_batch() const { return zero_ >= 2; }  // on_final wanted in every backward
  // Reduces what has not been reduced yet and waits for all buckets. Returns the exposed
  // communication time: the seconds the caller waited, or with overlap on a device the seconds
  // the compute stream waited for the communication stream, measured with events on it.
  double finish();

  // After finish(), the tied embedding (tied segments: wte on the first and on the last stage;
  // nothing to do where there are none) summed over `embedding` (those two stages' ranks of one
  // tensor slice and replica) — what this replica holds of it: all of it, or with ZeRO its owned
  // part, which the tied bucket makes the same elements on both stages. Summed after each stage's
  // data group reduced its copy (Megatron-Core's order), both copies take the same bits whatever
  // order the two data groups summed in; summed before, they drifted apart by roundings.
  void sum_tied(comm::Communicator* embedding);

  bool overlapping() const { return stream_ != nullptr || device_overlap_; }
  // work(stream) launched where the reduction's collectives run, after everything launched
  // before it (every replica calls it at the same point: the data group's collectives keep one
  // order on all of them) — on the host stream, or the communication stream — so that the model
  // may compute meanwhile (ZeRO-3's gathers and prefetch, dp::ParameterShards); and the wait
  // until the model's stream may use what it wrote (on a device: the compute stream waits for
  // the communication stream).
  comm::Work launch_in_order(std::function<void(Stream)> work);
  void wait_in_order(comm::Work& launched);
  // The flat ranges this replica owns (everything, one range, without ZeRO or with one replica).
  const model::FlatRanges& owned() const { return owned_; }
  // What replica `rank` of the data group owns (owned() on that replica).
  model::FlatRanges owned_by(int rank) const;
  // ZeRO-1, 2: after the owners updated their ranges of the parameters (the model's, of its
  // storage type: 16-bit values travel as 16-bit values), every replica gathers all of them. On a
  // device the buckets' gathers and copies follow each other on the stream, and the host waits
  // once, for the data group's fence after the last.
  void all_gather_params(const Tensor& params);
  // ZeRO-2: (owned() elements, in their order) this replica's summed gradients; null otherwise.
  const float* owned_gradients() const { return zero_ >= 2 ? owned_grads_.data() : nullptr; }
  size_t buckets() const { return buckets_.size(); }
  // The last step's reduction: on the host the reductions' own time; with overlap on a device the
  // buckets' time on the communication stream (events around each: its copies and collective,
  // not the waits for backward before it), not the host's time to enqueue them.
  double communication_seconds() const { return comm_seconds_; }

 private:
  // Pack, all-reduce, unpack, on `stream` (the gradients' own, or the communication stream);
  // complete when the returned Work is (at once on the host).
  comm::Work reduce(size_t bucket, Stream stream);
  void launch(size_t bucket);                   // on whichever stream overlaps, into launched_
  void launch_on_device(size_t bucket);         // the device's overlap: after backward's kernels so far
  double finish_on_device();                    // finish() of the device's overlap
  double bucket_seconds_on_device();            // bucket_marks_' sum, released (the stream waited for)
  // The bucket's length in packed_: its elements, or with ZeRO d·⌈E/d⌉ (padded with zeros).
  int64_t packed_length(const Bucket& bucket) const;
  // The packed bucket to its segments' places in `flat` (the parameters).
  void unpack(kernels::Context& ctx, const Bucket& bucket, const Tensor& packed, const Tensor& flat);
  // The sums the reduction leaves this replica, to the segments' memory; ZeRO-2 into
  // owned_grads_, added for a block's bucket.
  void unpack_sums(kernels::Context& ctx, size_t bucket, const Tensor& packed);
  double finish_zero2();

  comm::Communicator& data_;
  Gradients gradients_;
  int data_size_ = 1, data_rank_ = 0;
  int zero_ = 0;  // the stage, 0 with one replica
  model::FlatRanges owned_;
  std::vector<std::vector<OwnPiece>> own_pieces_;  // ZeRO: per bucket
  std::vector<int> block_bucket_;                  // ZeRO-2, 3: block l's bucket (block_buckets)
  Buffer<float> owned_grads_;                      // ZeRO-2: (owned elements)
  Buffer<float> widened_;                          // ZeRO-2 with 16-bit wire: (largest part) the sums in f32
  std::vector<int> slot_reader_;                   // ZeRO-2: per slot, launched_'s last reader, or -1
  int waited_ = 0;                                 // launched_[0, waited_) are complete for the compute stream
  std::vector<Bucket> buckets_;
  DType wire_ = DType::f32;
  TensorBuffer packed_;    // (largest packed bucket) of the wire type, used by whichever thread reduces
  TensorBuffer gathered_;  // ZeRO: (largest packed bucket) of the parameters' type, allocated at the first gather
  size_t next_to_launch_ = 0;
  double comm_seconds_ = 0;
  std::vector<comm::Work> launched_;            // per bucket launched this step, in order
  // With overlap on a device: per bucket launched this step, the communication stream's marks
  // before and after its reduction.
  std::vector<std::pair<kernels::Backend::Mark, kernels::Backend::Mark>> bucket_marks_;
  std::atomic<bool> backward_running_{false};   // the stream's waits sleep meanwhile
  std::unique_ptr<comm::HostStream> stream_;    // with overlap on the host: where the buckets are reduced
  // With overlap on a device: the buckets are reduced on a communication stream of their own,
  // each after an event on the compute stream says its gradients are complete, and the compute
  // stream waits for the communication stream at the end (seed §3.2). Not on the host.
  bool device_overlap_ = false;
  Stream comm_stream_;
};

}  // namespace trident::dp
