// Data-parallel gradient reduction: the gradients are summed over the data group in buckets of
// about comm.bucket_mb.
//
// Math: after every replica's backward, g = Σ_r g_r over the data group (each replica scaled its
// loss by 1/(micro-batches · data), so g is the gradient of the global mean loss).
// Communication: one all-reduce (sum) per bucket over the data communicator; every replica
// receives the same bytes, so the replicas stay bitwise identical.
//
// A bucket holds whole (tensor, layer) slices of the flat gradient buffer, in the order backward
// finishes them: the final LayerNorm and the last block first, the embeddings last. With overlap,
// backward reports each finished block (Gpt2::backward's on_final hook); a bucket whose slices
// are all final goes to the communication thread, which packs, all-reduces and unpacks it while
// backward goes on — the CPU counterpart of a CUDA communication stream ordered by events.
// finish() waits for what is left: the exposed communication time.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/buckets.hpp"
#include "comm/hierarchy.hpp"
#include "model/config.hpp"
#include "model/params.hpp"
#include "tensor/buffer.hpp"

namespace trident::comm {

// The contiguous part [begin, end) of a flat buffer of n elements that replica `rank` of `size`
// owns under ZeRO-1: the ring reduce-scatter's segment (Communicator::segment_of).
struct Shard {
  int64_t begin = 0, end = 0;
  int64_t count() const { return end - begin; }
};
Shard shard_of(int64_t n, int rank, int size);

class GradientReducer {
 public:
  // data: the data-parallel communicator (size 1: nothing to do). overlap needs an MPI library
  // with MPI_THREAD_MULTIPLE; without it the reduction runs after backward. zero: ZeRO-1 — after
  // backward, one reduce-scatter leaves each replica the summed gradients of its own shard only
  // (the rest of its gradient buffer is then stale); no overlap in this mode.
  // slice: this rank's tensor-parallel slice (its gradient buffer's layout).
  GradientReducer(const model::GptConfig& config, const model::Partition& slice,
                  GroupCollectives& data, double bucket_mb, bool overlap, bool zero);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before the backward whose gradients are to be reduced (the step's last micro-batch).
  void begin(float* grads);
  // The backward hook: block `layer` (or, for -1, everything else) is final.
  void on_final(int layer);
  // Reduces what has not been reduced yet and waits for all buckets. Returns the seconds the
  // caller waited (the exposed communication time).
  double finish();

  bool overlapping() const { return overlap_; }
  const Shard& shard() const { return shard_; }  // what this replica owns (everything without ZeRO)
  // ZeRO-1: after the owners updated their shards, every replica gathers all of them.
  void all_gather_params(float* params);
  size_t buckets() const { return buckets_.size(); }
  double communication_seconds() const { return comm_seconds_; }  // of the last step

 private:
  void reduce(Bucket& bucket);  // pack, all-reduce, unpack
  void thread_main();

  void reduce_scatter();

  GroupCollectives& data_;
  int data_size_ = 1, data_rank_ = 0;
  bool overlap_ = false, zero_ = false;
  int64_t num_params_ = 0;
  Shard shard_;
  float* grads_ = nullptr;
  std::vector<Bucket> buckets_;
  Buffer<float> packed_;  // largest bucket, used by whichever thread reduces (not with ZeRO)
  size_t next_to_launch_ = 0;
  double comm_seconds_ = 0;

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  std::deque<size_t> queue_;
  size_t completed_ = 0;
  bool stop_ = false;
  std::atomic<bool> backward_running_{false};  // the communication thread's waits sleep meanwhile
};

}  // namespace trident::comm
