// The deadline's watcher thread.
#include "core/deadline.hpp"

#include <chrono>
#include <cstdio>

#include "core/error.hpp"

namespace trident {

Deadline::Deadline(double seconds, std::string what) {
  watcher_ = std::thread([this, seconds, what = std::move(what)] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (done_changed_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) return;
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", seconds);
    fatal_one(what + " did not finish within " + limit + " s; ending the job rather than hanging");
  });
}

Deadline::~Deadline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  done_changed_.notify_all();
  watcher_.join();
}

}  // namespace trident
