// A deadline for work that may block inside a library we cannot time out from the outside
// (parallel HDF5 waiting in its own collectives when a disk fills or a file system hangs):
// if the guarded scope is still running after `seconds`, this rank reports what was stuck and
// aborts the job (fatal_one), so that the job ends instead of hanging silently.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace trident {

class Deadline {
 public:
  Deadline(double seconds, std::string what);  // starts the clock
  ~Deadline();                                  // the scope finished in time
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::thread watcher_;
};

}  // namespace trident
