// Our ring, tree and hierarchical collectives: exact results on integer-valued data for every
// algorithm and group size, and exact byte counts per level against the formulas.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include "comm/group_collectives.hpp"
#include "comm/wrappers/widen.hpp"
#include "core/mpi_util.hpp"
#include "deck/deck.hpp"
#include "tensor/buffer.hpp"
#include "mpi_fixture.hpp"
#include "comm/discover_topology.hpp"
#include "job/job.hpp"

using namespace trident;
using testing::everywhere;

namespace {

// Member r contributes (r + 1)·(i mod 7 + 1): sums are small integers, exact in float.
std::vector<float> contribution(size_t n, int r) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float((r + 1) * (i % 7 + 1));
  return v;
}

// Element i of the contributions' sum over `members` ranks.
float sum_at(size_t i, int members) { return float(members * (members + 1) / 2) * float(i % 7 + 1); }

size_t wrong_elements(const std::vector<float>& v, int members) {
  size_t wrong = 0;
  for (size_t i = 0; i < v.size(); ++i) wrong += v[i] != sum_at(i, members);
  return wrong;
}

// 8 ranks as 4 emulated nodes of 2 ranks in 2 racks (collective).
topo::Topology four_nodes_in_two_racks() {
  const deck::Deck deck = deck::Deck::parse(
      "t.deck", "[model]\nlayers = 2\nheads = 2\nhidden = 8\nvocab = 16\nseq_len = 4\n",
      {{"parallel.data", "8"}, {"topology.ranks_per_node", "2"}, {"topology.nodes_per_rack", "2"}});
  return comm::discover_topology(testing::world(), read_settings(deck).topology);
}

std::vector<topo::Level> all_node(int n) { return std::vector<topo::Level>(n, topo::Level::Node); }

// For each group of the first `members` world ranks, `smallest` members up to all: check(group,
// members) runs on the group's ranks and says whether all was right; one assertion per size.
void for_each_leading_group(int smallest, const std::function<bool(MPI_Comm, int)>& check) {
  for (int members = smallest; members <= world_size(); ++members) {
    MPI_Comm group = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank() < members ? 0 : MPI_UNDEFINED, world_rank(), &group);
    bool ok = true;
    if (group != MPI_COMM_NULL) {
      ok = check(group, members);
      MPI_Comm_free(&group);
    }
    BOOST_TEST(everywhere(ok), "group of " << members);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(collectives)

BOOST_AUTO_TEST_CASE(flat_all_reduce_is_exact_for_every_algorithm_and_group_size) {
  for_each_leading_group(1, [](MPI_Comm group, int members) {
    bool ok = true;
    comm::MpiCommunicator c(group, all_node(members), "test", 60);
    for (comm::Algo algo : {comm::Algo::Ring, comm::Algo::Tree, comm::Algo::Shm, comm::Algo::Mpi})
      for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(300001), size_t(3 << 20) + 5}) {
        std::vector<float> v = contribution(n, c.rank());
        c.all_reduce_f32(v.data(), n, algo);
        ok = ok && wrong_elements(v, members) == 0;
      }
    return ok;
  });
}

BOOST_AUTO_TEST_CASE(sixty_four_megabytes_ring) {
  comm::MpiCommunicator c(MPI_COMM_WORLD, all_node(world_size()), "world", 120);
  std::vector<float> v = contribution(size_t(16) << 20, c.rank());
  c.all_reduce_f32(v.data(), v.size(), comm::Algo::Ring);
  BOOST_TEST(everywhere(wrong_elements(v, c.size()) == 0));
}

BOOST_AUTO_TEST_CASE(ring_and_tree_bytes_match_the_formulas) {
  const int n = world_size();
  comm::MpiCommunicator ring(MPI_COMM_WORLD, all_node(n), "world", 60);
  const size_t count = size_t(n) * 1000;  // divisible: exactly 2(n−1)/n·S
  std::vector<float> v = contribution(count, ring.rank());
  ring.all_reduce_f32(v.data(), count, comm::Algo::Ring);
  const double S = count * sizeof(float);
  BOOST_TEST(everywhere(ring.traffic().sent[0] == 2.0 * (n - 1) / n * S &&
                        ring.traffic().received[0] == ring.traffic().sent[0]));
  comm::MpiCommunicator tree(MPI_COMM_WORLD, all_node(n), "world", 60);
  tree.all_reduce_f32(v.data(), count, comm::Algo::Tree);
  // Double binary tree: each half S/2 goes up its tree (all but the root) and down to each child;
  // in the mirrored tree rank r sits at position n−1−r.
  double expected = 0.0;
  for (int position : {tree.rank(), n - 1 - tree.rank()})
    expected += ((position != 0 ? 1 : 0) + (2 * position + 1 < n) + (2 * position + 2 < n)) * S / 2;
  BOOST_TEST(everywhere(tree.traffic().sent[0] == expected), tree.traffic().sent[0] << " vs " << expected);
  comm::MpiCommunicator bcast(MPI_COMM_WORLD, all_node(n), "world", 60);
  std::vector<float> b(100, world_rank() == n - 1 ? 3.0f : 0.0f);
  bcast.broadcast(b.data(), b.size(), DType::f32, n - 1, Stream{}).wait();
  BOOST_TEST(everywhere(std::all_of(b.begin(), b.end(), [](float x) { return x == 3.0f; })));
}

