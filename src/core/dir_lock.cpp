// The directory lock: exclusive creation, judging a lock found in place, heartbeat, release.
#include "core/dir_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>

#include "core/clock.hpp"
#include "core/file_util.hpp"

namespace trident {
namespace {

std::string first_line_of(const char* path) {
  std::string text, why;
  if (!read_file(path, kMaxConfigBytes, text, why)) return "";
  return text.substr(0, text.find('\n'));
}

std::string this_host() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// Field k (3: state, 22: start time) of /proc/<pid>/stat; "" when it cannot be read.
std::string stat_field(long pid, int k) {
  const std::string stat = first_line_of(("/proc/" + std::to_string(pid) + "/stat").c_str());
  const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return "";
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int at = 3; at <= k && fields >> field; ++at)
    if (at == k) return field;
  return "";
}

unsigned long long start_time_of(long pid) { return std::strtoull(stat_field(pid, 22).c_str(), nullptr, 10); }

// Seconds since the file's mtime (its heartbeat); negative when it cannot be read.
double age_of(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return -1;
  return std::difftime(std::time(nullptr), info.st_mtime);
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f s", seconds);
  return text;
}

bool is_directory(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

// "" when `path` is gone or is a regular file holding a lock trident wrote; else what it is
// instead ("'P' is a symbolic link to 'T' (dangling)", "… is empty", …). Never opens anything
// but a regular file, which cannot block.
std::string foreign_lock(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return "";
  const std::string name = "'" + path + "'";
  if (S_ISLNK(info.st_mode)) {
    char target[4096] = {};
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    struct stat followed {};
    const bool dangling = ::stat(path.c_str(), &followed) != 0;
    return name + " is a symbolic link" + (n > 0 ? " to '" + std::string(target, n) + "'" : std::string()) +
           (dangling ? " (dangling)" : "") + ", not a lock file (trident's locks are regular files)";
  }
  if (!S_ISREG(info.st_mode)) return name + " " + file_type_problem(info.st_mode) + " (a lock is a regular file)";
  std::string text, why;
  if (!read_file(path, kMaxConfigBytes, text, why)) return ::access(path.c_str(), F_OK) == 0 ? name + ": " + why : "";
  if (text.empty()) return name + " is empty, not a lock trident wrote (its locks appear whole)";
  if (!LockHolder::from_text(text))
    return name + " holds " + std::to_string(text.size()) + " bytes that are not a lock trident wrote (no host and pid)";
  return "";
}

}  // namespace

std::string LockHolder::to_text() const {
  return "# A run of trident owns this directory (docs/CHECKPOINTS.md, Ownership). Removed when it ends.\n"
         "host = " + host + "\nboot_id = " + boot_id + "\npid = " + std::to_string(pid) + "\npid_start = " +
         std::to_string(pid_start) + "\nrun_id = " + run_id + "\nstarted_at = " + started_at + "\n";
}

std::optional<LockHolder> LockHolder::from_text(const std::string& text) {
  std::map<std::string, std::string> values = parse_key_values(text);
  LockHolder holder;
  holder.host = values["host"];
  holder.boot_id = values["boot_id"];
  holder.pid = std::atol(values["pid"].c_str());
  holder.pid_start = std::strtoull(values["pid_start"].c_str(), nullptr, 10);
  holder.run_id = values["run_id"];
  holder.started_at = values["started_at"];
  if (holder.host.empty() || holder.pid <= 0) return std::nullopt;
  return holder;
}

std::string LockHolder::describe() const {
  return "run " + (run_id.empty() ? std::string("?") : run_id) + " (pid " + std::to_string(pid) + " on host " + host +
         ", started " + (started_at.empty() ? std::string("?") : started_at) + ")";
}

LockHolder LockHolder::of_this_process(const std::string& run_id) {
  LockHolder holder;
  holder.host = this_host();
  holder.boot_id = first_line_of("/proc/sys/kernel/random/boot_id");
  holder.pid = static_cast<long>(::getpid());
  holder.pid_start = start_time_of(holder.pid);
  holder.run_id = run_id;
  holder.started_at = utc_timestamp();
  return holder;
}

std::string stale_reason(const LockHolder& holder, double age_s, const LockSettings& settings) {
  if (holder.host != this_host()) {
    if (age_s <= settings.stale_s) return "";
    return "its heartbeat stopped " + seconds_text(age_s) + " ago (more than train.lock_stale_s = " +
           seconds_text(settings.stale_s) + "; its node died?)";
  }
  const std::string boot = first_line_of("/proc/sys/kernel/random/boot_id");
  if (!holder.boot_id.empty() && !boot.empty() && holder.boot_id != boot) return "this host rebooted since";
  const std::string pid = "pid " + std::to_string(holder.pid);
  if (::kill(static_cast<pid_t>(holder.pid), 0) != 0 && errno == ESRCH) return pid + " is no longer running";
  // An orphaned rank that ended but was never reaped (no init in a container) is dead too.
  if (stat_field(holder.pid, 3) == "Z") return pid + " is no longer running (a zombie)";
  const unsigned long long start = start_time_of(holder.pid);
  if (holder.pid_start != 0 && start != 0 && start != holder.pid_start)
    return pid + " is now another process";
  return "";
}

DirLock::DirLock(const std::string& dir, const std::string& run_id, const LockSettings& settings,
                 std::function<void(const std::string&)> say, std::function<bool()> stopped)
    : path_(dir + "/" + kLockFileName), run_id_(run_id), settings_(settings), say_(std::move(say)) {
  const std::string mine = LockHolder::of_this_process(run_id).to_text();
  const double give_up = steady_seconds() + settings.wait_s;
  bool told_wait = false;
  while (!try_create(mine)) {
    const std::string foreign = foreign_lock(path_);
    if (!foreign.empty())
      throw DirLockForeign("run directory '" + dir + "': " + foreign + "; no run of trident holds it: if no other "
                           "program uses that directory, remove it (rm " + (is_directory(path_) ? "-r '" : "'") + path_ +
                           "') and start again");
    std::string seen, why;
    if (!read_file(path_, kMaxConfigBytes, seen, why)) continue;  // released meanwhile (or replaced): try again
    const std::optional<LockHolder> holder = LockHolder::from_text(seen);
    if (!holder) continue;  // replaced by a garbled file meanwhile: foreign_lock says so next time
    const double age = age_of(path_);
    const std::string stale = stale_reason(*holder, age, settings);
    if (!stale.empty()) {
      take_over(seen, "warning: '" + dir + "' was locked by " + holder->describe() + ", but " + stale + ": taking it over");
      continue;
    }
    if (steady_seconds() >= give_up)
      throw DirLockBusy("run directory '" + dir + "' is in use by " + holder->describe() + " (" + path_ +
                        "); wait for that run to end, or choose another train.run_dir");
    if (stopped && stopped())
      throw DirLockStopped("while waiting for run directory '" + dir + "', in use by " + holder->describe());
    if (!told_wait) say_("note: '" + dir + "' is locked by " + holder->describe() + "; waiting up to " +
                         seconds_text(settings.wait_s) + " for it to end (train.lock_wait_s)");
    told_wait = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  heartbeat_ = std::thread([this] { heartbeat(); });
}

DirLock::~DirLock() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_signal_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  struct stat info {};
  if (::stat(path_.c_str(), &info) == 0 && info.st_ino == inode_) ::unlink(path_.c_str());
}

// The lock appears complete or not at all: a whole temporary file, linked to the lock's name
// (link fails when the name exists, atomically, on NFS too).
bool DirLock::try_create(const std::string& text) {
  const std::string temporary = path_ + "." + run_id_ + ".tmp";
  const std::string problem = write_atomically(temporary, {{text.data(), text.size()}});
  if (!problem.empty()) throw std::runtime_error(problem);
  const bool created = ::link(temporary.c_str(), path_.c_str()) == 0;
  const int error = errno;
  ::unlink(temporary.c_str());
  if (!created && error != EEXIST) throw std::runtime_error("cannot create '" + path_ + "': " + std::strerror(error));
  if (!created) return false;
  struct stat info {};
  ::stat(path_.c_str(), &info);
  inode_ = info.st_ino;
  const size_t slash = path_.rfind('/');
  sync_to_disk(path_.substr(0, slash));
  return true;
}

// Moves the stale lock out of the way under a name of our own; if what was moved is not what
// was judged stale (another starter replaced it meanwhile), it is put back.
void DirLock::take_over(const std::string& seen, const std::string& why) {
  const std::string moved = path_ + ".stale." + run_id_;
  if (::rename(path_.c_str(), moved.c_str()) != 0) return;  // gone already: try again
  std::string text, problem;
  read_file(moved, kMaxConfigBytes, text, problem);
  if (text == seen) say_(why);
  else ::link(moved.c_str(), path_.c_str());  // a live lock: back in place
  ::unlink(moved.c_str());
}

void DirLock::heartbeat() {
  bool lost = false;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_signal_.wait_for(lock, std::chrono::duration<double>(settings_.heartbeat_s), [this] { return stop_; })) {
    struct stat info {};
    const bool ours = ::stat(path_.c_str(), &info) == 0 && info.st_ino == inode_;
    if (ours) ::utimensat(AT_FDCWD, path_.c_str(), nullptr, 0);
    if (!ours && !lost)
      say_("warning: the lock " + path_ + " was removed or replaced by another run (judged stale?): this run no "
           "longer owns its directory");
    lost = !ours;
  }
}

}  // namespace trident
