// `trident commbench DECK`: our collectives against MPI's, nccl-tests style, on the deck's
// (emulated) topology: time, algbw, busbw and wrong elements for each collective, algorithm and
// level — with a model on a device, its device buffers' too (NCCL's, or MPI's staged:
// commbench_device.hpp); then the latency and bandwidth of each level for the planner
// (RUN_DIR/links.ini: NCCL's where it ran). The rows of one size are timed in interleaved rounds,
// so that their ratios survive the host's drift.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <utility>
#include <vector>

#include "comm/group_collectives.hpp"
#include "comm/wrappers/emulated_links.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "app/cli.hpp"
#include "app/commbench_device.hpp"
#include "app/commbench_rows.hpp"
#include "app/commands.hpp"
#include "job/job.hpp"
#include "job/run_dir.hpp"
#include "topo/topology.hpp"

namespace trident {
namespace {

using Row = CommbenchRow;

// Seconds of `iterations` runs on freshly filled data, the slowest rank's.
double time_runs(comm::Communicator& world, const Row& row, std::vector<float>& data, int iterations) {
  row.fill(data);
  world.barrier(Stream{}).wait();
  const double start = steady_seconds();
  for (int i = 0; i < iterations; ++i) row.run(data);
  if (row.finish) row.finish();
  double seconds = steady_seconds() - start;
  world.all_reduce(&seconds, 1, DType::f64, comm::Op::Max, Stream{}).wait();
  return seconds;
}

// Mean seconds per run of each row, the rows' runs interleaved in rounds, so that a drift of the
// host's speed during the measurement hits every row alike and their ratios hold. (The caller's
// exactness check has run each row once already: that is its warm-up.)
std::vector<double> interleaved_means(comm::Communicator& world, const std::vector<Row>& rows, std::vector<float>& data,
                                      int rounds, int per_round) {
  std::vector<double> total(rows.size(), 0.0);
  for (int round = 0; round < rounds; ++round)
    for (size_t r = 0; r < rows.size(); ++r) total[r] += time_runs(world, rows[r], data, per_round);
  for (double& t : total) t /= rounds * per_round;
  return total;
}

// A row on host memory: `run` runs the collective on the data and returns when it is done.
Row host_row(Collective c, const std::string& algorithm, const CommbenchValues& values,
             std::function<void(std::vector<float>&)> run) {
  Row row = collective_row(c, algorithm, values);
  row.run = std::move(run);
  return row;
}

// The shared-memory rows only where the group is one node: across nodes there is none.
std::vector<Row> rows(comm::GroupCollectives& hierarchical, comm::MpiCommunicator& flat, int n, bool one_node) {
  const CommbenchValues values{n, flat.rank()};
  // All-reduce by our algorithms and MPI's; reduce-scatter and all-gather by ours that have them.
  using Named = std::pair<const char*, comm::Algo>;
  std::vector<Named> all_reduce_algos = {{"ring", comm::Algo::Ring}, {"tree", comm::Algo::Tree}};
  std::vector<Named> partial_algos = {{"ring", comm::Algo::Ring}};
  if (one_node) all_reduce_algos.push_back({"shm", comm::Algo::Shm}), partial_algos.push_back({"shm", comm::Algo::Shm});
  all_reduce_algos.push_back({"mpi", comm::Algo::Mpi});
  std::vector<Row> list;
  for (const auto& [name, algo] : all_reduce_algos)
    list.push_back(host_row(Collective::all_reduce, name, values, [&flat, algo = algo](std::vector<float>& v) {
      flat.all_reduce_f32(v.data(), v.size(), algo);
    }));
  list.push_back(host_row(Collective::all_reduce, "hierarchical", values, [&hierarchical](std::vector<float>& v) {
    hierarchical.all_reduce(v.data(), v.size(), DType::f32, comm::Op::Sum, Stream{}).wait();
  }));
  for (const auto& [name, algo] : partial_algos) {
    list.push_back(host_row(Collective::reduce_scatter, name, values, [&flat, algo = algo](std::vector<float>& v) {
      flat.reduce_scatter_f32(v.data(), v.size(), algo);
    }));
    list.push_back(host_row(Collective::all_gather, name, values, [&flat, algo = algo](std::vector<float>& v) {
      flat.all_gather_f32(v.data(), v.size(), algo);
    }));
  }
  return list;
}

// The rows on `data`'s size, each checked once (its warm-up too: every rank's wrong elements
// summed), then timed interleaved, and printed; returns the wrong elements.
size_t print_rows(comm::Communicator& world, const std::vector<Row>& table, std::vector<float>& data) {
  const size_t bytes = data.size() * sizeof(float);
  std::vector<size_t> wrong(table.size());
  size_t total_wrong = 0;
  for (size_t r = 0; r < table.size(); ++r) {
    table[r].fill(data);
    table[r].run(data);
    if (table[r].finish) table[r].finish();
    double everywhere = static_cast<double>(table[r].wrong(data));  // exact in f64 up to 2^53 elements
    world.all_reduce(&everywhere, 1, DType::f64, comm::Op::Sum, Stream{}).wait();
    wrong[r] = static_cast<size_t>(everywhere);
    total_wrong += wrong[r];
  }
  const bool large = bytes >= (size_t(16) << 20);
  const std::vector<double> seconds = interleaved_means(world, table, data, large ? 3 : 5, large ? 1 : 4);
  for (size_t r = 0; r < table.size(); ++r) {
    const double algbw = bytes / seconds[r] / 1e9;
    char text[200];
    std::snprintf(text, sizeof text, "%11zu %11zu  %-14s  %-12s %10.1f %12.3f %12.3f %7zu", bytes, data.size(),
                  table[r].collective.c_str(), table[r].algorithm.c_str(), seconds[r] * 1e6, algbw,
                  algbw * table[r].bus_factor, wrong[r]);
    print0(text);
  }
  return total_wrong;
}

// A level's all-reduce over MPI (our ring), for link_figures.
Row mpi_ring_all_reduce(comm::MpiCommunicator& c) {
  return host_row(Collective::all_reduce, "ring", CommbenchValues{c.size(), c.rank()}, [&c](std::vector<float>& v) {
    c.all_reduce_f32(v.data(), v.size(), comm::Algo::Ring);
  });
}

}  // namespace

int run_commbench(comm::Communicator& world, const std::vector<std::string>& args) {
  const cli::CommandLine line = cli::parse_command_line("commbench", args);
  if (line.help) {
    print0("usage: mpirun -np N trident commbench DECK [--section.key=value ...]\n"
           "Our ring, tree and hierarchical collectives beside MPI_Allreduce on the deck's topology\n"
           "(topology.ranks_per_node, nodes_per_rack, file, link.*), nccl-tests' columns; with\n"
           "a model on a device (kernels.device), the device buffers' too: NCCL's (comm.backend = nccl) or\n"
           "MPI's staged through host copies.\n"
           "Writes RUN_DIR/links.ini (per-level latency and bandwidth: NCCL's where it ran) for the planner.\n\n" +
           cli::command_help("commbench"));
    return kExitOk;
  }
  const Job job = load_job(world, line);
  const comm::CollectiveSettings& settings = job.settings.comm.collectives;
  comm::CollectiveSettings hierarchical_settings = settings;
  hierarchical_settings.algo = "auto";
  hierarchical_settings.backend = "mpi";  // the host rows': the device rows make their own communicators
  comm::GroupCollectives group(world, job.topology, "world", hierarchical_settings);
  const comm::EmulatedLinks emulated(group, settings.links);  // every level's steps at the link model's speed
  // A model on a device: the rows of device buffers too (NCCL's, or MPI's staged through host
  // copies); with NCCL the links NCCL's.
  std::unique_ptr<DeviceCommbench> device =
      job.settings.kernels.device != "cpu" ? std::make_unique<DeviceCommbench>(group, job) : nullptr;
  const bool nccl = settings.backend == "nccl";
  const int n = group.flat().size();
  print0("# trident commbench: " + job_summary(job) + "; hierarchical = " + group.describe() +
         (!device ? "" : nccl ? "; NCCL's rows on this rank's GPU" : "; staged rows: MPI on device buffers through host copies"));
  print0("#      size       count  collective      algorithm     time(us)  algbw(GB/s)  busbw(GB/s)  #wrong");
  size_t total_wrong = 0;
  for (size_t bytes : {size_t(0), size_t(4) << 10, size_t(256) << 10, size_t(1) << 20, size_t(16) << 20, size_t(64) << 20}) {
    std::vector<float> data(bytes / sizeof(float));
    total_wrong += print_rows(world, rows(group, group.flat(), n, group.span() == topo::Level::Node), data);
    if (device && bytes > 0) total_wrong += print_rows(world, device->rows(data.size()), data);
  }
  const std::string dir = job.settings.train.run_dir;
  std::string links = std::string("# per-level links measured by trident commbench (") +
                      (nccl ? "NCCL's all-reduce on device buffers" : "our ring all-reduce over MPI on host memory") +
                      " over the level's ranks):\n"
                      "# latency_us a ring step's (a small all-reduce's time over its 2(n-1) steps), busbw_gbps\n";
  for (int l = 0; l < 3; ++l) {
    comm::MpiCommunicator& level = group.level(l);
    const auto [latency, busbw] = nccl && device ? device->level_figures(l) : link_figures(level.size(), [&level](size_t) {
      return mpi_ring_all_reduce(level);
    });
    char text[160];
    std::snprintf(text, sizeof text, "[%s]\nranks = %d\nlatency_us = %.2f\nbusbw_gbps = %.3f\n",
                  topo::level_key(static_cast<topo::Level>(l)), level.size(), latency * 1e6, busbw / 1e9);
    links += text;
  }
  if (world.rank() == 0) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/links.ini") << links;
  }
  print0("# per-level figures written to " + dir + "/links.ini");
  print0(std::string("# ") + (total_wrong ? "WRONG RESULTS: " + std::to_string(total_wrong) : "all results exact"));
  return total_wrong ? kExitFault : kExitOk;
}

}  // namespace trident