// 16-bit values (comm.grad_dtype = bf16; the distributed optimizer's parameters): the ring with
// 16-bit messages — exact on small integers for every group size, odd counts and the shared
// window's algorithm alike; each rank's reduce-scatter segment summed; half the f32 ring's
// bytes; the all-gather of any element width moving the values as they are (fp16 bits here).
BOOST_AUTO_TEST_CASE(sixteen_bit_ring_exact_with_half_the_bytes) {
  for_each_leading_group(1, [](MPI_Comm group, int members) {
    bool ok = true;
    for (size_t n : {size_t(1), size_t(7), size_t(1000), size_t(300001)}) {
      comm::MpiCommunicator c(group, all_node(members), "test", 60, comm::Traffic::Count, comm::Algo::Shm);
      const std::vector<float> mine = contribution(n, c.rank());
      std::vector<uint16_t> low(n), scattered(n);
      comm::narrow(DType::bf16, mine.data(), low.data(), n);
      scattered = low;
      c.all_reduce(low.data(), n, DType::bf16, comm::Op::Sum, Stream{}).wait();
      std::vector<float> summed(n);
      comm::widen(DType::bf16, low.data(), summed.data(), n);
      ok = ok && wrong_elements(summed, members) == 0;
      c.reduce_scatter(scattered.data(), n, DType::bf16, comm::Op::Sum, Stream{}).wait();
      const auto own = comm::segment_of(n, members, c.rank());
      std::vector<float> segment(own.second - own.first);
      comm::widen(DType::bf16, scattered.data() + own.first, segment.data(), segment.size());
      for (size_t i = 0; i < segment.size(); ++i) ok = ok && segment[i] == sum_at(own.first + i, members);
      std::vector<uint16_t> bits(n, 0);  // fp16 bit patterns: each rank's segment, gathered
      for (size_t i = own.first; i < own.second; ++i) bits[i] = uint16_t(i * 31 + 7);
      c.all_gather(bits.data(), n, DType::fp16, Stream{}).wait();
      for (size_t i = 0; i < n; ++i) ok = ok && bits[i] == uint16_t(i * 31 + 7);
    }
    return ok;
  });
  // Bytes: the 16-bit all-reduce sends exactly half of what the f32 ring sends.
  const int n = world_size();
  const size_t count = size_t(n) * 1000;
  comm::MpiCommunicator f32(MPI_COMM_WORLD, all_node(n), "world", 60);
  std::vector<float> v = contribution(count, f32.rank());
  f32.all_reduce_f32(v.data(), count, comm::Algo::Ring);
  comm::MpiCommunicator b16(MPI_COMM_WORLD, all_node(n), "world", 60);
  std::vector<uint16_t> low(count);
  comm::narrow(DType::bf16, contribution(count, b16.rank()).data(), low.data(), count);
  b16.all_reduce(low.data(), count, DType::bf16, comm::Op::Sum, Stream{}).wait();
  BOOST_TEST(everywhere(b16.traffic().sent[0] * 2 == f32.traffic().sent[0] && (b16.traffic().sent[0] > 0) == (n > 1)),
             b16.traffic().sent[0] << " vs " << f32.traffic().sent[0]);
}

