// `trident generate DECK [--model.init=FILE | --checkpoint=FILE] --prompt=TEXT [--tokens=N
// --temperature=T --top_k=K --seed=S]`: text from a trained model. The prompt is encoded with the
// tokenizer of the deck's data (data.train's directory), the model continues it one token at a
// time with a key/value cache (model/kv_cache.hpp), and the text is decoded with that tokenizer.
// One rank; the model from an llm.c file (model.init), a Trident checkpoint of any layout (read
// whole: resharding onto one rank), or random from train.seed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "core/error.hpp"
#include "core/log.hpp"
#include "comm/agreement.hpp"
#include "core/printable.hpp"
#include "model/kv_cache.hpp"
#include "model/llmc_io.hpp"
#include "model/sampler.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "job/deck_tokenizer.hpp"
#include "job/job.hpp"
#include "job/memory_plan.hpp"
#include "job/model_setup.hpp"
#include "job/whole_model.hpp"

namespace trident {
namespace {

const char* kGenerateUsage =
    "usage: trident generate DECK [--model.init=FILE | --checkpoint=FILE] --prompt=TEXT\n"
    "                        [--tokens=64] [--temperature=1.0] [--top_k=0] [--seed=1] [--section.key=value ...]\n"
    "Continues the prompt with the model: an llm.c file (model.init), a checkpoint of any layout, or random\n"
    "(train.seed). Text is encoded and decoded with the tokenizer of the deck's data (data.train's\n"
    "directory; bytes where none is recorded). --temperature=0 is greedy; the same seed gives the same text.\n"
    "Prints the prompt and its continuation on stdout, the speed on stderr.";

struct GenerateArgs {
  std::string prompt, checkpoint;
  bool has_prompt = false;
  int tokens = 64;
  model::SamplingSettings sampling;
  std::vector<std::string> rest;  // the deck and its overrides
};

// A flag's value as T: a whole number in T's range for an integer T (a seed keeps all its 64
// bits; 10^12 tokens is not truncated into range), a finite number for a floating T.
template <typename T>
T number(const std::string& flag, const std::string& text) {
  const std::string given = "command line: --" + flag + "=" + printable(text);
  size_t used = 0;
  try {
    if constexpr (std::is_integral_v<T>) {
      const bool negative = text.find('-') != std::string::npos;  // stoull would wrap "-1" around
      const long long low = negative ? std::stoll(text, &used) : 0;
      const unsigned long long high = negative ? 0 : std::stoull(text, &used);
      if (used == text.size() && (negative ? std::is_signed_v<T> && low >= static_cast<long long>(std::numeric_limits<T>::lowest())
                                           : high <= static_cast<unsigned long long>(std::numeric_limits<T>::max())))
        return negative ? static_cast<T>(low) : static_cast<T>(high);
      if (used == text.size())
        fatal_all(given + " is out of range: from " + std::to_string(std::numeric_limits<T>::lowest()) + " to " +
                  std::to_string(std::numeric_limits<T>::max()) + " (trident generate --help)");
    } else {
      const double value = std::stod(text, &used);
      if (used == text.size() && std::isfinite(value)) return static_cast<T>(value);
      if (used == text.size()) fatal_all(given + " is not a finite number (trident generate --help)");
    }
  } catch (const std::out_of_range&) {
    fatal_all(given + " is out of range (trident generate --help)");
  } catch (const std::invalid_argument&) {
  }
  fatal_all(given + " is not " + (std::is_integral_v<T> ? "a whole number" : "a number") + " (trident generate --help)");
}

// Takes generate's own flags (--flag=value or --flag value) out of args; the rest is a deck
// command line.
GenerateArgs parse_generate(const std::vector<std::string>& args) {
  GenerateArgs a;
  const std::vector<std::string> flags = {"prompt", "checkpoint", "tokens", "temperature", "top_k", "seed"};
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag, value;
    for (const std::string& f : flags) {
      if (args[i].rfind("--" + f + "=", 0) == 0) flag = f, value = args[i].substr(f.size() + 3);
      else if (args[i] == "--" + f && i + 1 < args.size()) flag = f, value = args[++i];
    }
    if (flag.empty()) a.rest.push_back(args[i]);
    else if (flag == "prompt") a.prompt = value, a.has_prompt = true;
    else if (flag == "checkpoint") a.checkpoint = value;
    else if (flag == "tokens") a.tokens = number<int>(flag, value);
    else if (flag == "temperature") a.sampling.temperature = number<float>(flag, value);
    else if (flag == "top_k") a.sampling.top_k = number<int>(flag, value);
    else a.sampling.seed = number<uint64_t>(flag, value);
  }
  if (a.tokens < 1) fatal_all("command line: --tokens must be at least 1");
  if (!(a.sampling.temperature >= 0)) fatal_all("command line: --temperature must be 0 (greedy) or more");
  if (a.sampling.top_k < 0) fatal_all("command line: --top_k must be 0 (every token) or more");
  return a;
}

std::vector<data::TokenId> prompt_tokens(const GenerateArgs& a, const data::Tokenizer& tokenizer) {
  if (!a.has_prompt || a.prompt.empty())
    fatal_all("command line: give the text to continue with --prompt=TEXT (not empty; trident generate --help)");
  return tokenizer.encode(a.prompt);
}

// The prompt and the tokens asked for within the model's context.
void require_context(const std::vector<data::TokenId>& tokens, const GenerateArgs& a, const model::GptConfig& config) {
  if (static_cast<int64_t>(tokens.size()) + a.tokens > config.max_seq_len)
    fatal_all("command line: the prompt (" + std::to_string(tokens.size()) + " tokens) and --tokens=" +
              std::to_string(a.tokens) + " do not fit the model's context of " + std::to_string(config.max_seq_len) +
              " positions; shorten the prompt or ask for at most " +
              std::to_string(std::max<int64_t>(0, config.max_seq_len - static_cast<int64_t>(tokens.size()))) + " tokens");
}

// Feeds the prompt, then samples `count` tokens; returns them.
std::vector<data::TokenId> continue_text(model::KvDecoder& decoder, const std::vector<data::TokenId>& prompt, int count,
                                    int vocab, const model::SamplingSettings& sampling) {
  const float* logits = nullptr;
  for (data::TokenId token : prompt) logits = decoder.step(static_cast<int>(token));
  std::vector<data::TokenId> out;
  for (int i = 0; i < count; ++i) {
    const int next = model::sample_token(logits, vocab, sampling, decoder.position());
    out.push_back(static_cast<data::TokenId>(next));
    if (i + 1 < count) logits = decoder.step(next);
  }
  return out;
}

}  // namespace

