// The typed, asynchronous communicator interface: 16-bit all-reduces against the ring's
// reference (a rounding per hop), what Work's test() and wait() promise, the collectives of a few values, and the
// link-model wrapper (its delays at least the model's, its byte counts the wrapped one's).
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "comm/agreement.hpp"
#include "comm/wrappers/emulated_links.hpp"
#include "comm/discover_topology.hpp"
#include "comm/group_collectives.hpp"
#include "comm/host_stream.hpp"
#include "comm/wrappers/widen.hpp"
#include "core/clock.hpp"
#include "core/mpi_util.hpp"
#include "mpi_fixture.hpp"
#include "job/job.hpp"

using namespace trident;
using testing::everywhere;

namespace {

std::vector<topo::Level> all_node(int n) { return std::vector<topo::Level>(n, topo::Level::Node); }

// Rank r's value at i, as a 16-bit number: (r + 1)·(1 + (i mod 97)/128) rounded to the type.
// Sums of such values over a few ranks are exact in f32 (and double), in any order, so the
// reference is the exact sum rounded once to the type.
std::vector<uint16_t> contribution16(DType dtype, size_t n, int r) {
  std::vector<float> wide(n);
  for (size_t i = 0; i < n; ++i) wide[i] = float(r + 1) * (1.0f + float(i % 97) / 128.0f);
  std::vector<uint16_t> out(n);
  comm::narrow(dtype, wide.data(), out.data(), n);
  return out;
}

// The ring's reference: segment k (comm::segment_of) is summed along the ring from rank k + 1
// to rank k — each partial sum widened, the next rank's value added in f32, the result rounded
// to the type before it travels on: one rounding per hop, as NCCL sums 16-bit types.
std::vector<uint16_t> reference16(DType dtype, size_t n, int members) {
  std::vector<std::vector<float>> wide(members, std::vector<float>(n));
  for (int r = 0; r < members; ++r) comm::widen(dtype, contribution16(dtype, n, r).data(), wide[r].data(), n);
  std::vector<uint16_t> out(n);
  for (int k = 0; k < members; ++k) {
    const auto segment = comm::segment_of(n, members, k);
    for (size_t i = segment.first; i < segment.second; ++i) {
      float partial = wide[(k + 1) % members][i];
      uint16_t rounded = 0;
      comm::narrow(dtype, &partial, &rounded, 1);
      for (int hop = 2; hop <= members; ++hop) {
        float sum = 0;
        comm::widen(dtype, &rounded, &sum, 1);
        sum += wide[(k + hop) % members][i];
        comm::narrow(dtype, &sum, &rounded, 1);
      }
      out[i] = rounded;
    }
  }
  return out;
}

topo::Topology eight_ranks_in_two_racks() {
  const deck::Deck deck = deck::Deck::parse(
      "t.deck", "[model]\nlayers = 2\nheads = 2\nhidden = 8\nvocab = 16\nseq_len = 4\n",
      {{"parallel.data", "8"}, {"topology.ranks_per_node", "2"}, {"topology.nodes_per_rack", "2"}});
  return comm::discover_topology(testing::world(), read_settings(deck).topology);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(typed_comm)

// Whatever the algorithm asked for: the ring with 16-bit messages, half the f32 ring's bytes.
BOOST_AUTO_TEST_CASE(sixteen_bit_all_reduce_rounds_at_each_hop_of_the_ring) {
  const int n = world_size();
  bool ok = true;
  for (DType dtype : {DType::bf16, DType::fp16})
    for (comm::Algo algo : {comm::Algo::Ring, comm::Algo::Tree, comm::Algo::Shm})
      for (size_t count : {size_t(1), size_t(1000), size_t(300001)}) {
        comm::MpiCommunicator c(MPI_COMM_WORLD, all_node(n), "world", 60, comm::Traffic::Count, algo);
        std::vector<uint16_t> v = contribution16(dtype, count, c.rank());
        c.all_reduce(v.data(), count, dtype, comm::Op::Sum, Stream{}).wait();
        const bool same = v == reference16(dtype, count, n);
        ok = ok && same;
        // Sent as 16-bit values: half the f32 ring's bytes.
        if (count % n == 0) ok = ok && c.traffic().sent[0] == 2.0 * (n - 1) / n * count * sizeof(uint16_t);
      }
  BOOST_TEST(everywhere(ok));
}

// The same through the hierarchical communicator (4 emulated nodes of 2 ranks in 2 racks): its
// levels are f32 algorithms, so 16-bit values take the flat ring over the group.
BOOST_AUTO_TEST_CASE(sixteen_bit_hierarchical_all_reduce_equals_the_reference) {
  const int n = world_size();
  if (n != 8) return;
  const topo::Topology t = eight_ranks_in_two_racks();
  comm::CollectiveSettings settings;
  settings.algo = "hierarchical";
  comm::GroupCollectives g(MPI_COMM_WORLD, t, "data", settings);
  bool ok = g.hierarchical();
  for (DType dtype : {DType::bf16, DType::fp16}) {
    std::vector<uint16_t> v = contribution16(dtype, 4000, world_rank());
    comm::Communicator& group = g;
    group.all_reduce(v.data(), v.size(), dtype, comm::Op::Sum, Stream{}).wait();
    ok = ok && v == reference16(dtype, v.size(), n);
  }
  BOOST_TEST(everywhere(ok));
}

// A receive is not complete before its message was sent: test() says so without blocking, and
// wait() completes it. The sender sends only after a barrier the receiver reaches after testing.
BOOST_AUTO_TEST_CASE(work_test_and_wait_semantics_of_point_to_point) {
  const int n = world_size();
  if (n < 2) return;
  comm::MpiCommunicator c(MPI_COMM_WORLD, all_node(n), "world", 60);
  bool ok = true;
  std::vector<float> data(1000, world_rank() == 1 ? 2.5f : 0.0f);
  if (world_rank() == 0) {
    comm::Work receive = c.recv(data.data(), data.size(), DType::f32, 1, 7, Stream{});
    ok = ok && !receive.test() && !receive.done();
    c.barrier(Stream{}).wait();
    receive.wait();
    ok = ok && receive.done() && receive.test() && data[0] == 2.5f && data[999] == 2.5f;
  } else {
    c.barrier(Stream{}).wait();
    if (world_rank() == 1) {
      comm::Work send = c.send(data.data(), data.size(), DType::f32, 0, 7, Stream{});
      while (!send.test()) {
      }
      ok = ok && send.done();
    }
  }
  comm::Work nothing;
  ok = ok && nothing.done() && nothing.test();
  BOOST_TEST(everywhere(ok));
}

// A host stream runs its work in order, on its own thread; a Work is done only once its task ran.
BOOST_AUTO_TEST_CASE(host_stream_work_completes_in_order) {
  comm::HostStream stream;
  std::atomic<bool> release{false};
  std::vector<int> order;
  comm::Work first = stream.enqueue([&] {
    while (!release) std::this_thread::yield();
    order.push_back(1);
  });
  comm::Work second = stream.enqueue([&] { order.push_back(2); });
  const bool held = !first.test() && !second.test();
  release = true;
  second.wait();
  const bool first_done = first.test();
  BOOST_TEST(everywhere(held && first_done && order == std::vector<int>({1, 2})));
}

namespace {
// An operation that counts its waits and says whether it is stream-ordered (as NCCL's are).
class CountedWork final : public comm::PendingWork {
 public:
  CountedWork(int& waits, bool ordered) : waits_(waits), ordered_(ordered) {}
  bool test() override { return false; }
  void wait() override { ++waits_; }
  bool stream_ordered() const override { return ordered_; }

 private:
  int& waits_;
  bool ordered_;
};
comm::Work counted(int& waits, bool ordered) { return comm::Work(std::make_unique<CountedWork>(waits, ordered)); }
}  // namespace

// leave_to_stream lets a stream-ordered operation go without waiting (a fence completes it
// later) and waits for any other, also inside all_of; host communicators' fences are complete.
BOOST_AUTO_TEST_CASE(leave_to_stream_waits_only_for_host_work) {
  int ordered_waits = 0, host_waits = 0;
  comm::Work ordered = counted(ordered_waits, true), host = counted(host_waits, false);
  ordered.leave_to_stream();
  host.leave_to_stream();
  bool ok = ordered.done() && host.done() && ordered_waits == 0 && host_waits == 1;
  std::vector<comm::Work> both;
  both.push_back(counted(ordered_waits, true));
  both.push_back(counted(host_waits, false));
  comm::Work mixed = comm::all_of(std::move(both));
  ok = ok && !mixed.stream_ordered();
  mixed.leave_to_stream();
  ok = ok && ordered_waits == 1 && host_waits == 2;  // waited for, each part
  std::vector<comm::Work> on_stream;
  on_stream.push_back(counted(ordered_waits, true));
  on_stream.push_back(comm::Work{});
  comm::Work all_ordered = comm::all_of(std::move(on_stream));
  all_ordered.leave_to_stream();
  ok = ok && all_ordered.done() && ordered_waits == 1;
  comm::MpiCommunicator c(MPI_COMM_WORLD, all_node(world_size()), "world", 60);
  ok = ok && c.fence(Stream{}).done();
  BOOST_TEST(everywhere(ok));
}

BOOST_AUTO_TEST_CASE(few_values_gather_all_gather_broadcast_and_strings) {
  const int n = world_size();
  comm::MpiCommunicator c(MPI_COMM_WORLD, all_node(n), "world", 60);
  const double mine[2] = {double(world_rank()), 0.5 * world_rank()};
  std::vector<double> gathered(world_rank() == 0 ? 2 * n : 0);
  c.gather(mine, gathered.data(), 2, DType::f64, 0, Stream{}).wait();
  bool ok = true;
  for (int r = 0; world_rank() == 0 && r < n; ++r) ok = ok && gathered[2 * r] == r && gathered[2 * r + 1] == 0.5 * r;
  const int32_t id = 10 * world_rank();
  std::vector<int32_t> ids(n, -1);
  c.all_gather_values(&id, ids.data(), 1, DType::i32, Stream{}).wait();
  for (int r = 0; r < n; ++r) ok = ok && ids[r] == 10 * r;
  double value = world_rank() == n - 1 ? 42.0 : 0.0;
  c.broadcast(&value, 1, DType::f64, n - 1, Stream{}).wait();
  double largest = world_rank();
  c.all_reduce(&largest, 1, DType::f64, comm::Op::Max, Stream{}).wait();
  std::string text = world_rank() == 0 ? std::string(1001, 'q') + "!" : "";
  comm::broadcast_string(c, text, 0);
  ok = ok && value == 42.0 && largest == n - 1 && text.size() == 1002 && text.back() == '!';
  // Not in the byte counts: MPI's own collectives carry them.
  ok = ok && c.traffic().sent[0] == 0 && c.traffic().received[0] == 0;
  BOOST_TEST(everywhere(ok));
}

// The wrapper delays each step to latency + bytes / bandwidth and changes nothing else: the
// same sums and the same bytes per level as the communicator alone. A ring all-reduce over n
// ranks is 2(n−1) steps, so with a 2 ms latency it takes at least 4(n−1) ms.
BOOST_AUTO_TEST_CASE(link_model_wrapper_delays_steps_and_keeps_byte_counts) {
  const int n = world_size();
  if (n < 2) return;
  comm::LinkModel links;
  comm::parse_link("2000,100", links, 0);  // node level: 2 ms, 100 GB/s
  const size_t count = size_t(n) * 1000;
  std::vector<float> alone(count, float(world_rank() + 1)), wrapped_data = alone;
  comm::MpiCommunicator plain(MPI_COMM_WORLD, all_node(n), "plain", 60);
  plain.all_reduce(alone.data(), count, DType::f32, comm::Op::Sum, Stream{}).wait();
  comm::EmulatedLinks wrapped(std::make_unique<comm::MpiCommunicator>(MPI_COMM_WORLD, all_node(n), "wrapped", 60),
                              links);
  const double start = steady_seconds();
  wrapped.all_reduce(wrapped_data.data(), count, DType::f32, comm::Op::Sum, Stream{}).wait();
  const double ring_seconds = steady_seconds() - start;
  const double step = links.seconds(0, double(count / n) * sizeof(float));
  bool ok = alone == wrapped_data && alone[0] == float(n * (n + 1) / 2);
  ok = ok && ring_seconds >= 2 * (n - 1) * step;
  ok = ok && wrapped.traffic().sent == plain.traffic().sent && wrapped.traffic().received == plain.traffic().received;
  // A receive completes no sooner than the model says, counted from when it was posted.
  std::vector<float> message(250000, 1.0f);  // 1 MB: 2 ms + 10 µs
  double receive_seconds = 1e9;
  if (world_rank() == 0) wrapped.send(message.data(), message.size(), DType::f32, 1, 3, Stream{}).wait();
  if (world_rank() == 1) {
    const double posted = steady_seconds();
    wrapped.recv(message.data(), message.size(), DType::f32, 0, 3, Stream{}).wait();
    receive_seconds = steady_seconds() - posted;
  }
  ok = ok && (world_rank() != 1 || receive_seconds >= links.seconds(0, 1e6));
  BOOST_TEST(everywhere(ok), "ring " << ring_seconds << " s, receive " << receive_seconds << " s");
}

BOOST_AUTO_TEST_SUITE_END()