// Through the shared window: reduce-scatter and all-gather exact for every group size, over
// several chunks of the window (its buffers hold 1 Mi floats), and each collective counted as
// the bytes the ranks read from each other — the ring's formulas: all-reduce 2(n−1)/n·S,
// reduce-scatter and all-gather (n−1)/n·S.
BOOST_AUTO_TEST_CASE(shared_memory_collectives_exact_with_the_ring_byte_counts) {
  for_each_leading_group(2, [](MPI_Comm group, int members) {
    bool ok = true;
    for (size_t n : {size_t(5), size_t(1000), (size_t(5) << 19) + 3}) {
      comm::MpiCommunicator c(group, all_node(members), "test", 60);
      const auto own = comm::segment_of(n, members, c.rank());
      std::vector<float> v = contribution(n, c.rank());
      c.reduce_scatter_f32(v.data(), n, comm::Algo::Shm);
      for (size_t i = own.first; i < own.second; ++i) ok = ok && v[i] == sum_at(i, members);
      const double after_reduce_scatter = c.traffic().sent[0];
      std::fill(v.begin(), v.end(), -1.0f);
      std::fill(v.begin() + own.first, v.begin() + own.second, float(c.rank() + 1));
      c.all_gather_f32(v.data(), n, comm::Algo::Shm);
      for (int k = 0; k < members; ++k) {
        const auto seg = comm::segment_of(n, members, k);
        for (size_t i = seg.first; i < seg.second; ++i) ok = ok && v[i] == float(k + 1);
      }
      const double after_all_gather = c.traffic().sent[0];
      // Bytes: exact for n divisible by the group; otherwise what the segments say.
      const double S = n * sizeof(float), own_bytes = (own.second - own.first) * sizeof(float);
      ok = ok && after_reduce_scatter == S - own_bytes &&
           after_all_gather - after_reduce_scatter == (members - 1) * own_bytes;
      if (n % members == 0) ok = ok && after_reduce_scatter == (members - 1.0) / members * S;
    }
    comm::MpiCommunicator c(group, all_node(members), "test", 60);
    const size_t count = size_t(members) * 1000;
    std::vector<float> v = contribution(count, c.rank());
    c.all_reduce_f32(v.data(), count, comm::Algo::Shm);
    return ok && wrong_elements(v, members) == 0 &&
           c.traffic().sent[0] == 2.0 * (members - 1) / members * count * sizeof(float) &&
           c.traffic().received[0] == c.traffic().sent[0];
  });
}

// A window only for a group inside one node: across (emulated) nodes the ring carries the data,
// so that the link model's levels apply. The window is tracked memory while it lives.
BOOST_AUTO_TEST_CASE(shared_memory_only_inside_one_node) {
  const int n = world_size();
  if (n < 2) return;
  auto communication = [] { return memory_usage().current[static_cast<int>(MemoryCategory::Communication)]; };
  const int64_t before = communication();
  bool ok = true;
  std::vector<topo::Level> two_nodes(n, topo::Level::Rack);
  two_nodes[world_rank()] = topo::Level::Node;
  {
    comm::MpiCommunicator c(MPI_COMM_WORLD, two_nodes, "across nodes", 60);
    std::vector<float> v = contribution(1000, c.rank());
    c.all_reduce_f32(v.data(), v.size(), comm::Algo::Shm);
    ok = ok && wrong_elements(v, n) == 0 && communication() == before;
  }
  {
    comm::MpiCommunicator c(MPI_COMM_WORLD, all_node(n), "one node", 60);
    std::vector<float> v = contribution(1000, c.rank());
    c.all_reduce_f32(v.data(), v.size(), comm::Algo::Shm);
    ok = ok && wrong_elements(v, n) == 0 &&
         communication() == before + int64_t(comm::SharedWindow::bytes_per_rank(comm::SharedWindow::kCapacity));
  }
  BOOST_TEST(everywhere(ok && communication() == before));
}

BOOST_AUTO_TEST_CASE(hierarchical_all_reduce_exact_with_per_level_bytes) {
  const int n = world_size();
  if (n != 8) return;  // 4 emulated nodes of 2 ranks in 2 racks
  const topo::Topology t = four_nodes_in_two_racks();
  for (comm::Algo level_algo : {comm::Algo::Ring, comm::Algo::Tree, comm::Algo::Shm}) {
    comm::CollectiveSettings settings;
    settings.algo = "hierarchical";
    // Shm: the node level through shared memory, the others as trees. Same bytes per level.
    settings.node_algo = level_algo;
    settings.rack_algo = settings.cross_rack_algo = level_algo == comm::Algo::Shm ? comm::Algo::Tree : level_algo;
    comm::GroupCollectives g(MPI_COMM_WORLD, t, "data", settings);
    // 4000: one piece across nodes; 8 Mi + 4 Ki + 8: the shard in pipelined pieces (the rack
    // and cross-rack levels at once), the last one short. S divisible by k = 2, each piece by 2.
    double S = 0;
    for (size_t count : {size_t(4000), (size_t(8) << 20) + 4096 + 8}) {
      std::vector<float> v = contribution(count, world_rank());
      g.all_reduce(v.data(), count, DType::f32, comm::Op::Sum, Stream{}).wait();
      S += count * sizeof(float);
      BOOST_TEST(everywhere(wrong_elements(v, n) == 0), count << " elements");
    }
    const comm::LevelBytes bytes = g.traffic();
    // k = 2 per node, r = 2 nodes per rack, q = 2 racks: node 2(k−1)/k·S = S; rack and cross-rack
    // each 2(2−1)/2 · S/k = S/2 (a double tree of two: each sends one half up, the other down).
    BOOST_TEST(everywhere(g.hierarchical() && bytes.sent[0] == S && bytes.sent[1] == S / 2 &&
                          bytes.sent[2] == S / 2),
               "node " << bytes.sent[0] << " rack " << bytes.sent[1] << " cross " << bytes.sent[2]);
  }
  // The flat ring over the same 8 ranks: 2·7/8·S per rank, split by where the neighbours are.
  comm::CollectiveSettings flat;
  flat.algo = "flat";
  comm::GroupCollectives f(MPI_COMM_WORLD, t, "data", flat);
  std::vector<float> v = contribution(8000, world_rank());
  f.all_reduce(v.data(), v.size(), DType::f32, comm::Op::Sum, Stream{}).wait();
  const comm::LevelBytes bytes = f.traffic();
  BOOST_TEST(everywhere(wrong_elements(v, n) == 0 &&
                        bytes.sent[0] + bytes.sent[1] + bytes.sent[2] == 2.0 * 7 / 8 * 8000 * 4));
}

