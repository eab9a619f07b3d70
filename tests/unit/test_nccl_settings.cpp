// The deck's NCCL choices mapped onto ncclConfig_t and the process environment, the backend's
// resolution and the one-GPU-per-rank check: the logic of the NCCL communicator that needs no GPU.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <map>
#include <set>
#include <stdexcept>

#include "comm/nccl/nccl_settings.hpp"
#include "deck/schema.hpp"

using namespace trident::comm;
using trident::topo::Level;

namespace {

// An environment of our own instead of the process's.
EnvLookup table(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
}

NcclSettings all_levels(const std::string& algo, const std::string& proto) {
  NcclSettings settings;
  for (NcclLevelChoice& level : settings.level) level.algo = algo, level.proto = proto;
  return settings;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(nccl_settings)

BOOST_AUTO_TEST_CASE(every_deck_choice_has_an_nccl_name) {
  for (const char* level : {"node", "rack", "cross_rack"}) {
    const std::string prefix = std::string("comm.nccl_") + level;
    const auto* algo = trident::deck::find_key(prefix + "_algo");
    const auto* proto = trident::deck::find_key(prefix + "_proto");
    BOOST_REQUIRE(algo && proto && trident::deck::find_key(prefix + "_collnet"));
    std::set<std::string> names;
    for (const std::string& choice : algo->choices) names.insert(nccl_algo_name(choice));
    BOOST_TEST(names.size() == algo->choices.size());  // no two deck values mean the same
    names.clear();
    for (const std::string& choice : proto->choices) names.insert(nccl_proto_name(choice));
    BOOST_TEST(names.size() == proto->choices.size());
  }
  BOOST_TEST(nccl_algo_name("auto") == "");
  BOOST_TEST(nccl_algo_name("collnet_direct") == "CollnetDirect");
  BOOST_TEST(nccl_algo_name("nvls_tree") == "NVLSTree");
  BOOST_TEST(nccl_proto_name("ll128") == "LL128");
  BOOST_CHECK_THROW(nccl_algo_name("Tree"), std::invalid_argument);
  BOOST_CHECK_THROW(nccl_proto_name("fast"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(collnet_is_per_communicator_by_level) {
  NcclSettings settings;
  settings.level[static_cast<int>(Level::Rack)].collnet = true;
  BOOST_TEST(!communicator_options(settings, Level::Node, "node level of data").collnet);
  BOOST_TEST(communicator_options(settings, Level::Rack, "rack level of data").collnet);
  BOOST_TEST(!communicator_options(settings, Level::CrossRack, "data").collnet);
  BOOST_TEST(communicator_options(settings, Level::Rack, "rack level of data").name == "rack level of data");
  BOOST_TEST(!communicator_options(settings, Level::Rack, "x").point_to_point);
}

BOOST_AUTO_TEST_CASE(algorithm_and_protocol_are_per_process) {
  const NcclEnvironment none = process_environment(NcclSettings{}, table({}));
  BOOST_TEST(none.set.empty());
  BOOST_TEST(none.conflict.empty());

  const NcclEnvironment same = process_environment(all_levels("tree", "ll128"), table({}));
  BOOST_TEST(same.conflict.empty());
  BOOST_REQUIRE(same.set.size() == 2u);
  BOOST_TEST(same.set[0].first == "NCCL_ALGO");
  BOOST_TEST(same.set[0].second == "Tree");
  BOOST_TEST(same.set[1].first == "NCCL_PROTO");
  BOOST_TEST(same.set[1].second == "LL128");

  // The seed's wish (tree in the node, ring across racks) is what NCCL cannot take per level.
  NcclSettings differ = all_levels("tree", "auto");
  differ.level[static_cast<int>(Level::CrossRack)].algo = "ring";
  const NcclEnvironment refused = process_environment(differ, table({}));
  BOOST_TEST(refused.set.empty());
  BOOST_TEST(refused.conflict.find("comm.nccl_cross_rack_algo = ring") != std::string::npos);
  BOOST_TEST(refused.conflict.find("per process only (NCCL_ALGO") != std::string::npos);

  // auto at one level is no exception: the process-wide value would apply to it too.
  NcclSettings partly = all_levels("auto", "auto");
  partly.level[0].proto = "simple";
  BOOST_TEST(process_environment(partly, table({})).conflict.find("comm.nccl_node_proto = simple") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_users_environment_must_agree_with_the_deck) {
  const NcclEnvironment agrees = process_environment(all_levels("ring", "auto"), table({{"NCCL_ALGO", "Ring"}}));
  BOOST_TEST(agrees.conflict.empty());
  const NcclEnvironment clash = process_environment(all_levels("ring", "auto"), table({{"NCCL_ALGO", "Tree"}}));
  BOOST_TEST(clash.conflict.find("already has NCCL_ALGO=Tree") != std::string::npos);
  BOOST_TEST(clash.set.empty());
  // auto leaves the user's variables alone.
  const NcclEnvironment left = process_environment(NcclSettings{}, table({{"NCCL_PROTO", "LL"}}));
  BOOST_TEST(left.conflict.empty());
  BOOST_TEST(left.set.empty());
}

BOOST_AUTO_TEST_CASE(one_gpu_per_rank_of_a_host) {
  // Ranks take their host position modulo the devices they see: all 4 of a 4-GPU node, or each
  // its one GPU where the launcher binds one per task.
  BOOST_TEST(device_for_rank(3, 4) == 3);
  BOOST_TEST(device_for_rank(3, 1) == 0);
  BOOST_TEST(device_for_rank(0, 0) == -1);
  BOOST_TEST(device_sharing_problem({"0000:07:00.0", "0000:0a:00.0"}, 2) == "");
  BOOST_TEST(device_sharing_problem({"0000:07:00.0", "0000:0a:00.0"}, 1) == "");  // bound per task
  const std::string two_on_one = device_sharing_problem({"0000:07:00.0", "0000:0a:00.0", "0000:07:00.0"}, 2);
  BOOST_TEST(two_on_one.find("3 ranks run on this host, and ranks 0 and 2 of them would share the CUDA "
                             "device at 0000:07:00.0") != std::string::npos);
  BOOST_TEST(two_on_one.find("comm.backend = mpi") != std::string::npos);
  BOOST_TEST(device_sharing_problem({"device -1"}, 0) == "this host has no CUDA device");
}

BOOST_AUTO_TEST_CASE(the_backend_resolves_by_device_and_build) {
  BOOST_TEST(resolve_backend("auto", "cuda", true) == "nccl");
  BOOST_TEST(resolve_backend("auto", "cuda", false) == "mpi");
  BOOST_TEST(resolve_backend("auto", "cpu", true) == "mpi");
  BOOST_TEST(resolve_backend("mpi", "cuda", true) == "mpi");
  BOOST_TEST(resolve_backend("nccl", "cuda", true) == "nccl");
  BOOST_CHECK_THROW(resolve_backend("nccl", "cpu", true), std::invalid_argument);
  BOOST_CHECK_THROW(resolve_backend("nccl", "cuda", false), std::invalid_argument);
  BOOST_CHECK_THROW(resolve_backend("gloo", "cuda", true), std::invalid_argument);
  try {
    resolve_backend("nccl", "cpu", true);
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find("kernels.device = cpu") != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()
