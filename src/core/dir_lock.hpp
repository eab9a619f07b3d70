// One owner per directory: DIR/trident.lock, created exclusively (link(2) of a complete
// temporary, so it appears whole or not at all, also on NFS) and holding the owner's host, boot,
// pid, the pid's start time, run id and start time. While held, a heartbeat thread refreshes its
// mtime; it is removed when the owner ends (destructor).
//
// A lock found in place is judged, never trusted blindly:
//   same host:    stale when the boot differs, or the pid is gone or now another process;
//   another host: stale when its heartbeat (mtime) is older than `stale_s` — a node that died.
// A stale lock is taken over (reported); a live one is waited for up to `wait_s` (a killed
// mpirun leaves its ranks running for a moment), then DirLockBusy names the holder. A lock name
// that is not a lock trident wrote (a symbolic link, dangling or not, a directory, a FIFO, an
// empty or garbled file: trident's own appear whole, by link(2)) is held by no run: DirLockForeign
// says what it is and how to clear it, at once, and nothing reads it (a FIFO would block).
// Waiting ends early when `stopped` says so (a stop signal): DirLockStopped.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

namespace trident {

constexpr const char* kLockFileName = "trident.lock";

// Who holds a lock, as written in the file (key = value lines).
struct LockHolder {
  std::string host, boot_id, run_id, started_at;
  long pid = 0;
  unsigned long long pid_start = 0;  // /proc/<pid>/stat start time (clock ticks after boot); 0 unknown
  std::string to_text() const;
  static std::optional<LockHolder> from_text(const std::string& text);
  std::string describe() const;  // "run R (pid P on host H, started T)"
  static LockHolder of_this_process(const std::string& run_id);
};

struct LockSettings {
  double wait_s = 10;       // how long a live holder is waited for
  double heartbeat_s = 10;  // mtime refreshed this often
  double stale_s = 120;     // another host's lock without a heartbeat this long is stale
};

// Why a lock is stale ("" when its holder may still be running). `age_s`: seconds since its mtime.
std::string stale_reason(const LockHolder& holder, double age_s, const LockSettings& settings);

// The lock is held by a live run (what() names the directory and the holder).
class DirLockBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The lock's name holds something that is no lock of trident's (what() says what and how to clear it).
class DirLockForeign : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stop signal arrived while a live holder was waited for.
class DirLockStopped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DirLock {
 public:
  // Takes DIR/trident.lock. `say` receives warnings (a stale lock taken over, a wait);
  // `stopped` (may be empty) is asked while waiting. Throws DirLockBusy, DirLockForeign,
  // DirLockStopped, or std::runtime_error when the file cannot be written.
  DirLock(const std::string& dir, const std::string& run_id, const LockSettings& settings,
          std::function<void(const std::string&)> say, std::function<bool()> stopped = {});
  ~DirLock();  // stops the heartbeat; removes the lock if it is still this one
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  bool try_create(const std::string& text);  // false: a lock exists
  void take_over(const std::string& seen, const std::string& why);
  void heartbeat();

  std::string path_;
  std::string run_id_;
  LockSettings settings_;
  std::function<void(const std::string&)> say_;
  ino_t inode_ = 0;
  std::mutex mutex_;
  std::condition_variable stop_signal_;
  bool stop_ = false;
  std::thread heartbeat_;
};

}  // namespace trident