// The hierarchy written against the interface alone (what the NCCL level communicators run
// on device streams), here over the MPI level communicators on the CPU's stream: exact sums in
// f32 and bf16 (small integers), an odd count (unequal node segments), and the ring's bytes per
// level: node 2(k−1)/k·S, rack and cross-rack 2(2−1)/2 of this rank's node segment (k = 2).
BOOST_AUTO_TEST_CASE(hierarchical_all_reduce_over_the_interface) {
  const int n = world_size();
  if (n != 8) return;  // 4 emulated nodes of 2 ranks in 2 racks
  const topo::Topology t = four_nodes_in_two_racks();
  comm::CollectiveSettings settings;
  settings.algo = "hierarchical";
  comm::GroupCollectives g(MPI_COMM_WORLD, t, "data", settings);
  comm::Communicator* levels[] = {&g.level(0), &g.level(1), &g.level(2)};
  const size_t count = 4001;
  std::vector<float> v = contribution(count, world_rank());
  comm::hierarchical_all_reduce(levels[0], levels[1], levels[2], v.data(), count, DType::f32, Stream{}).wait();
  const comm::LevelBytes bytes = g.traffic();
  const double S = count * sizeof(float);
  const auto shard = comm::segment_of(count, 2, world_rank() % 2);  // 2001 or 2000 elements
  const double shard_bytes = (shard.second - shard.first) * sizeof(float);
  BOOST_TEST(everywhere(wrong_elements(v, n) == 0));
  BOOST_TEST(everywhere(bytes.sent[0] == S && bytes.sent[1] == shard_bytes && bytes.sent[2] == shard_bytes),
             "node " << bytes.sent[0] << " rack " << bytes.sent[1] << " cross " << bytes.sent[2]);
  // bf16: integers up to 256 are exact, so the sum survives the rounding at every level.
  const std::vector<float> wide = contribution(count, world_rank());
  std::vector<uint16_t> narrow(count);
  comm::narrow(DType::bf16, wide.data(), narrow.data(), count);
  comm::hierarchical_all_reduce(levels[0], levels[1], levels[2], narrow.data(), count, DType::bf16, Stream{}).wait();
  std::vector<float> summed(count);
  comm::widen(DType::bf16, narrow.data(), summed.data(), count);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += summed[i] != sum_at(i, n);
  BOOST_TEST(everywhere(wrong == 0));
  // A level of one member is null: two nodes' worth of the same data, node level only.
  std::vector<float> w = contribution(count, world_rank());
  comm::hierarchical_all_reduce(levels[0], nullptr, nullptr, w.data(), count, DType::f32, Stream{}).wait();
  size_t wrong_node = 0;
  const int pair_sum = (world_rank() / 2 * 2 + 1) + (world_rank() / 2 * 2 + 2);  // (r+1) over the node's two ranks
  for (size_t i = 0; i < count; ++i) wrong_node += w[i] != float(pair_sum * int(i % 7 + 1));
  BOOST_TEST(everywhere(wrong_node == 0));
}

BOOST_AUTO_TEST_CASE(maximum_over_the_group) {
  const int n = world_size();
  comm::MpiCommunicator c(MPI_COMM_WORLD, all_node(n), "world", 60);
  bool ok = true;
  for (comm::Algo algo : {comm::Algo::Ring, comm::Algo::Tree, comm::Algo::Shm, comm::Algo::Mpi}) {
    std::vector<float> v(1001);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float((c.rank() * 31 + i * 7) % 97) - 40.0f;
    c.all_reduce_f32(v.data(), v.size(), algo, comm::Op::Max);
    for (size_t i = 0; i < v.size(); ++i) {
      float expected = -1e30f;
      for (int r = 0; r < n; ++r) expected = std::max(expected, float((r * 31 + i * 7) % 97) - 40.0f);
      ok = ok && v[i] == expected;
    }
  }
  BOOST_TEST(everywhere(ok));
}

BOOST_AUTO_TEST_SUITE_END()
