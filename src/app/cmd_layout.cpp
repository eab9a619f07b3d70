// `trident layout DECK`: the rank table and how the parallel groups sit in the cluster.
#include "core/error.hpp"
#include "core/log.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "job/job.hpp"
#include "job/layout_report.hpp"

namespace trident {
namespace {

std::string level_lines(const topo::Topology& t) {
  const int world = t.world_size();
  return "levels: node = " + std::to_string(t.num_nodes()) + " nodes (" +
         (t.emulated() ? "emulated" : "ranks sharing memory") + "); rack = " +
         std::to_string(t.num_racks()) + " racks; cross-rack = " +
         std::to_string(world / t.num_racks()) +
         " groups of the ranks with the same position in their racks" +
         (world % t.num_racks() ? " (racks differ in size)" : "");
}

}  // namespace

int run_layout(comm::Communicator& world, const std::vector<std::string>& args) {
  const cli::CommandLine line = cli::parse_command_line("layout", args);
  if (line.help) {
    print0(cli::command_help("layout"));
    return kExitOk;
  }
  const Job job = load_job(world, line);
  const auto groups = make_job_groups(world, job);
  print0("trident layout: " + job_summary(job));
  print0(level_lines(job.topology) + "\n");
  print0(rank_table(job.grid, job.topology));
  print0(spans_table(job.grid, job.topology));
  for (const std::string& warning : placement_warnings(job.grid, job.topology)) warn0(warning);
  return kExitOk;
}

}  // namespace trident
