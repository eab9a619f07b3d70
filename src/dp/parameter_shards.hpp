// ZeRO-3 (optim.zero = 3; FSDP's full sharding): the parameters sharded over the data group as
// the gradients and the optimizer state are. Each replica keeps its part of every bucket's
// parameters only — the part the reducer's reduce-scatters leave it (dp::owned_ranges) — of the
// parameters' storage type, in the owned ranges' order, which is the optimizer's state order:
// the optimizer updates shard() in place (fp32: it is the master; bf16/fp16: the rounding of the
// optimizer's fp32 master).
//
// Math: block l's parameters are the concatenation, over the replicas r = 0 … d−1, of their parts
// packed [r·P, (r+1)·P) of block l's bucket (P = ⌈E_l/d⌉, the padding dropped).
// Communication, over the data communicator, on the reducer's path (GradientReducer::launch_in_order:
// the data group's collectives keep one order on every replica):
//   gather_block(l)  one all-gather of P elements of the storage type from each replica into the
//                    model's parameter slot of block l (Transformer::set_block_gather) — before
//                    its forward, a recomputed forward and its backward; nothing where the slot
//                    still holds block l (the stage's last block between its forward and
//                    backward; the blocks of a stage of two under 1F1B). The block the model
//                    uses next is gathered at once into the other slot (prefetch: forward's
//                    next block, backward's previous one), beside the work on this one.
//   after_update()   the tensors outside the blocks (embeddings, final norm, head), which the
//                    model keeps whole, gathered the same way bucket by bucket after each update
//                    (or a restore); the slots are forgotten, to be gathered again.
// A recomputed forward gathers its blocks again, as FSDP does: keeping a K-block segment's
// gathered blocks from its recomputation to its backward would take K slots — the memory
// recompute is there to save.
// On a device the gathers are ordered on the streams alone (an NCCL all-gather and the copies
// after it on the reducer's communication stream, which the model's stream waits for before it
// reads the slot): the host does not wait for them, and runs on to the next block's kernels.
// They come under the data group's watchdog with the model's pass (fence(), after each pass as
// the tensor group's all-reduces do) and after_update's fence.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "dp/reducer.hpp"
#include "dp/segments.hpp"
#include "kernels/kernels.hpp"
#include "tensor/buffer.hpp"

namespace trident::dp {

class ParameterShards {
 public:
  // parameters: the model's parameter memory (Transformer::parameter_memory) as segments in the
  // gradient segments' order and of the same sizes, so that the buckets, planned as the reducer
  // plans ZeRO-2's and 3's (dp::plan_block_buckets), and this replica's parts of them
  // are the reducer's (bucket_mb: comm.bucket_mb, the reducer's). slots: the model's parameter
  // slots (block l's in slot l % slots).
  ParameterShards(comm::Communicator& data, GradientReducer& reducer, std::vector<GradientSegment> parameters,
                  double bucket_mb, int slots, const kernels::Context& device);
  // Block `layer`'s parameters into its slot; false where the slot held them already. next: the
  // block the model will use after it (-1: none known), whose gather is launched at once into
  // its slot — the prefetch the model's work on `layer` hides — where that is the other slot.
  bool gather_block(int layer, int next = -1);
  // Every prefetch complete: before the optimizer writes the shard.
  void settle();
  // Complete once the gathers the model's stream has waited for so far have run, under the data
  // group's watchdog (Communicator::fence on that stream; at once on the host).
  comm::Work fence();
  // After the owned parameters changed (an update, a restore, load): the tensors outside the
  // blocks gathered, the slots forgotten. Collective over the data group.
  void after_update();
  // (owned elements) of the storage type, in the owned ranges' order.
  Tensor shard() const { return shard_.view(); }
  // The shard set from f32 values in host memory (rounded to the storage type): of the owned
  // ranges, in their order (total_count(owned) floats).
  void load(const float* owned_values);

 private:
  // Bucket b's parameters gathered into `packed` (its padded length) on `stream`: the
  // all-gather's Work (stream-ordered on a device).
  comm::Work gather_packed(size_t b, const Tensor& packed, Stream stream);
  // And unpacked into its segments' memory, launched on the reducer's path.
  comm::Work launch_gather(size_t b);
  void gather(size_t b);           // launched and waited for
  void finish_prefetch(int slot);  // the slot's prefetch complete for the model's stream

  comm::Communicator& data_;
  GradientReducer& reducer_;
  kernels::Context device_;
  int data_size_ = 1;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<OwnPiece>> own_pieces_;
  std::vector<int> block_bucket_;  // block l's bucket (block_buckets)
  std::vector<int> slot_block_;    // per parameter slot (block l's is l % slots): the block it holds, or -1
  struct Prefetch {
    int block = -1;  // being gathered into the slot, or -1
    comm::Work work;
  };
  std::vector<Prefetch> prefetch_;  // per slot
  TensorBuffer shard_;             // (owned elements) of the storage type
  TensorBuffer gathered_;          // (largest padded bucket) of the storage type
};

}  // namespace trident::dp
