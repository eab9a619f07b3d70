// `trident train DECK`: set up the job, the run directory and the resolved deck.
#include "ckpt/lineage.hpp"
#include "comm/agreement.hpp"
#include "comm/heartbeat.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/version.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "job/job.hpp"
#include "job/model_setup.hpp"
#include "job/run_dir.hpp"
#include "job/signals.hpp"
#include "job/threads.hpp"
#include "train/trainer.hpp"

namespace trident {
namespace {

std::string resolved_header(const cli::CommandLine& line) {
  std::string header = "Resolved deck written by trident " + std::string(TRIDENT_VERSION) +
                       " at " + utc_timestamp() + "\nfrom " + line.deck_path;
  for (const auto& [key, value] : line.overrides) header += " --" + key + "=" + value;
  header += "\nEvery key with its value in effect; readable back as a deck.";
  return header;
}

}  // namespace

int run_train(comm::Communicator& world, const std::vector<std::string>& args) {
  install_stop_signals();  // from the start: a SIGUSR1 during set-up must not kill the rank
  const cli::CommandLine line = cli::parse_command_line("train", args);
  if (line.help) {
    print0(cli::command_help("train"));
    return kExitOk;
  }
  const Job job = load_job(world, line);
  const ThreadReport threads = report_threads(world);
  const auto groups = make_job_groups(world, job);
  // A stopped or hung rank ends the job within seconds (the watchdog would take minutes).
  const comm::Heartbeat heartbeat(world, job.settings.comm.heartbeat_s,
                                  line.check ? 0.0 : job.settings.comm.heartbeat_timeout_s);
  Trainer trainer(job, world, *groups);  // checks the data and the model source
  std::string run_id = world.rank() == 0 ? ckpt::make_run_id() : "";
  comm::broadcast_string(world, run_id, 0);
  // Owned before the checkpoint directory is even read: what restore() sees stays as it is.
  RunDirLock lock = line.check ? RunDirLock() : lock_run_dir(world, job, run_id);
  trainer.restore(run_id, line.check);  // and the checkpoint to resume from
  const std::string gemm_path = kernels::gemm_path_summary(job.device, job.settings.precision.precision);
  if (line.check) {
    check_run_dir_creatable(world, job);
    print0(gemm_path);
    print0(trainer.memory_report(false));
    print0(trainer.memory_report(true));
    print0("deck ok: " + line.deck_path + ": " + job_summary(job));
    return kExitOk;
  }
  const std::string run_dir = prepare_run_dir(world, job, resolved_header(line));
  lock.keep();
  print0("trident train: " + job_summary(job));
  print0("run directory: " + run_dir + " (locked: " + run_dir + "/" + kLockFileName + ")");
  print0("run id: " + run_id);
  print0(threads.header());
  if (!threads.warning().empty()) print0(threads.warning());
  print0(gemm_path);
  print0(trainer.memory_report(false));
  return trainer.run(run_dir, threads.attributes());
}

}  // namespace trident
