// The deck's NCCL choices per cluster level (comm.nccl_<level>_algo, _proto, _collnet) mapped
// onto what NCCL 2.28 can take: per communicator (ncclConfig_t fields, set at
// ncclCommInitRankConfig) or only per process (NCCL_ALGO / NCCL_PROTO environment, read once at
// the first communicator's initialisation). Pure logic, no NCCL header: compiled and unit-tested
// in every build, CUDA or not (docs/COMMUNICATION.md, "NCCL").
#pragma once

#include <array>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "topo/topology.hpp"

namespace trident::comm {

// One level's choices, as the deck spells them.
struct NcclLevelChoice {
  std::string algo = "auto";   // auto | ring | tree | collnet_direct | collnet_chain | nvls | nvls_tree | pat
  std::string proto = "auto";  // auto | simple | ll | ll128
  bool collnet = false;        // SHARP / CollNet: reduction in the network switches
};

struct NcclSettings {
  std::array<NcclLevelChoice, 3> level;  // indexed by topo::Level
};

// What one communicator's ncclConfig_t gets (the fields we set; the others stay NCCL's
// defaults): a communicator carries the choices of the level it spans.
struct NcclCommOptions {
  bool collnet = false;        // ncclConfig_t::collnetEnable
  std::string name;            // ncclConfig_t::commName: NCCL's logs name the group
  bool point_to_point = false; // two more communicators, one per direction, for send/recv
};
NcclCommOptions communicator_options(const NcclSettings& settings, topo::Level level,
                                     const std::string& name);

// NCCL's spelling of a deck value: "collnet_direct" -> "CollnetDirect", "ll128" -> "LL128".
// Empty for "auto" (NCCL chooses). Throws std::invalid_argument for an unknown value.
std::string nccl_algo_name(const std::string& deck_value);
std::string nccl_proto_name(const std::string& deck_value);

// The process environment the settings need: the variables to set, or a conflict.
// NCCL reads NCCL_ALGO and NCCL_PROTO once per process, for every communicator alike, so the
// three levels must agree (all "auto", or all the same value); a variable the user already set
// (getenv) must agree with the deck where the deck is not "auto".
struct NcclEnvironment {
  std::vector<std::pair<std::string, std::string>> set;  // (name, value) to setenv
  std::string conflict;  // empty: none; else what disagrees and what to do, for a deck error
};
using EnvLookup = std::function<const char*(const char*)>;  // getenv, or a test's table
NcclEnvironment process_environment(const NcclSettings& settings, const EnvLookup& getenv_fn);

// The device a rank takes: its position among its host's ranks, modulo the devices it sees
// (a launcher that binds one GPU to each task shows each rank one device, index 0).
int device_for_rank(int rank_on_host, int devices_visible);
// Whether the host's ranks, which chose the devices with these PCI bus ids (one per rank, in
// host-rank order), each have a GPU of their own: "" if so, else why not (NCCL refuses two
// ranks of a communicator on one device). devices_visible: what this rank sees (0: none).
std::string device_sharing_problem(const std::vector<std::string>& bus_ids, int devices_visible);

// comm.backend resolved: "mpi" or "nccl". wanted: auto | mpi | nccl; device: kernels.device;
// nccl_built_in: whether this binary has NCCL. Throws std::invalid_argument with the reason
// (and the fix) where nccl is asked for and cannot be: built without NCCL, device = cpu.
std::string resolve_backend(const std::string& wanted, const std::string& device, bool nccl_built_in);

}  // namespace trident::comm
