// Bucketed, optionally overlapped, data-parallel gradient all-reduce.
#include "comm/reducer.hpp"

#include <cstring>

#include "comm/traffic.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "model/params.hpp"

namespace trident::comm {
namespace {

bool mpi_supports_threads() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

}  // namespace

Shard shard_of(int64_t n, int rank, int size) {
  const auto segment = Communicator::segment_of(static_cast<size_t>(n), size, rank);
  return {static_cast<int64_t>(segment.first), static_cast<int64_t>(segment.second)};
}

GradientReducer::GradientReducer(const model::GptConfig& config, const model::Partition& slice,
                                 GroupCollectives& data, double bucket_mb, bool overlap, bool zero)
    : data_(data), zero_(zero), num_params_(model::num_parameters(config, slice)) {
  data_size_ = data.flat().size();
  data_rank_ = data.flat().rank();
  shard_ = zero ? shard_of(num_params_, data_rank_, data_size_) : Shard{0, num_params_};
  if (data_size_ == 1) return;
  if (zero) return;  // the reduce-scatter works in place on the gradient buffer
  buckets_ = plan_buckets(config, slice, bucket_mb);
  int64_t largest = 0;
  for (const Bucket& b : buckets_) largest = std::max(largest, b.elements);
  packed_ = Buffer<float>(static_cast<size_t>(largest), MemoryCategory::Communication);
  overlap_ = overlap && mpi_supports_threads();
  if (overlap && !overlap_)
    warn0("comm.overlap = true needs MPI_THREAD_MULTIPLE, which this MPI does not provide; the "
          "gradient reduction runs after backward");
  if (overlap_) thread_ = std::thread(&GradientReducer::thread_main, this);
}

GradientReducer::~GradientReducer() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  thread_.join();
}

void GradientReducer::reduce(Bucket& bucket) {
  const double start = steady_seconds();
  float* packed = packed_.data();
  int64_t at = 0;
  for (const Segment& s : bucket.segments) {
    std::memcpy(packed + at, grads_ + s.offset, s.count * sizeof(float));
    at += s.count;
  }
  data_.all_reduce(packed, static_cast<size_t>(bucket.elements));
  at = 0;
  for (const Segment& s : bucket.segments) {
    std::memcpy(grads_ + s.offset, packed + at, s.count * sizeof(float));
    at += s.count;
  }
  comm_seconds_ += steady_seconds() - start;
}

void GradientReducer::thread_main() {
  wait_patiently(&backward_running_);  // backward runs on the same core meanwhile
  for (;;) {
    size_t index;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      index = queue_.front();
      queue_.pop_front();
    }
    reduce(buckets_[index]);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++completed_;
    }
    work_done_.notify_all();
  }
}

void GradientReducer::begin(float* grads) {
  grads_ = grads;
  backward_running_ = true;
  next_to_launch_ = 0;
  completed_ = 0;
  comm_seconds_ = 0;
}

void GradientReducer::on_final(int layer) {
  if (!overlap_) return;
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].ready_event >= layer) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(next_to_launch_++);
    }
    work_ready_.notify_one();
  }
}

void GradientReducer::reduce_scatter() {
  const double start = steady_seconds();
  data_.flat().reduce_scatter(grads_, static_cast<size_t>(num_params_));  // own shard summed in place
  comm_seconds_ += steady_seconds() - start;
}

void GradientReducer::all_gather_params(float* params) {
  if (!zero_ || data_size_ == 1) return;
  const double start = steady_seconds();
  data_.flat().all_gather(params, static_cast<size_t>(num_params_));
  comm_seconds_ += steady_seconds() - start;
}

double GradientReducer::finish() {
  if (data_size_ == 1) return 0.0;
  const double start = steady_seconds();
  if (zero_) {
    reduce_scatter();
  } else if (overlap_) {
    backward_running_ = false;  // the reduction left is on the critical path now
    on_final(-1);  // launches whatever backward did not report (nothing, if the hook ran)
    std::unique_lock<std::mutex> lock(mutex_);
    work_done_.wait(lock, [&] { return completed_ == buckets_.size(); });
  } else {
    for (Bucket& bucket : buckets_) reduce(bucket);
  }
  return steady_seconds() - start;
}

}  // namespace trident::comm
