// The collective error path and the string helpers every rank relies on.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "core/file_util.hpp"
#include "core/mpi_util.hpp"
#include "mpi_fixture.hpp"
#include "comm/agreement.hpp"
#include "comm/discover_topology.hpp"
#include "job/job.hpp"

using namespace trident;
using testing::everywhere;
using testing::user_error_of;

BOOST_AUTO_TEST_SUITE(runtime)

BOOST_AUTO_TEST_CASE(an_error_known_to_one_rank_is_raised_on_all) {
  const int root = world_size() - 1;
  const std::string error = user_error_of([&] {
    comm::agree_on_error(testing::world(), world_rank() == root ? "disk on fire" : "ignored on non-roots", root);
  });
  BOOST_TEST(everywhere(error == "disk on fire"));
  const std::string none = user_error_of([&] { comm::agree_on_error(testing::world(), "", 0); });
  BOOST_TEST(everywhere(none.empty()));
}

BOOST_AUTO_TEST_CASE(strings_broadcast_and_gather_at_any_length) {
  std::string text = world_rank() == 0 ? std::string(100000, 'x') + "end" : "";
  comm::broadcast_string(testing::world(), text, 0);
  BOOST_TEST(everywhere(text.size() == 100003 && text.substr(100000) == "end"));
  const auto all = comm::all_gather_strings(testing::world(), std::string(world_rank(), 'a' + world_rank() % 26));
  bool ok = static_cast<int>(all.size()) == world_size();
  for (int r = 0; ok && r < world_size(); ++r)
    ok = all[r] == std::string(r, 'a' + r % 26);
  BOOST_TEST(everywhere(ok));
}

// Any rank's problem, the lowest rank's first, the same on every rank; a verdict all share.
BOOST_AUTO_TEST_CASE(the_first_error_of_any_rank_and_a_shared_verdict) {
  const int n = world_size(), last = n - 1;
  const std::string mine = world_rank() >= last - 1 ? "rank " + std::to_string(world_rank()) : "";
  const std::string first = comm::first_error(testing::world(), mine);
  BOOST_TEST(everywhere(first == "rank " + std::to_string(std::max(0, last - 1))), first);
  BOOST_TEST(everywhere(comm::first_error(testing::world(), "").empty()));
  BOOST_TEST(everywhere(!comm::all_true(testing::world(), world_rank() != last)));
  BOOST_TEST(everywhere(comm::all_true(testing::world(), true)));
  const std::string error = user_error_of([&] { comm::agree_on_first_error(testing::world(), mine); });
  BOOST_TEST(everywhere(error == first));
}

BOOST_AUTO_TEST_CASE(a_missing_file_is_a_user_error_on_every_rank) {
  const std::string error = user_error_of([] {
    comm::read_on_root_and_broadcast(testing::world(), "/nonexistent/deck.ini", "deck", "hint");
  });
  BOOST_TEST(everywhere(error.find("cannot read deck '/nonexistent/deck.ini': No such file") == 0),
             error);
}

BOOST_AUTO_TEST_CASE(topology_file_places_nodes_in_racks) {
  const int world = world_size();
  if (world < 2 || world % 2) return;
  const std::string path = "/tmp/trident-test-topology-" + std::to_string(getpid()) + ".conf";
  // Rank 0 writes the file; its pid differs from the others', so broadcast the path.
  std::string shared_path = path;
  comm::broadcast_string(testing::world(), shared_path, 0);
  if (world_rank() == 0) {
    std::ofstream out(shared_path);
    std::string even, odd;
    for (int n = 0; n < world; ++n) (n % 2 ? odd : even) += (n > 1 ? "," : "") + std::to_string(n);
    out << "# two racks, nodes interleaved\nSwitchName=even Nodes=node[" << even
        << "]\nSwitchName=odd Nodes=node[" << odd << "]\nSwitchName=top Switches=even,odd\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const deck::Deck deck = deck::Deck::parse(
      "t.deck", "[model]\nlayers = 2\nheads = 2\nhidden = 8\nvocab = 16\nseq_len = 4\n",
      {{"parallel.data", std::to_string(world)}, {"topology.ranks_per_node", "1"},
       {"topology.file", shared_path}});
  const topo::Topology t = comm::discover_topology(testing::world(), read_settings(deck).topology);
  const auto& me = t.place(world_rank());
  BOOST_TEST(everywhere(t.num_racks() == 2 && t.num_nodes() == world &&
                        t.rack_name(me.rack) == (world_rank() % 2 ? "odd" : "even") &&
                        me.node_in_rack == world_rank() / 2));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::remove(shared_path.c_str());
}

BOOST_AUTO_TEST_CASE(a_topology_file_missing_a_node_is_a_user_error) {
  std::string path = "/tmp/trident-test-topology-partial-" + std::to_string(getpid()) + ".conf";
  comm::broadcast_string(testing::world(), path, 0);
  if (world_rank() == 0) std::ofstream(path) << "SwitchName=s0 Nodes=othernode\n";
  MPI_Barrier(MPI_COMM_WORLD);
  const deck::Deck deck = deck::Deck::parse(
      "t.deck", "[model]\nlayers = 2\nheads = 2\nhidden = 8\nvocab = 16\nseq_len = 4\n",
      {{"parallel.data", std::to_string(world_size())}, {"topology.ranks_per_node", "1"},
       {"topology.file", path}});
  const std::string error = user_error_of([&] { comm::discover_topology(testing::world(), read_settings(deck).topology); });
  BOOST_TEST(everywhere(error.find("node 'node0' is under no leaf switch") != std::string::npos),
             error);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::remove(path.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
