// The run-directory lock: exclusive (a second taker gets DirLockBusy naming the holder, the
// file untouched), released by its destructor, a dead pid's lock taken over with a warning, a
// live process of this host waited for, another host's lock judged by its heartbeat.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/dir_lock.hpp"
#include "core/file_util.hpp"

namespace {

using namespace trident;
namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/trident-lock-test.XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read(const std::string& path) {
  std::string text, why;
  read_file(path, trident::kMaxConfigBytes, text, why);
  return text;
}

long dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

void write_lock(const std::string& dir, const std::string& host, long pid) {
  std::ofstream(dir + "/" + kLockFileName) << "host = " << host << "\npid = " << pid << "\nrun_id = ghost\n";
}

LockSettings quick() {
  LockSettings s;
  s.wait_s = 0;
  s.heartbeat_s = 0.05;
  s.stale_s = 60;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dir_lock)

BOOST_AUTO_TEST_CASE(a_second_taker_is_refused_and_the_lock_goes_with_its_owner) {
  TempDir dir;
  std::vector<std::string> said;
  auto say = [&](const std::string& line) { said.push_back(line); };
  {
    DirLock first(dir.path, "run-1", quick(), say);
    const std::string held = read(first.path());
    BOOST_TEST(held.find("run_id = run-1") != std::string::npos);
    try {
      DirLock second(dir.path, "run-2", quick(), say);
      BOOST_FAIL("a second lock was granted");
    } catch (const DirLockBusy& e) {
      const std::string what = e.what();
      BOOST_TEST(what.find("is in use by run run-1 (pid " + std::to_string(getpid())) != std::string::npos);
    }
    BOOST_TEST(read(first.path()) == held);
    usleep(150000);  // a few heartbeats: the lock stays ours
    BOOST_TEST(said.empty());
  }
  BOOST_TEST(!fs::exists(dir.path + "/" + kLockFileName));
  BOOST_TEST(fs::is_empty(dir.path));  // no temporaries left behind
}

BOOST_AUTO_TEST_CASE(a_dead_pids_lock_is_taken_over_with_a_warning) {
  TempDir dir;
  const long pid = dead_pid();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  write_lock(dir.path, host, pid);
  std::vector<std::string> said;
  DirLock lock(dir.path, "run-3", quick(), [&](const std::string& line) { said.push_back(line); });
  BOOST_TEST_REQUIRE(said.size() == 1u);
  BOOST_TEST(said[0].find("pid " + std::to_string(pid) + " is no longer running: taking it over") != std::string::npos);
  BOOST_TEST(read(lock.path()).find("run_id = run-3") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(another_hosts_lock_is_judged_by_its_heartbeat) {
  LockHolder holder;
  holder.host = "other-node-17";
  holder.pid = 4242;
  const LockSettings settings = quick();
  BOOST_TEST(stale_reason(holder, 5, settings).empty());
  BOOST_TEST(stale_reason(holder, 61, settings).find("heartbeat stopped") != std::string::npos);
  LockHolder me = LockHolder::of_this_process("r");
  BOOST_TEST(stale_reason(me, 1e6, settings).empty());  // alive here, however old its mtime
  me.boot_id = "another-boot";
  BOOST_TEST(stale_reason(me, 0, settings) == "this host rebooted since");
}

BOOST_AUTO_TEST_CASE(a_live_holder_of_this_host_is_waited_for) {
  TempDir dir;
  const pid_t child = fork();
  if (child == 0) {
    usleep(300000);
    _exit(0);
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  write_lock(dir.path, host, child);
  LockSettings settings = quick();
  settings.wait_s = 5;
  std::vector<std::string> said;
  DirLock lock(dir.path, "run-4", settings, [&](const std::string& line) { said.push_back(line); });  // the child ends, unreaped
  waitpid(child, nullptr, 0);
  BOOST_TEST_REQUIRE(said.size() == 2u);
  BOOST_TEST(said[0].find("waiting up to 5 s") != std::string::npos);
  BOOST_TEST(said[1].find("zombie") != std::string::npos);
}

// What is no lock of trident's is refused at once (not waited for for wait_s), saying what it
// is and how to clear it; a FIFO is never opened (that would block).
BOOST_AUTO_TEST_CASE(a_name_that_holds_no_lock_is_refused_at_once) {
  LockSettings settings = quick();
  settings.wait_s = 30;
  const auto refused = [&](const std::string& make, const std::string& expected) {
    TempDir dir;
    const std::string lock = dir.path + "/" + kLockFileName;
    BOOST_TEST_REQUIRE(std::system(("cd '" + dir.path + "' && " + make).c_str()) == 0);
    const auto started = std::chrono::steady_clock::now();
    try {
      DirLock taken(dir.path, "run-5", settings, [](const std::string&) {});
      BOOST_ERROR("taken: " + make);
    } catch (const DirLockForeign& e) {
      BOOST_TEST(std::string(e.what()).find(expected) != std::string::npos, e.what());
      BOOST_TEST(std::string(e.what()).find("no run of trident holds it") != std::string::npos);
    }
    BOOST_TEST((std::chrono::steady_clock::now() - started < std::chrono::seconds(10)));
  };
  refused("ln -s /nonexistent trident.lock", "is a symbolic link to '/nonexistent' (dangling)");
  refused("touch trident.lock", "is empty");
  refused("printf 'garbage' > trident.lock", "7 bytes that are not a lock trident wrote");
  refused("mkdir trident.lock", "is a directory");
  refused("mkfifo trident.lock", "is a FIFO");
}

// A stop signal (here: the callback says so) ends the wait for a live holder.
BOOST_AUTO_TEST_CASE(a_stop_ends_the_wait_for_a_live_holder) {
  TempDir dir;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  write_lock(dir.path, host, static_cast<long>(getpid()));  // alive: this process
  LockSettings settings = quick();
  settings.wait_s = 30;
  int asked = 0;
  const auto started = std::chrono::steady_clock::now();
  BOOST_CHECK_THROW(DirLock(dir.path, "run-6", settings, [](const std::string&) {}, [&] { return ++asked > 2; }),
                    DirLockStopped);
  BOOST_TEST(asked == 3);
  BOOST_TEST((std::chrono::steady_clock::now() - started < std::chrono::seconds(10)));
}

BOOST_AUTO_TEST_SUITE_END()
