// Communicators against the grid and the topology, for every layout of the job's size and
// several emulated node and rack sizes; and a reduction over each group to prove they work.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <numeric>

#include "comm/mpi/groups.hpp"
#include "comm/world.hpp"
#include "core/mpi_util.hpp"
#include "deck/deck.hpp"
#include "mpi_fixture.hpp"
#include "comm/discover_topology.hpp"
#include "job/job.hpp"
#include "job/memory_plan.hpp"

using namespace trident;
using testing::everywhere;

namespace {

deck::Deck layout_deck(int tp, int pp, int dp, int ranks_per_node, int nodes_per_rack) {
  return deck::Deck::parse(
      "test.deck", "[model]\nlayers = 8\nheads = 8\nhidden = 64\nvocab = 256\nseq_len = 16\n",
      {{"parallel.tensor", std::to_string(tp)},
       {"parallel.pipeline", std::to_string(pp)},
       {"parallel.data", std::to_string(dp)},
       {"topology.ranks_per_node", std::to_string(ranks_per_node)},
       {"topology.nodes_per_rack", std::to_string(nodes_per_rack)}});
}

// Sum of the world ranks over `comm` equals the sum over the expected members.
bool sums_match(MPI_Comm comm, const std::vector<int>& members) {
  if (comm == MPI_COMM_NULL) return members.empty();
  int mine = world_rank(), sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, comm);
  return sum == std::accumulate(members.begin(), members.end(), 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(groups)

BOOST_AUTO_TEST_CASE(communicators_match_grid_and_topology_for_every_layout) {
  const int world = world_size();
  int checked = 0;
  for (int tp = 1; tp <= world; ++tp)
    for (int pp = 1; pp <= world / tp; ++pp) {
      if (world % (tp * pp)) continue;
      const int dp = world / (tp * pp);
      for (int per_node : {0, 1, 2, world}) {
        if (per_node > 0 && world % per_node) continue;
        const deck::Deck deck = layout_deck(tp, pp, dp, per_node, per_node == 1 ? 2 : 0);
        const layout::Grid grid(tp, pp, dp);
        const topo::Topology topology = comm::discover_topology(testing::world(), read_settings(deck).topology);
        const comm::ProcessGroups groups(grid, topology);
        const std::string problem = comm::verify_groups(groups, grid, topology);
        BOOST_TEST(problem == "", "tp " << tp << " pp " << pp << " dp " << dp << ": " << problem);
        bool sums = true;
        for (auto kind : {layout::GroupKind::Tensor, layout::GroupKind::Pipeline,
                          layout::GroupKind::Data, layout::GroupKind::Embedding})
          sums = sums && sums_match(groups.group(kind), grid.group(kind, world_rank()));
        BOOST_TEST(everywhere(sums), "tp " << tp << " pp " << pp << " dp " << dp);
        ++checked;
      }
    }
  BOOST_TEST(checked > 0);
}

BOOST_AUTO_TEST_CASE(real_topology_is_one_node_on_one_host) {
  const topo::Topology t = comm::discover_topology(testing::world(), read_settings(layout_deck(1, 1, world_size(), 0, 0)).topology);
  BOOST_TEST(everywhere(t.num_nodes() == 1 && t.num_racks() == 1 && !t.emulated()));
  BOOST_TEST(everywhere(t.place(world_rank()).local_rank == world_rank()));
}

// The ranks that share a device by its identity, not its index (srun --gpus-per-task=1 gives
// every rank a device 0 of its own): a group per distinct value, its members in world order.
BOOST_AUTO_TEST_CASE(split_by_value_groups_equal_values_in_order) {
  const int rank = world_rank(), world = world_size();
  const auto own = comm::split_by_value(testing::world(), "GPU-" + std::to_string(rank), "own");
  BOOST_TEST(everywhere(own->size() == 1 && own->rank() == 0));
  // Two devices seen by alternate ranks (the task distribution over two sockets).
  const auto socket = comm::split_by_value(testing::world(), rank % 2 ? "odd" : "even", "socket");
  BOOST_TEST(everywhere(socket->size() == (world + 1 - rank % 2) / 2 && socket->rank() == rank / 2));
}

// MFU's processors on CUDA: each memory once, however many ranks share it — GPUs of two ranks
// each, one GPU per rank, every rank on one GPU, and this one host's memory.
BOOST_AUTO_TEST_CASE(memories_in_job_counts_each_shared_memory_once) {
  const int rank = world_rank(), world = world_size();
  ModelMemory pairs;  // ranks 2k and 2k + 1 (the last alone where the world is odd)
  const int first = rank - rank % 2;
  pairs.ranks = first + 1 < world ? std::vector<int>{first, first + 1} : std::vector<int>{first};
  BOOST_TEST(everywhere(memories_in_job(testing::world(), pairs) == (world + 1) / 2));
  ModelMemory own;
  own.ranks = {rank};
  BOOST_TEST(everywhere(memories_in_job(testing::world(), own) == world));
  ModelMemory one;
  one.ranks.resize(static_cast<size_t>(world));
  std::iota(one.ranks.begin(), one.ranks.end(), 0);
  BOOST_TEST(everywhere(memories_in_job(testing::world(), one) == 1));
  BOOST_TEST(everywhere(memories_in_job(testing::world(), host_model_memory(testing::world())) == 1));
}

BOOST_AUTO_TEST_CASE(level_communicators_have_the_emulated_sizes) {
  const int world = world_size();
  if (world % 2) return;  // one rank: nothing to emulate
  const deck::Deck deck = layout_deck(1, 1, world, 1, 2);  // nodes of 1 rank, racks of 2 nodes
  const topo::Topology topology = comm::discover_topology(testing::world(), read_settings(deck).topology);
  const comm::ProcessGroups groups(layout::Grid(1, 1, world), topology);
  int node = 0, rack = 0, cross = 0;
  MPI_Comm_size(groups.node(), &node);
  MPI_Comm_size(groups.rack(), &rack);
  MPI_Comm_size(groups.cross_rack(), &cross);
  BOOST_TEST(everywhere(node == 1 && rack == 2 && cross == world / 2));
  BOOST_TEST(everywhere(groups.leaders() != MPI_COMM_NULL));  // every rank leads its node
}

BOOST_AUTO_TEST_SUITE_END()
