// `trident eval` (validation loss of the deck's model), `trident export` (the deck's model as an
// llm.c file). `trident prepare` is in cmd_prepare.cpp.
#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/log.hpp"
#include "comm/agreement.hpp"
#include "data/token_data.hpp"
#include "model/llmc_io.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "job/deck_tokenizer.hpp"
#include "train/evaluate.hpp"
#include "job/job.hpp"
#include "job/memory_plan.hpp"
#include "job/model_setup.hpp"

namespace trident {
namespace po = boost::program_options;
namespace {

// Checked against the memory model before its first buffer (exit 2 with the figures).
std::unique_ptr<model::Gpt2> deck_model(comm::Communicator& world, const Job& job, kernels::Context& ctx,
                                        const std::string& command) {
  const model::GptConfig config = model_config(job.settings.model, job.record);
  check_whole_model_fits(world, job.device, job.settings, job.record, config, command);
  auto gpt = std::make_unique<model::Gpt2>(config, ctx);
  initialise_parameters(job.settings, *gpt);
  return gpt;
}

}  // namespace

int run_eval(comm::Communicator& world, const std::vector<std::string>& args) {
  const cli::CommandLine line = cli::parse_command_line("eval", args);
  if (line.help) {
    print0("Prints the validation loss of the deck's model (model.init, or random from\n"
           "train.seed) over data.val, as defined in docs/MODEL.md; last line: val_loss <value>.\n\n" +
           cli::command_help("eval"));
    return kExitOk;
  }
  const Job job = load_job(world, line);
  if (job.grid.world_size() != 1) fatal_all("trident eval runs on one rank; launch it without mpirun -np > 1");
  kernels::Context ctx = job.device;
  auto gpt = deck_model(world, job, ctx, "eval");
  require_vocab_covers_tokenizer(job.settings, job.record);
  std::unique_ptr<data::TokenData> val;
  const int vocab = job.settings.model.vocab;
  try {
    val = std::make_unique<data::TokenData>(job.settings.data.val,
                                            data::parse_token_format(job.settings.data.format), vocab);
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + " (" + job.record.cite("data.val") + ")");
  }
  const int T = job.settings.train.seq_len;
  const int64_t windows = validation_windows(*val, job.settings.train.eval_tokens, T);
  const double loss = validation_loss(*gpt, *val, windows, T,
                                      job.settings.train.micro_batch);
  char text[64];
  std::snprintf(text, sizeof text, "val_loss %.6g", loss);
  print0("evaluated " + std::to_string(windows) + " windows of " + std::to_string(T) + " tokens");
  print0(text);
  return kExitOk;
}

int run_export(comm::Communicator& world, const std::vector<std::string>& args) {
  std::vector<std::string> rest = args;
  if (rest.size() < 2 || rest[0] == "--help" || rest[0] == "-h") {
    print0("usage: trident export DECK OUT.bin [--section.key=value ...]\n"
           "Writes the deck's model (model.init, or random from train.seed) as an llm.c file.");
    return rest.empty() || rest[0] == "--help" || rest[0] == "-h" ? kExitOk : kExitUserError;
  }
  const std::string out = rest[1];
  rest.erase(rest.begin() + 1);
  const Job job = load_job(world, cli::parse_command_line("export", rest));
  kernels::Context ctx = job.device;
  auto gpt = deck_model(world, job, ctx, "export");
  std::string error;
  if (world.rank() == 0) {
    try {
      model::write_llmc_model(out, gpt->config(), gpt->host_params().data());
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
  }
  comm::agree_on_error(world, error, 0);
  print0("wrote " + out + " (" + std::to_string(gpt->num_parameters()) + " parameters, llm.c fp32)");
  return kExitOk;
}

}  // namespace trident