int run_generate(comm::Communicator& world, const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    print0(kGenerateUsage);
    return args.empty() ? kExitUserError : kExitOk;
  }
  const GenerateArgs a = parse_generate(args);
  const Job job = load_job(world, cli::parse_command_line("generate", a.rest));
  if (job.grid.world_size() != 1) fatal_all("trident generate runs on one rank; launch it without mpirun -np > 1");
  const data::Tokenizer tokenizer = deck_tokenizer(job.settings, job.record);
  const std::vector<data::TokenId> prompt = prompt_tokens(a, tokenizer);
  // The decoder's memory checked before the parameters are read: the cache of the positions the
  // text takes (at most the model's context, which require_context holds it to next).
  const int positions = static_cast<int>(std::min<int64_t>(static_cast<int64_t>(prompt.size()) + a.tokens, INT32_MAX));
  const WholeModel m = whole_model(world, job, a.checkpoint, "generate", {WholeModelUse::decode, positions});
  if (m.config.vocab < tokenizer.vocab())
    fatal_all("the model's vocabulary (" + std::to_string(m.config.vocab) + ") is smaller than the " + tokenizer.kind() +
              " tokenizer's (" + std::to_string(tokenizer.vocab()) + "): it was not trained on this data");
  require_context(prompt, a, m.config);
  kernels::Context ctx = job.device;
  // The cache holds the positions this text takes (a Llama 3 model's 131,072 would be 17 GB for 8B).
  model::KvDecoder decoder(m.config, m.params.data(), ctx, static_cast<int>(prompt.size()) + a.tokens);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<data::TokenId> out = continue_text(decoder, prompt, a.tokens, tokenizer.vocab(), a.sampling);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print0(a.prompt + tokenizer.decode(out));
  if (world.rank() == 0)
    std::fprintf(stderr, "generated %d tokens after a prompt of %zu in %.3f s (the prompt's steps included): %.1f tokens/s\n",
                 a.tokens, prompt.size(), seconds, out.size() / seconds);
  return kExitOk;
}

}  // namespace trident
