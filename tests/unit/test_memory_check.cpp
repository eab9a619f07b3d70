// The start-up memory check's verdict (job::memory_shortfall): the bytes the ranks sharing a
// memory need by the memory model against its size, and at start-up against what others left
// free of it — a device that a previous job or the ranks' own CUDA contexts hold part of. The
// guarded backend's emulated device takes the same path end to end (tests/e2e/device_guard.sh);
// only a real device has others' memory in it, hence these figures.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <string>

#include "job/memory_plan.hpp"

using namespace trident;

namespace {

constexpr double GiB = 1073741824.0;

ModelMemory device_of(double bytes, double held, int ranks) {
  ModelMemory memory;
  for (int r = 0; r < ranks; ++r) memory.ranks.push_back(r);
  memory.bytes = bytes;
  memory.held = held;
  memory.name = "device cuda:0 of host n1";
  memory.device = true;
  return memory;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(memory_check)

BOOST_AUTO_TEST_CASE(more_than_the_device_is_refused_by_its_size) {
  const ModelMemory memory = device_of(80 * GiB, 2 * GiB, 2);
  const std::string problem = memory_shortfall(90 * GiB, memory, memory.held);
  BOOST_TEST(has(problem, "the 2 ranks on device cuda:0 of host n1 need 90.0 GiB by the memory model"), problem);
  BOOST_TEST(has(problem, "10.0 GiB more than its 80.0 GiB of device memory"), problem);
}

BOOST_AUTO_TEST_CASE(what_others_hold_at_start_up_counts) {
  const ModelMemory memory = device_of(80 * GiB, 12 * GiB, 1);
  const std::string problem = memory_shortfall(70 * GiB, memory, memory.held);
  BOOST_TEST(has(problem, "the 1 rank on device cuda:0 of host n1 needs 70.0 GiB"), problem);
  BOOST_TEST(has(problem, "2.0 GiB more than the 68.0 GiB free of its 80.0 GiB at start-up"), problem);
  BOOST_TEST(has(problem, "12.0 GiB is held by the CUDA contexts of its ranks and by other processes"), problem);
  BOOST_TEST(memory_shortfall(68 * GiB, memory, memory.held) == "");  // exactly what is free fits
}

BOOST_AUTO_TEST_CASE(a_running_jobs_own_buffers_are_not_held_against_it) {
  // A balance move's check passes held = 0: memory.held then includes the job's own buffers.
  const ModelMemory memory = device_of(80 * GiB, 40 * GiB, 1);
  BOOST_TEST(memory_shortfall(70 * GiB, memory, 0.0) == "");
  BOOST_TEST(has(memory_shortfall(81 * GiB, memory, 0.0), "more than its 80.0 GiB of device memory"));
}

BOOST_AUTO_TEST_CASE(an_unknown_size_checks_nothing_and_the_host_reads_as_memory) {
  BOOST_TEST(memory_shortfall(1e15, device_of(0, 0, 1), 0.0) == "");
  ModelMemory host;
  host.ranks = {0, 1, 2};
  host.bytes = 24 * GiB;
  host.name = "host n1";
  const std::string problem = memory_shortfall(30 * GiB, host, host.held);
  BOOST_TEST(has(problem, "the 3 ranks on host n1 need 30.0 GiB by the memory model, 6.0 GiB more than its 24.0 GiB of memory"),
             problem);
}

BOOST_AUTO_TEST_SUITE_END()
