// `trident bench DECK --checkpoint`: the checkpoint writer against a plain sequential write of
// the same bytes to the same directory, alternating in one run (this host's disk speed drifts),
// and the time to restart from the file (verification and reading). Every rank takes part in
// its layout; rank 0 does the plain write, as one writer of one file.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "ckpt/checkpointer.hpp"
#include "ckpt/resume.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/random.hpp"
#include "job/job.hpp"
#include "job/model_setup.hpp"
#include "job/settings.hpp"

namespace trident {
namespace {

using Clock = std::chrono::steady_clock;


// Rank 0: `bytes` written with write(2) in 8 MiB pieces, then fsync; seconds.
double plain_write(const std::string& path, int64_t bytes, const std::vector<float>& source) {
  const auto start = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0, "cannot create " << path);
  const char* data = reinterpret_cast<const char*>(source.data());
  const int64_t piece = std::min<int64_t>(int64_t(8) << 20, static_cast<int64_t>(source.size() * sizeof(float)));
  for (int64_t done = 0; done < bytes;) {
    const ssize_t n = ::write(fd, data, static_cast<size_t>(std::min(piece, bytes - done)));
    REQUIRE(n > 0, "write to " << path << " failed");
    done += n;
  }
  REQUIRE(::fsync(fd) == 0, "fsync of " << path << " failed");
  ::close(fd);
  return seconds_since(start);
}

}  // namespace

int run_checkpoint_bench(comm::Communicator& world, const Job& job, int repeats) {
  const model::GptConfig config = model_config(job.settings.model, job.record);
  const model::Partition part = partition_for_rank(job.settings, job.grid, world.rank());
  const size_t n = static_cast<size_t>(model::num_parameters(config, part));
  std::vector<float> params(n), m(n), v(n);  // (n) this rank's slice: random values, not zeros
  for (size_t i = 0; i < n; ++i) {
    params[i] = 0.02f * static_cast<float>(normal_at(1, 0, i));
    m[i] = 1e-3f * static_cast<float>(normal_at(1, 1, i));
    v[i] = 1e-6f * std::abs(static_cast<float>(normal_at(1, 2, i)));
  }
  const bool replica0 = job.grid.coord_of(world.rank()).dp == 0;
  ckpt::StateView view;
  view.config = config;
  view.part = part;
  view.params = params.data();
  view.params_owner = replica0;
  view.m = m.data();
  view.v = v.data();
  view.moments_owner = replica0;
  ckpt::Metadata metadata;
  metadata.model = config;
  metadata.tensor = job.grid.tp_size();
  metadata.pipeline = job.grid.pp_size();
  metadata.data = job.grid.dp_size();
  metadata.deck = job.record.to_ini("checkpoint benchmark");
  ckpt::Settings settings;
  settings.dir = job.settings.checkpoint.dir + "-bench";
  settings.keep_full = 1;
  ckpt::Checkpointer checkpointer(settings, world);
  std::vector<double> ours, verify, plain;
  int64_t bytes = 0;
  std::string path;
  for (int r = 0; r < repeats; ++r) {
    metadata.step = r + 1;
    checkpointer.save("full", view, metadata);
    const ckpt::WriteRecord record = checkpointer.take_records().back();
    REQUIRE(record.error.empty(), record.error);
    ours.push_back(record.write_seconds);
    verify.push_back(record.verify_seconds);
    bytes = record.bytes;
    path = record.path;
    double seconds = 0.0;
    if (world.rank() == 0) seconds = plain_write(settings.dir + "/plain.bin", bytes, params);
    world.broadcast(&seconds, 1, DType::f64, 0, Stream{}).wait();
    plain.push_back(seconds);
    if (world.rank() == 0) std::filesystem::remove(settings.dir + "/plain.bin");
  }
  world.barrier(Stream{}).wait();
  const auto restart_start = Clock::now();  // what `resume = PATH` does: metadata, verify, read
  const auto start = ckpt::choose_checkpoint(path, settings.dir, "bench", world);
  const std::string problem = ckpt::read_checkpoint(path, world, view);
  REQUIRE(start.chosen && problem.empty(), problem);
  const double restart = seconds_since(restart_start);
  char text[320];
  std::snprintf(text, sizeof text,
                "checkpoint ranks=%d bytes=%lld write_s=%.3f write_gbps=%.3f plain_s=%.3f plain_gbps=%.3f "
                "of_plain=%.3f verify_s=%.3f restart_s=%.3f",
                world.size(), static_cast<long long>(bytes), median(ours), bytes / 1e9 / median(ours),
                median(plain), bytes / 1e9 / median(plain), median(plain) / median(ours), median(verify), restart);
  print0(text);
  if (world.rank() == 0) std::filesystem::remove_all(settings.dir);
  return kExitOk;
}

}  // namespace trident
