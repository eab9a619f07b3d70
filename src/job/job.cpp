// Job set-up shared by the subcommands.
#include "job/job.hpp"

#include <cstdlib>
#include <optional>

#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/log.hpp"
#include "deck/record.hpp"
#include "deck/validate.hpp"
#include "comm/agreement.hpp"
#include "comm/discover_topology.hpp"
#include "comm/nccl/nccl.hpp"
#include "kernels/backend.hpp"
#include "job/auto_layout.hpp"
#include "job/fault_hooks.hpp"
#include "job/model_setup.hpp"
#include "job/plan_inputs.hpp"

namespace trident {

namespace {

// The model's device buffers staged through host memory by the kernel backend's own copies
// (comm.backend = mpi with kernels.device other than cpu).
comm::DeviceCopies device_copies(kernels::Backend& backend) {
  comm::DeviceCopies copies;
  copies.to_host = [&backend](void* host, const void* device, size_t count, DType dtype, Stream stream) {
    kernels::Context ctx{&backend, stream};
    kernels::stage_download(ctx, host, view(device, dtype, count, stream.device));
  };
  copies.to_device = [&backend](void* device, const void* host, size_t count, DType dtype, Stream stream) {
    kernels::Context ctx{&backend, stream};
    kernels::upload(ctx, view(device, dtype, count, stream.device), host);
  };
  return copies;
}

// Whether the kernels run on the device each rank took (CUDA: a kernel image for its GPU), agreed
// as the device's choice: a node of older or newer GPUs than the build's is one error everywhere.
void check_device_fit(comm::Communicator& world, const kernels::Backend& backend, const deck::Record& deck) {
  const std::string why = comm::first_error(world, backend.device_unfit_reason());
  if (!why.empty()) fatal_all(deck.cite("kernels.device") + ", but " + why + "; or use kernels.device = cpu");
}

}  // namespace

Job load_job(comm::Communicator& world, const std::string& deck_path, const std::vector<deck::Override>& overrides) {
  const std::string text = comm::read_on_root_and_broadcast(
      world, deck_path, "deck", "give the path of an INI input deck (examples in inputs/)");
  const deck::Deck given = deck::Deck::parse(deck_path, text, overrides);
  // parallel.layout = auto: the planner's keys replace the layout's (any given on the command line too).
  // Settings are read from the given deck only then: its cross-key checks (validate_layout) come first otherwise.
  const std::vector<deck::Override> chosen =
      chooses_layout(given) ? choose_layout(world, read_settings(given), deck::Record(given)) : std::vector<deck::Override>{};
  const deck::Deck deck = chosen.empty() ? given : deck::Deck::parse(deck_path, text, without_keys_of(overrides, chosen), chosen);
  deck::validate_layout(deck, world.size());
  RunSettings settings = read_settings(deck);
  const deck::Record record(deck);
  const layout::Grid grid(settings.parallel.tensor, settings.parallel.pipeline,
                          settings.parallel.data * settings.parallel.context, settings.parallel.context);
  topo::Topology topology = comm::discover_topology(world, settings.topology);
  const kernels::Context device = device_context(world, settings, record);
  if (settings.kernels.device != "cpu") settings.comm.collectives.staging = device_copies(*device.backend);
  check_graphs(settings, record, *device.backend);
  return Job{record, grid, std::move(topology), std::move(settings), device};
}

kernels::Context device_context(comm::Communicator& world, RunSettings& settings, const deck::Record& record) {
  kernels::Context device;
  device.backend = &choose_device(world, settings.kernels, record);
  // The rank's GPU made current (choose_comm_backend) before anything asks the backend for its
  // device: CUDA's remembers the device current at the first call, which would be GPU 0 on every rank.
  choose_comm_backend(world, settings, record);
  device.stream = Stream{device.backend->device(), nullptr};
  check_device_fit(world, *device.backend, record);
  device.low16_gemm = choose_low16_gemm(world, settings, record);
  device.arithmetic = choose_arithmetic(settings.kernels, record);
  device.attention_operands = settings.kernels.attention_f32 ? kernels::Precision::fp32 : settings.precision.precision;
  device.gelu_epilogues = settings.kernels.gelu_epilogues;
  device.library_attention = settings.kernels.library_attention;
  return device;
}

namespace {

// scripts/gpu-check.sh sets TRIDENT_TRY_CUDA_TRAINER=1: the check that runs the trainer on a GPU
// at all, and whose passing lifts the refusal below.
bool trying_cuda_trainer() {
  const char* value = std::getenv("TRIDENT_TRY_CUDA_TRAINER");
  return value != nullptr && std::string(value) == "1";
}

// What keeps a job off a device whose kernels can run: the trainer on CUDA has never run on a GPU.
std::string trainer_not_ready_for(const std::string& device) {
  if (device != "cuda" || trying_cuda_trainer()) return "";
  return "the trainer does not run on CUDA yet: its kernels are all there and every path by which it "
         "touches the model goes through the backend (shown on kernels.device = guard), but it has never "
         "run on a GPU (scripts/gpu-check.sh tries it, with TRIDENT_TRY_CUDA_TRAINER=1)";
}

}  // namespace

// Every rank must be able to run the backend (a CUDA job on a node without a GPU is the same
// deck error everywhere, not a hang): agreed like the GEMM path below.
kernels::Backend& choose_device(comm::Communicator& world, const KernelSettings& kernels, const deck::Record& deck) {
  const std::string device = kernels.device;
  std::string why = kernels::backend_unavailable(device);
  if (why.empty()) why = trainer_not_ready_for(device);
  if (!comm::all_true(world, why.empty()))
    fatal_all(deck.cite("kernels.device") + ", but " + (why.empty() ? "another rank cannot run it" : why) +
              "; use kernels.device = cpu");
  const double guard_memory = kernels.guard_memory_gb * 1e9;
  if (guard_memory > 0 && device != "guard")
    fatal_all(deck.cite("kernels.guard_memory_gb") + ", but it sizes the guarded backend's emulated device and " +
              deck.cite("kernels.device") + "; set kernels.device = guard, or leave kernels.guard_memory_gb at 0");
  if (device == "cuda")
    warn0("kernels.device = cuda with TRIDENT_TRY_CUDA_TRAINER=1: the trainer on CUDA has not been verified on "
          "a GPU yet (scripts/gpu-check.sh is that verification)");
  return *kernels::find_backend(device);
}

namespace {

// Why NCCL cannot serve this job as the deck sets it ("" if nothing keeps it): its library, which
// cannot be opened here, or the link emulation.
std::string nccl_unusable(const comm::CollectiveSettings& settings) {
  if (const std::string why = comm::nccl_problem(); !why.empty())
    return "NCCL cannot be used here: " + why + " (NCCL's library belongs on LD_LIBRARY_PATH)";
  if (settings.links.any())
    return "topology.link.* is set, and the link model emulates links for the MPI communicator only (NCCL "
           "reports no steps to delay; topology.link.* = off for NCCL)";
  return "";
}

}  // namespace

// Agreed like the device: a problem on any rank is the same deck error everywhere (the
// environment may differ between ranks). NCCL's environment is set before the first NCCL
// communicator: NCCL reads it once per process.
//
// comm.backend = auto is NCCL where the job can have it, else MPI, said once: several ranks on
// one GPU (a workstation's GPU under mpirun -n 4), NCCL's library missing on the nodes, or the link
// model, which only MPI's steps feed. comm.backend = nccl keeps each of these a deck error; the
// user's NCCL_* environment against the deck is one under auto too (a setting given twice).
void choose_comm_backend(comm::Communicator& world, RunSettings& run, const deck::Record& deck) {
  comm::CollectiveSettings& settings = run.comm.collectives;
  const bool automatic = run.comm.requested_backend == "auto";
  std::optional<comm::DeviceChoice> device;
  if (settings.backend == "nccl") {
    const comm::NcclEnvironment environment =
        comm::process_environment(settings.nccl, [](const char* name) { return std::getenv(name); });
    std::string unusable = comm::first_error(world, nccl_unusable(settings));
    std::string remedy = "; use comm.backend = mpi, or auto (MPI where NCCL cannot serve the job)";
    if (unusable.empty()) {  // the library and the deck allow NCCL: a GPU of its own for each rank?
      device = comm::choose_cuda_device(world);
      unusable = device->problem, remedy = "";  // the problem says its remedy (comm::device_sharing_problem)
    }
    if (unusable.empty()) {
      comm::agree_on_first_error(world, environment.conflict.empty() ? "" : deck.cite("comm.backend") + ", but " + environment.conflict);
      for (const auto& [name, value] : environment.set) setenv(name.c_str(), value.c_str(), 1);
      comm::use_cuda_device(device->index);
      return;
    }
    if (!automatic) fatal_all(deck.cite("comm.backend") + ", but " + unusable + remedy);
    settings.backend = "mpi";
    warn0("comm.backend = auto chose the MPI communicator (device buffers through host memory), not NCCL: " +
          unusable);
  }
  // A CUDA model over MPI (several ranks sharing a GPU, which NCCL refuses): each rank takes the
  // GPU of its position on its host modulo the GPUs it sees, as with NCCL, sharing allowed.
  if (run.kernels.device != "cuda") return;
  if (!device) device = comm::choose_cuda_device(world);
  if (device->index >= 0) comm::use_cuda_device(device->index);
}

// What a recorded forward or backward cannot hold, as deck errors (the same on every rank: the
// deck and the backend are).
void check_graphs(const RunSettings& settings, const deck::Record& deck, kernels::Backend& backend) {
  if (!settings.kernels.graphs) return;
  const std::string why = backend.graphs_unavailable();
  if (!why.empty())
    fatal_all(deck.cite("cuda.graphs") + " with " + deck.cite("kernels.device") + ", but " + why +
              "; use kernels.device = cuda (or guard), or cuda.graphs = false");
  if (settings.parallel.tensor > 1 && settings.comm.collectives.backend != "nccl")
    fatal_all(deck.cite("cuda.graphs") + " with " + deck.cite("parallel.tensor") +
              ", but the tensor group's all-reduces run inside each forward and backward, and a graph records "
              "them only as NCCL calls: the MPI communicator copies device buffers through host memory; use "
              "comm.backend = nccl (one GPU per rank), parallel.tensor = 1, or cuda.graphs = false");
  if (settings.parallel.context > 1 && settings.comm.collectives.backend != "nccl")
    fatal_all(deck.cite("cuda.graphs") + " with " + deck.cite("parallel.context") +
              ", but the context ring passes keys and values inside each forward and backward, and a graph "
              "records them only as NCCL calls: the MPI communicator copies device buffers through host memory; "
              "use comm.backend = nccl (one GPU per rank), parallel.context = 1, or cuda.graphs = false");
  if (settings.balance.pipeline)
    fatal_all(deck.cite("cuda.graphs") + " with " + deck.cite("balance.pipeline") +
              ", but moving blocks between stages needs the embedding's and the head's times apart from the "
              "blocks', which a replayed graph does not measure; use one or the other");
}

kernels::Low16Gemm choose_low16_gemm(comm::Communicator& world, const RunSettings& settings, const deck::Record& deck) {
  const kernels::Precision precision = settings.precision.precision;
  const std::string& wanted = settings.kernels.low16_gemm;
  const bool here = kernels::native_low16_gemm_available(precision);
  const bool everywhere = comm::all_true(world, here);
  if (wanted == "native" && !everywhere) {
    const std::string type = precision == kernels::Precision::bf16 ? "bf16" : "f16";
    fatal_all(deck.cite("kernels.low16_gemm") + " with optim.precision = " + kernels::precision_name(precision) +
              ", but oneDNN creates no " + type + " matmul on " +
              (here ? "another rank's CPU (this one's ISA: " + kernels::cpu_isa() + ")"
                    : "this CPU (ISA " + kernels::cpu_isa() + ")") +
              "; use kernels.low16_gemm = auto or widened (the operands widened exactly to f32)");
  }
  // An fp32 job has no 16-bit GEMM to agree on (probing fp32 says nothing about bf16): auto then
  // leaves each 16-bit GEMM it may still run (trident bench --compare=bf16) to ask oneDNN itself.
  if (precision == kernels::Precision::fp32 && wanted == "auto") return kernels::Low16Gemm::automatic;
  return wanted == "widened" || !everywhere ? kernels::Low16Gemm::widened : kernels::Low16Gemm::native;
}

kernels::Arithmetic choose_arithmetic(const KernelSettings& kernels, const deck::Record& deck) {
  if (kernels.arithmetic == kernels::Arithmetic::native) return kernels.arithmetic;
  if (kernels.device == "cuda")
    fatal_all(deck.cite("kernels.arithmetic") + " with " + deck.cite("kernels.device") +
              ", but portable arithmetic is the CPU kernels' fixed order; the GPU's kernels sum in their own "
              "(deterministic run to run, not equal to the CPU's); use kernels.arithmetic = native, or "
              "kernels.device = cpu");
  return kernels.arithmetic;
}

std::unique_ptr<comm::JobGroups> make_job_groups(comm::Communicator& world, const Job& job) {
  auto groups = std::make_unique<comm::JobGroups>(job.grid, job.topology);
  inject_fault(world, job.settings.debug, 0);
  const std::string problem = groups->verify(job.grid, job.topology);
  if (!problem.empty()) {
    if (world.rank() == 0) fatal_one("internal error in communicator set-up: " + problem);
    world.barrier(Stream{}).wait();  // rank 0 aborts the job
  }
  return groups;
}


std::string job_summary(const Job& job) {
  const auto& g = job.grid;
  const auto& t = job.topology;
  std::string text = count_of(g.world_size(), "rank") +
                     " = tensor " + std::to_string(g.tp_size()) +
                     (g.cp_size() > 1 ? " x context " + std::to_string(g.cp_size()) : std::string()) +
                     " x pipeline " + std::to_string(g.pp_size()) + " x data " + std::to_string(g.replicas()) +
                     "; " + std::to_string(t.num_nodes()) +
                     (t.num_nodes() == 1 ? " node" : " nodes");
  if (t.emulated())
    text += " (emulated, " + std::to_string(job.settings.topology.ranks_per_node) + " ranks each)";
  text += " in " + std::to_string(t.num_racks()) + (t.num_racks() == 1 ? " rack" : " racks");
  return text;
}

}  // namespace trident
