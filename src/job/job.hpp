// Setting up a job, the same for every subcommand that runs on the ranks: the deck (read by
// rank 0, broadcast, parsed everywhere), its validation against the job, the grid, the
// topology and the communicators.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "comm/job_groups.hpp"
#include "deck/deck.hpp"
#include "deck/record.hpp"
#include "layout/grid.hpp"
#include "topo/topology.hpp"
#include "job/settings.hpp"
#include "kernels/kernels.hpp"

namespace trident {

struct Job {
  deck::Record record;      // where each key came from, for messages; the resolved deck, for the record
  layout::Grid grid;
  topo::Topology topology;
  RunSettings settings;     // the deck read once into types: what the code runs on
  kernels::Context device;  // the kernel backend, its default stream, the 16-bit GEMM path, the
                            // arithmetic and the attention's operand type: chosen once here and
                            // passed to everything that runs kernels
};

// Collective over `world` (every rank of the job: comm/world.hpp). Every problem with the input
// is a UserError on every rank.
// Chooses the job's kernel backend (choose_device), 16-bit GEMM path (choose_low16_gemm) and
// arithmetic (choose_arithmetic) into Job::device.
Job load_job(comm::Communicator& world, const std::string& deck_path, const std::vector<deck::Override>& overrides);

// Collective over `world`: the kernels' context as the deck sets it up — the backend
// (choose_device) with this rank's GPU made current (choose_comm_backend, which may turn
// settings.comm.collectives.backend from nccl to mpi), its default stream, the 16-bit GEMM path,
// the arithmetic and the attention's operands. load_job's, and that of a command that runs the
// deck's kernels without a job (plan --calibrate's probe).
kernels::Context device_context(comm::Communicator& world, RunSettings& settings, const deck::Record& record);

// Collective over `world`: kernels.device, which every rank must be able to run (else a
// UserError saying why: no CUDA in the binary, no GPU, kernels missing, or — for cuda, whose
// kernels are all there — the parts of the trainer that still work on host memory). Returns
// its backend.
kernels::Backend& choose_device(comm::Communicator& world, const KernelSettings& kernels, const deck::Record& deck);

// Collective over `world`: comm.backend resolved (auto: nccl with kernels.device = cuda where
// NCCL is built in, until a reason below turns it to mpi); for nccl, checked on every rank (a GPU of its own for every rank of
// a host, NCCL's library, no link emulation, the user's NCCL_ALGO/NCCL_PROTO against the deck) —
// else a UserError saying why, or under auto the MPI communicator instead, said on rank 0
// (settings.comm.collectives.backend becomes mpi) — and prepared: NCCL's per-process environment
// set, this rank's GPU made current (comm::choose_cuda_device).
void choose_comm_backend(comm::Communicator& world, RunSettings& settings, const deck::Record& deck);
// cuda.graphs: a deck error where the device records no graphs, or a recorded forward would
// hold what a graph cannot (the MPI communicator's staged tensor all-reduces), or balance.pipeline
// needs times that a replay does not take. After choose_device and choose_comm_backend.
void check_graphs(const RunSettings& settings, const deck::Record& deck, kernels::Backend& backend);

// Collective over `world`: kernels.low16_gemm against what oneDNN creates on every
// rank's CPU — one path for the whole job, whichever nodes it got: auto is native only where
// every rank has it. native where a rank has none: UserError naming the ISA.
kernels::Low16Gemm choose_low16_gemm(comm::Communicator& world, const RunSettings& settings, const deck::Record& deck);

// kernels.arithmetic; portable is the CPU kernels' (kernels.device = cpu or guard): a deck error
// on cuda, whose kernels sum in their own orders.
kernels::Arithmetic choose_arithmetic(const KernelSettings& kernels, const deck::Record& deck);

// Collective over `world`: the groups of the job, checked against the grid and topology (a
// mismatch is an internal fault). Honours debug.fail_rank (the fault-path test hook) right after.
std::unique_ptr<comm::JobGroups> make_job_groups(comm::Communicator& world, const Job& job);

// "8 ranks = tensor 2 x pipeline 2 x data 2; 4 nodes (emulated, 2 ranks each) in 2 racks"
std::string job_summary(const Job& job);

}  // namespace trident
