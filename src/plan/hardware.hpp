// Hardware profiles for the planner: what one device computes and holds, how devices group into
// nodes and racks, and the α-β cost of each level's links — read from inputs/hardware/*.ini,
// and written back by `trident plan --calibrate` for this host. Pure text in, figures out: no
// MPI, no allocation beyond the profile itself.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "topo/topology.hpp"

namespace trident::plan {

// α-β link of one level: a transfer of S bytes takes latency_s + S / bandwidth_bytes_per_s.
// bandwidth is the bus bandwidth nccl-tests and our commbench report (busbw), so a ring
// all-reduce of S bytes over n ranks takes 2(n−1)·latency + 2(n−1)/n · S / bandwidth.
struct Link {
  double latency_s = 0;
  double bandwidth_bytes_per_s = 0;
};

using topo::Level;  // the cluster's node, rack and cross-rack levels

// Where a group of ranks sits: the level it spans, and the members per node (k), nodes per rack
// (r) and racks (q) it has (plan/step_model.hpp, group_shape).
struct GroupShape {
  Level span = Level::Node;
  int per_node = 1, nodes_per_rack = 1, racks = 1;
};

// One measured GEMM rate: c[b] (M, N) = a[b] (M, K) · b[b] (K, N) for b < batch in `precision`
// (fp32, bf16, fp16) at flops_per_s. A profile's [gemm] section, `PRECISION.[BATCHx]MxNxK =
// TFLOP/s`; plan/gemm_model.hpp anchors its shape model at the nearest one.
struct GemmPoint {
  std::string precision;
  double batch = 1, M = 0, N = 0, K = 0;
  double flops_per_s = 0;
};

struct Hardware {
  std::string name;                  // "A100-80GB DGX"
  double memory_bytes = 0;           // per device
  double peak_fp32 = 0, peak_bf16 = 0, peak_fp16 = 0;  // dense FLOP/s per device
  double gemm_fraction = 1;          // achieved / peak on the model's large GEMMs
  // Units a GEMM's output tiles are spread over, a tile each at a time (a GPU's SMs): the wave
  // quantization of plan/gemm_model.hpp. 0: none modelled (a CPU profile).
  int compute_units = 0;
  // The fraction of its compute a device loses while communication it overlaps runs beside it
  // (NCCL's kernels hold SMs and memory bandwidth): overlapped communication costs this times
  // its hidden time. 0: none (a CPU profile, whose communication waits in MPI).
  double comm_interference = 0;
  // The most shared memory one block of a GPU's kernels may use (cudaDevAttrMaxSharedMemoryPerBlockOptin):
  // whether a row of the loss fits the one-kernel cross-entropy (plan/step_model.cpp, loss_bytes).
  // 0: none (a CPU profile; a GPU profile written before the key: the loss's pieces).
  double shared_memory_bytes = 0;
  double memory_bandwidth = 0;       // bytes/s per device, for the element-wise passes
  // What a process's device memory holds beside its tensors (docs/PLANNER.md, "Device memory"):
  // the runtime's own before the first tensor (the CUDA context with the libraries' modules,
  // cuBLASLt's workspaces), and NCCL's buffers for each communicator the rank is a member of.
  // 0 for a CPU, whose tensors are all the memory model counts.
  double reserved_bytes = 0;
  double nccl_bytes_per_group = 0;
  std::vector<GemmPoint> gemm_table;  // measured rates by shape (empty: the shape model alone)
  int devices_per_node = 1;
  int nodes_per_rack = 1;
  std::array<Link, 3> links{};       // node, rack, cross-rack

  double peak(const std::string& precision) const;  // "fp32", "bf16", "fp16"
};

// Parses a profile ("[section]" and "key = value  # source"); a missing or unknown key, or a
// value out of range, is std::invalid_argument naming `origin`, the line and the key.
Hardware parse_hardware(const std::string& text, const std::string& origin);

// The profile as text that parse_hardware reads back; `sources["section.key"]` is written
// beside each key.
std::string format_hardware(const Hardware& hw, const std::string& header,
                            const std::map<std::string, std::string>& sources);

// "section.key" -> value of an INI text; comments (#, ;) and blank lines dropped. A line that
// is neither is std::invalid_argument naming `origin` and the line.
std::map<std::string, std::string> parse_ini(const std::string& text, const std::string& origin);

// Replaces the links of `hw` by those of a commbench links.ini ([node] latency_us, busbw_gbps;
// levels whose group had one rank keep the profile's). Throws std::invalid_argument.
void apply_links_ini(const std::string& text, Hardware& hw);

}  // namespace trident::plan
