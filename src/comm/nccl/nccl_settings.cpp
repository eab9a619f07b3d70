// The deck's NCCL choices mapped onto ncclConfig_t fields and the process environment.
#include "comm/nccl/nccl_settings.hpp"

#include <map>
#include <stdexcept>

namespace trident::comm {
namespace {

const std::map<std::string, std::string>& algo_names() {
  static const std::map<std::string, std::string> names = {
      {"auto", ""},           {"ring", "Ring"},           {"tree", "Tree"},
      {"collnet_direct", "CollnetDirect"}, {"collnet_chain", "CollnetChain"},
      {"nvls", "NVLS"},       {"nvls_tree", "NVLSTree"},  {"pat", "PAT"}};
  return names;
}

const std::map<std::string, std::string>& proto_names() {
  static const std::map<std::string, std::string> names = {
      {"auto", ""}, {"simple", "Simple"}, {"ll", "LL"}, {"ll128", "LL128"}};
  return names;
}

std::string look_up(const std::map<std::string, std::string>& names, const std::string& value,
                    const char* what) {
  const auto found = names.find(value);
  if (found == names.end()) throw std::invalid_argument(std::string("unknown NCCL ") + what + " '" + value + "'");
  return found->second;
}

// One process-wide variable: the deck's value of `key_suffix` at each level (NCCL's spelling),
// which must be one value for all three; then the user's environment, which must agree.
void one_variable(const char* variable, const char* key_suffix, const std::array<std::string, 3>& deck,
                  const std::array<std::string, 3>& nccl, const EnvLookup& getenv_fn,
                  NcclEnvironment& environment) {
  if (!environment.conflict.empty()) return;
  if (nccl[0] != nccl[1] || nccl[0] != nccl[2]) {
    environment.conflict = std::string("comm.nccl_node_") + key_suffix + " = " + deck[0] + ", comm.nccl_rack_" +
                           key_suffix + " = " + deck[1] + ", comm.nccl_cross_rack_" + key_suffix + " = " +
                           deck[2] + ": NCCL takes the " + key_suffix +
                           " per process only (" + variable +
                           ", one value for every communicator), not per level; give the three "
                           "levels the same value, or auto to let NCCL choose per operation";
    return;
  }
  if (nccl[0].empty()) return;  // auto: the user's environment (if any) stands
  const char* existing = getenv_fn(variable);
  if (existing != nullptr && *existing != '\0' && nccl[0] != existing) {
    environment.conflict = std::string("comm.nccl_*_") + key_suffix + " = " + deck[0] + " (" + variable + "=" +
                           nccl[0] + "), but the environment already has " + variable + "=" + existing +
                           "; unset it or set the deck's keys to auto";
    return;
  }
  environment.set.emplace_back(variable, nccl[0]);
}

}  // namespace

NcclCommOptions communicator_options(const NcclSettings& settings, topo::Level level,
                                     const std::string& name) {
  NcclCommOptions options;
  options.collnet = settings.level[static_cast<int>(level)].collnet;
  options.name = name;
  return options;
}

std::string nccl_algo_name(const std::string& deck_value) { return look_up(algo_names(), deck_value, "algorithm"); }
std::string nccl_proto_name(const std::string& deck_value) { return look_up(proto_names(), deck_value, "protocol"); }

NcclEnvironment process_environment(const NcclSettings& settings, const EnvLookup& getenv_fn) {
  NcclEnvironment environment;
  std::array<std::string, 3> algo, proto, algo_nccl, proto_nccl;
  for (int l = 0; l < 3; ++l) {
    algo[l] = settings.level[l].algo, proto[l] = settings.level[l].proto;
    algo_nccl[l] = nccl_algo_name(algo[l]), proto_nccl[l] = nccl_proto_name(proto[l]);
  }
  one_variable("NCCL_ALGO", "algo", algo, algo_nccl, getenv_fn, environment);
  one_variable("NCCL_PROTO", "proto", proto, proto_nccl, getenv_fn, environment);
  if (!environment.conflict.empty()) environment.set.clear();
  return environment;
}

int device_for_rank(int rank_on_host, int devices_visible) {
  return devices_visible > 0 ? rank_on_host % devices_visible : -1;
}

std::string device_sharing_problem(const std::vector<std::string>& bus_ids, int devices_visible) {
  if (devices_visible <= 0) return "this host has no CUDA device";
  for (size_t a = 0; a < bus_ids.size(); ++a)
    for (size_t b = a + 1; b < bus_ids.size(); ++b)
      if (bus_ids[a] == bus_ids[b])
        return std::to_string(bus_ids.size()) + " ranks run on this host, and ranks " + std::to_string(a) + " and " +
               std::to_string(b) + " of them would share the CUDA device at " + bus_ids[a] +
               ": NCCL refuses two ranks of a communicator on one device; start at most one rank per "
               "GPU, or use comm.backend = mpi (several ranks per GPU through MPI)";
  return "";
}

std::string resolve_backend(const std::string& wanted, const std::string& device, bool nccl_built_in) {
  if (wanted == "mpi") return "mpi";
  if (wanted == "auto") return device == "cuda" && nccl_built_in ? "nccl" : "mpi";
  if (wanted != "nccl") throw std::invalid_argument("there is no communicator backend '" + wanted + "' (auto, mpi, nccl)");
  if (!nccl_built_in)
    throw std::invalid_argument("this binary was built without NCCL (build it where nvcc and NCCL are "
                                "installed, or use comm.backend = mpi)");
  if (device != "cuda")
    throw std::invalid_argument("NCCL communicates device memory, and kernels.device = " + device +
                                " keeps the model in host memory; use comm.backend = mpi (or auto), or "
                                "kernels.device = cuda");
  return "nccl";
}

}  // namespace trident::comm
