// `trident prepare` (text -> byte-level token shards), `trident eval` (validation loss of the
// deck's model), `trident export` (the deck's model as an llm.c file).
#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/log.hpp"
#include "core/mpi_util.hpp"
#include "data/token_data.hpp"
#include "model/llmc_io.hpp"
#include "train/cli.hpp"
#include "train/commands.hpp"
#include "train/evaluate.hpp"
#include "train/job.hpp"
#include "train/model_setup.hpp"

namespace trident {
namespace po = boost::program_options;
namespace {

struct PrepareArgs {
  std::string out_dir;
  std::vector<std::string> inputs;
  double val_fraction = 0.1;
  bool help = false;
};

const char* kPrepareUsage =
    "usage: trident prepare OUT_DIR TEXT_FILE... [--val_fraction=0.1]\n"
    "Reads the text files in order as bytes (vocab 256), writes OUT_DIR/train.bin and\n"
    "OUT_DIR/val.bin in llm.c's token format; the last val_fraction of the bytes is validation.";

PrepareArgs parse_prepare(const std::vector<std::string>& args) {
  po::options_description options;
  options.add_options()("help,h", "")("val_fraction", po::value<double>(), "")(
      "paths", po::value<std::vector<std::string>>(), "");
  const po::variables_map values = cli::parse_without_deck(args, options, "paths", kPrepareUsage);
  PrepareArgs result;
  result.help = values.count("help") > 0;
  if (values.count("val_fraction")) result.val_fraction = values["val_fraction"].as<double>();
  if (values.count("paths")) {
    auto paths = values["paths"].as<std::vector<std::string>>();
    result.out_dir = paths.front();
    result.inputs.assign(paths.begin() + 1, paths.end());
  }
  if (!result.help && result.inputs.empty())
    fatal_all(std::string("command line: give an output directory and at least one text file\n") + kPrepareUsage);
  if (!(result.val_fraction > 0 && result.val_fraction < 1))
    fatal_all("command line: --val_fraction must be in (0, 1), got " + std::to_string(result.val_fraction));
  return result;
}

// Every rank reads the inputs (they are small and equal), rank 0 writes.
void write_split(const PrepareArgs& a) {
  std::vector<uint16_t> tokens;
  for (const std::string& path : a.inputs) {
    // 1 GiB: every rank holds the text and its tokens, and MPI broadcasts at most 2^31 bytes.
    const std::string text = read_on_root_and_broadcast(path, "text file", "give readable text files of at most 1 GiB",
                                                        MPI_COMM_WORLD, size_t(1) << 30);
    for (unsigned char byte : text) tokens.push_back(byte);
  }
  const size_t val = static_cast<size_t>(tokens.size() * a.val_fraction);
  if (val < 2 || tokens.size() - val < 2)
    fatal_all("the input has only " + std::to_string(tokens.size()) + " bytes: too little to split");
  std::string error;
  if (world_rank() == 0) {
    try {
      std::filesystem::create_directories(a.out_dir);
      data::write_llmc_tokens(a.out_dir + "/train.bin", {tokens.begin(), tokens.end() - val});
      data::write_llmc_tokens(a.out_dir + "/val.bin", {tokens.end() - val, tokens.end()});
    } catch (const std::exception& e) {
      error = std::string("cannot write the shards: ") + e.what();
    }
  }
  agree_on_error(error, 0, MPI_COMM_WORLD);
  print0("prepared " + a.out_dir + "/train.bin (" + std::to_string(tokens.size() - val) +
         " tokens) and " + a.out_dir + "/val.bin (" + std::to_string(val) + " tokens), vocab 256");
}

std::unique_ptr<model::Gpt2> deck_model(const Job& job, kernels::Context& ctx) {
  auto gpt = std::make_unique<model::Gpt2>(model_config_from_deck(job.deck), ctx);
  initialise_parameters(job.deck, *gpt);
  return gpt;
}

}  // namespace

int run_prepare(const std::vector<std::string>& args) {
  const PrepareArgs parsed = parse_prepare(args);
  if (parsed.help) {
    print0(kPrepareUsage);
    return kExitOk;
  }
  write_split(parsed);
  return kExitOk;
}

int run_eval(const std::vector<std::string>& args) {
  const cli::CommandLine line = cli::parse_command_line("eval", args);
  if (line.help) {
    print0("Prints the validation loss of the deck's model (model.init, or random from\n"
           "train.seed) over data.val, as defined in docs/MODEL.md; last line: val_loss <value>.\n\n" +
           cli::command_help("eval"));
    return kExitOk;
  }
  const Job job = load_job(line);
  if (job.grid.world_size() != 1) fatal_all("trident eval runs on one rank; launch it without mpirun -np > 1");
  kernels::Context ctx;
  auto gpt = deck_model(job, ctx);
  std::unique_ptr<data::TokenData> val;
  const int vocab = static_cast<int>(job.deck.get_int("model.vocab"));
  try {
    val = std::make_unique<data::TokenData>(job.deck.get_string("data.val"),
                                            data::parse_token_format(job.deck.get_string("data.format")), vocab);
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + " (" + job.deck.cite("data.val") + ")");
  }
  const int T = static_cast<int>(job.deck.get_int("model.seq_len"));
  const int64_t windows = validation_windows(*val, job.deck.get_int("train.eval_tokens"), T);
  const double loss = validation_loss(*gpt, *val, windows, T,
                                      static_cast<int>(job.deck.get_int("train.micro_batch")));
  char text[64];
  std::snprintf(text, sizeof text, "val_loss %.6g", loss);
  print0("evaluated " + std::to_string(windows) + " windows of " + std::to_string(T) + " tokens");
  print0(text);
  return kExitOk;
}

int run_export(const std::vector<std::string>& args) {
  std::vector<std::string> rest = args;
  if (rest.size() < 2 || rest[0] == "--help" || rest[0] == "-h") {
    print0("usage: trident export DECK OUT.bin [--section.key=value ...]\n"
           "Writes the deck's model (model.init, or random from train.seed) as an llm.c file.");
    return rest.empty() || rest[0] == "--help" || rest[0] == "-h" ? kExitOk : kExitUserError;
  }
  const std::string out = rest[1];
  rest.erase(rest.begin() + 1);
  const Job job = load_job(cli::parse_command_line("export", rest));
  kernels::Context ctx;
  auto gpt = deck_model(job, ctx);
  std::string error;
  if (world_rank() == 0) {
    try {
      model::write_llmc_model(out, gpt->config(), gpt->params());
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
  }
  agree_on_error(error, 0, MPI_COMM_WORLD);
  print0("wrote " + out + " (" + std::to_string(gpt->num_parameters()) + " parameters, llm.c fp32)");
  return kExitOk;
}

}  // namespace trident
