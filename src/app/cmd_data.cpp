// `trident eval` (validation loss of the deck's model), `trident export` (the deck's model or a
// checkpoint's as an llm.c file or a Hugging Face directory). `trident prepare` is in cmd_prepare.cpp.
#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/log.hpp"
#include "core/printable.hpp"
#include "comm/agreement.hpp"
#include "data/token_data.hpp"
#include "model/hf_model.hpp"
#include "model/llmc_io.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "job/deck_tokenizer.hpp"
#include "train/evaluate.hpp"
#include "job/job.hpp"
#include "job/memory_plan.hpp"
#include "job/model_setup.hpp"
#include "job/whole_model.hpp"

namespace trident {
namespace po = boost::program_options;
namespace {

// The model a command reads whole (job/whole_model.hpp) as a model on this rank.
std::unique_ptr<model::Transformer> whole_transformer(comm::Communicator& world, const Job& job, kernels::Context& ctx,
                                       const std::string& checkpoint, const std::string& command) {
  const WholeModel m = whole_model(world, job, checkpoint, command);
  // In optim.precision and with the attention and classifier of the deck, as training evaluates:
  // a checkpoint's loss is the one its run logged, and no (B, NH, T, T) probabilities or whole
  // logits exist unless the deck asks for them (check_whole_model_fits counted neither).
  auto gpt = std::make_unique<model::Transformer>(m.config, ctx, model::TensorGroup{}, job.settings.precision.precision);
  set_attention_and_classifier(*gpt, job.settings.model);
  gpt->upload_params(m.params.data());
  return gpt;
}

// --checkpoint=FILE taken out of args (a command's own flag; the rest is a deck command line).
std::string take_checkpoint_flag(std::vector<std::string>& args) {
  std::string path;
  for (auto it = args.begin(); it != args.end();)
    if (it->rfind("--checkpoint=", 0) == 0) path = it->substr(13), it = args.erase(it);
    else ++it;
  return path;
}

}  // namespace

int run_eval(comm::Communicator& world, const std::vector<std::string>& args) {
  std::vector<std::string> rest = args;
  const std::string checkpoint = take_checkpoint_flag(rest);
  const cli::CommandLine line = cli::parse_command_line("eval", rest);
  if (line.help) {
    print0("usage: trident eval DECK [--checkpoint=FILE] [--section.key=value ...]\n"
           "Prints the validation loss of the deck's model (model.init, or random from train.seed) or of a\n"
           "checkpoint of any layout over data.val, as defined in docs/MODEL.md, computed in optim.precision as\n"
           "training computes it; last line: val_loss <value>.\n\n" +
           cli::command_help("eval"));
    return kExitOk;
  }
  const Job job = load_job(world, line);
  if (job.grid.world_size() != 1) fatal_all("trident eval runs on one rank; launch it without mpirun -np > 1");
  kernels::Context ctx = job.device;
  auto gpt = whole_transformer(world, job, ctx, checkpoint, "eval");
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

namespace {

const char* kExportUsage =
    "usage: trident export DECK OUT [--format=llmc | --format=hf [--dtype=f32|bf16|fp16] [--shard-size=5GB]]\n"
    "                      [--checkpoint=FILE] [--section.key=value ...]\n"
    "Writes the deck's model (model.init, or random from train.seed) or a checkpoint's of any layout:\n"
    "  llmc  OUT is an llm.c GPT-2 file (fp32), what model.init reads back (gpt2's default)\n"
    "  hf    OUT is a Hugging Face model directory (GPT2LMHeadModel, or LlamaForCausalLM: llama's default):\n"
    "        config.json and model.safetensors, or\n"
    "        shards of at most --shard-size (bytes; kB, MB, GB as in transformers) and their index;\n"
    "        transformers' from_pretrained and model.init = OUT read it";

struct ExportArgs {
  std::string out, format, checkpoint;  // format "": the architecture's (llmc for gpt2, hf for llama)
  bool hf_options = false;            // --dtype or --shard-size given
  DType dtype = DType::f32;
  int64_t shard_bytes = model::kHfDefaultShardBytes;
  std::vector<std::string> rest;  // the deck and its overrides
};

// "5GB", "500MB", "1000": bytes, decimal units as transformers' max_shard_size.
int64_t parse_bytes(const std::string& text) {
  static const std::vector<std::pair<std::string, int64_t>> units = {{"GB", 1'000'000'000}, {"MB", 1'000'000}, {"kB", 1000},
                                                                       {"KB", 1000}, {"B", 1}};
  int64_t unit = 1;
  std::string digits = text;
  for (const auto& [suffix, bytes] : units)
    if (digits.size() > suffix.size() && digits.compare(digits.size() - suffix.size(), suffix.size(), suffix) == 0) {
      digits.resize(digits.size() - suffix.size()), unit = bytes;
      break;
    }
  if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos || std::stoll(digits) < 1)
    fatal_all("command line: --shard-size=" + printable(text) + " is not a size in bytes >= 1 (e.g. 5GB, 500MB, 1000000)");
  return std::stoll(digits) * unit;
}

ExportArgs parse_export(const std::vector<std::string>& args) {
  ExportArgs a;
  std::string dtype = "f32";
  bool shard_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    bool taken = false;
    for (auto [flag, into] : {std::pair<const char*, std::string*>{"format", &a.format}, {"dtype", &dtype},
                              {"checkpoint", &a.checkpoint}, {"shard-size", nullptr}}) {
      const std::string prefix = std::string("--") + flag + "=";
      if (args[i].rfind(prefix, 0) != 0) continue;
      const std::string value = args[i].substr(prefix.size());
      if (into) *into = value;
      else a.shard_bytes = parse_bytes(value), shard_given = true;
      taken = true;
    }
    if (!taken) a.rest.push_back(args[i]);
  }
  // The second argument that is not a flag is OUT (the first is the deck).
  int positional = 0;
  for (auto it = a.rest.begin(); it != a.rest.end(); ++it)
    if (it->rfind("--", 0) != 0 && ++positional == 2) {
      a.out = *it;
      a.rest.erase(it);
      break;
    }
  if (a.out.empty()) fatal_all("command line: give the deck and where to write the model\n" + std::string(kExportUsage));
  if (!a.format.empty() && a.format != "llmc" && a.format != "hf")
    fatal_all("command line: --format=" + printable(a.format) + " is not llmc or hf (trident export --help)");
  if (dtype == "bf16") a.dtype = DType::bf16;
  else if (dtype == "fp16") a.dtype = DType::fp16;
  else if (dtype != "f32") fatal_all("command line: --dtype=" + printable(dtype) + " is not f32, bf16 or fp16 (trident export --help)");
  a.hf_options = dtype != "f32" || shard_given;
  return a;
}

}  // namespace

int run_export(comm::Communicator& world, const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    print0(kExportUsage);
    return args.empty() ? kExitUserError : kExitOk;
  }
  ExportArgs a = parse_export(args);
  const Job job = load_job(world, cli::parse_command_line("export", a.rest));
  const WholeModel m = whole_model(world, job, a.checkpoint, "export", {WholeModelUse::host_only});
  if (a.format.empty()) a.format = model::is_llama(m.config) ? "hf" : "llmc";
  if (a.format == "llmc" && a.hf_options)
    fatal_all("command line: --dtype and --shard-size are the hf format's; an llm.c file is one fp32 file");
  if (model::is_llama(m.config) && a.format == "llmc")
    fatal_all("command line: an llm.c model file holds GPT-2, and the deck's model is llama (" +
              job.record.cite("model.arch") + "); use --format=hf (LlamaForCausalLM's files)");
  std::string error, what;
  if (world.rank() == 0) {
    try {
      if (a.format == "llmc") {
        model::write_llmc_model(a.out, m.config, m.params.data());
        what = "llm.c fp32";
      } else {
        const std::vector<std::string> files = model::write_hf_model(a.out, m.config, m.params.data(), a.dtype, a.shard_bytes);
        what = "Hugging Face " + std::string(model::hf_class_name(m.config)) + ", " + std::string(model::safetensors_dtype_name(a.dtype)) + ", config.json";
        for (const std::string& f : files) what += " " + f;
      }
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
  }
  comm::agree_on_error(world, error, 0);
  print0("wrote " + a.out + " (" + std::to_string(model::num_parameters(m.config)) + " parameters, " + what + ")");
  return kExitOk;
}

}  // namespace trident
