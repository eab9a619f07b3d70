// The memory model applied to a deck: its inputs from the deck and layout, the estimate
// printed before training (and by --check), and memory.recompute = auto /
// memory.recompute_interval = 0 resolved against memory.budget_gb.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "deck/record.hpp"
#include "job/settings.hpp"
#include "kernels/kernels.hpp"
#include "layout/grid.hpp"
#include "model/config.hpp"
#include "plan/memory_model.hpp"
#include "topo/topology.hpp"

namespace trident {

struct RecomputeChoice {
  std::string mode;  // none, selective, every_k, full
  int interval = 0;  // K (1 for full, 0 otherwise unless every_k)
  std::string why;   // for the log: how it was chosen
};

// topology: where the ranks sit, for the shared windows of comm.node_algo = shm (null: none).
plan::MemoryInputs memory_inputs(const kernels::Context& device, const RunSettings& settings,
                                 const layout::Grid& grid, const model::GptConfig& config,
                                 const topo::Topology* topology = nullptr);

// Collective in effect (every rank computes the same): the recompute mode and K to run with.
// auto modes without a budget, or a budget nothing fits: UserError naming the shortfall.
RecomputeChoice choose_recompute(const kernels::Context& device, const RunSettings& settings,
                                 const deck::Record& deck, const layout::Grid& grid, const model::GptConfig& config,
                                 const topo::Topology* topology = nullptr);

// Collective over `world` (every rank), before any of the model's memory is allocated: UserError
// with the model's figures and the shortfall when the busiest rank needs more than
// memory.budget_gb, or when the ranks of some host together need more than that host's memory (the
// smaller of its RAM and its cgroup limit) — a shape that cannot be allocated ends here with exit
// 2, not in std::bad_alloc or the kernel's OOM killer.
void check_memory_fits(comm::Communicator& world, const kernels::Context& device, const RunSettings& settings, const deck::Record& deck,
                       const layout::Grid& grid, const model::GptConfig& config,
                       const topo::Topology* topology, const RecomputeChoice& recompute);

// The same check for commands that build the whole model on every rank without an optimizer
// (`trident eval`, `trident export`): parameters, gradients and one micro-batch's activations
// against memory.budget_gb and the host's memory. `command` names it in the message.
void check_whole_model_fits(comm::Communicator& world, const kernels::Context& device, const RunSettings& settings, const deck::Record& deck,
                            const model::GptConfig& config, const std::string& command);

// The same check for `trident generate`'s decoder (model::KvDecoder::buffer_bytes: the whole
// model's parameters in f32, the key/value cache of `positions` positions, one position's
// buffers; on the host's memory also the parameters as read) against memory.budget_gb and the
// rank's memory — not a training step's, whose gradients and activations it never holds.
void check_decoder_fits(comm::Communicator& world, const kernels::Context& device, const RunSettings& settings,
                        const deck::Record& deck, const model::GptConfig& config, int positions);

// The same check for `trident export`, which holds the whole model's parameters in f32 in host
// memory and nothing on a device: against memory.budget_gb and the host's memory (whatever
// kernels.device says). `command` names it in the message.
void check_parameters_fit_host(comm::Communicator& world, const RunSettings& settings, const deck::Record& deck,
                               const model::GptConfig& config, const std::string& command);

// The world ranks that share this rank's host (real hosts, not emulated nodes). Collective.
std::vector<int> ranks_on_this_host(comm::Communicator& world);

// The memory this rank's model lives in, which the memory model checks a job against: the host's
// (the CPU backend), or its device's (kernels::Backend::memory_bytes) — the GPU it shares with
// the ranks of its host that chose the same one.
struct ModelMemory {
  std::vector<int> ranks;  // the world ranks sharing it, this one included
  double bytes = 0;        // its size; 0: unknown (nothing is checked)
  // Of a device's bytes, what was not free when every sharing rank had made its CUDA context:
  // the contexts, other processes' memory (a job before this one that has not let go), and what
  // this job had allocated by then — nothing at the start-up checks, which count it against the
  // job; a running job's own buffers later (then unused). 0 on the host, whose other users the
  // memory model does not judge.
  double held = 0;
  std::string name;        // "host n1", "device cuda:0 of host n1"
  bool device = false;     // device memory (else the host's)
};
// Collective over `world`. kernels: kernels.guard_memory_gb, the emulated device's size.
// host_model_memory: the host's, whatever the backend.
ModelMemory host_model_memory(comm::Communicator& world);
ModelMemory model_memory(comm::Communicator& world, const kernels::Context& device, const KernelSettings& kernels);

// How many memories like `memory` the job's ranks hold between them: its hosts (host memory) or
// its devices (device memory) — a GPU shared by ranks through MPI counted once. Collective.
int memories_in_job(comm::Communicator& world, const ModelMemory& memory);

// What the ranks sharing `memory` together need beyond it ("" when they fit; `needed`: their
// bytes by the memory model): beyond its size, or, at start-up (`held`: memory.held, else 0),
// beyond what was free of it.
std::string memory_shortfall(double needed, const ModelMemory& memory, double held);

// What keeps the split `split` (blocks per virtual stage, job/model_setup.hpp) with
// micro-batches of `micro_batch` sequences, `micro_batches` a step (a running job's new split or
// count: balance.pipeline, balance.micro_batches), from fitting: the busiest rank against
// memory.budget_gb, or
// the ranks sharing this rank's memory (`memory`: its host's, or its device's) against it — ""
// when they fit. Not collective: each rank judges its own and the caller agrees over all.
std::string micro_batch_shortfall(const kernels::Context& device, const RunSettings& settings,
                                  const deck::Record& deck, const layout::Grid& grid, const model::GptConfig& config,
                                  const topo::Topology* topology, const RecomputeChoice& recompute,
                                  const std::vector<int>& split, int micro_batch, int micro_batches,
                                  const ModelMemory& memory);

// "parameters 0.8 MiB, gradients …, total 4.1 MiB" and, machine-readable, "parameters=873984 …".
std::string describe_estimate(const plan::MemoryEstimate& estimate, int64_t busiest_total, bool bytes);

}  // namespace trident
