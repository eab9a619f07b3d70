// `trident prepare`: text files -> llm.c token shards (train.bin, val.bin) with the tokenizer
// asked for — bytes, a byte-level BPE trained on the input, or GPT-2's vocabulary files — which
// the output directory records (data/tokenizer.hpp) for training and `trident generate`.
#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/log.hpp"
#include "comm/agreement.hpp"
#include "data/bpe_files.hpp"
#include "data/token_data.hpp"
#include "data/tokenizer.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"

namespace trident {
namespace po = boost::program_options;
namespace {

struct PrepareArgs {
  std::string out_dir;
  std::vector<std::string> inputs;
  double val_fraction = 0.1;
  std::string tokenizer = "bytes";
  int vocab = 0;
  std::string vocab_files;
  std::string tokenizer_file;  // --tokenizer=hf
  bool help = false;
};

const char* kPrepareUsage =
    "usage: trident prepare OUT_DIR TEXT_FILE... [--val_fraction=0.1]\n"
    "                       [--tokenizer=bytes | --tokenizer=bpe --vocab=N | --tokenizer=gpt2 --vocab-files=DIR |\n"
    "                        --tokenizer=hf --tokenizer-file=tokenizer.json]\n"
    "Reads the text files in order, tokenizes them and writes OUT_DIR/train.bin and OUT_DIR/val.bin in\n"
    "llm.c's token format; the last val_fraction of the tokens is validation. Tokenizers: bytes (vocab\n"
    "256, the default); bpe (a byte-level BPE of N tokens, 256 to 65536, learned from the input files);\n"
    "gpt2 (DIR/encoder.json and DIR/vocab.bpe, e.g. GPT-2's own); hf (a Hugging Face tokenizer.json of a\n"
    "byte-level BPE, GPT-2's or Llama 3's kind, run with its own pattern). OUT_DIR/tokenizer.txt records it;\n"
    "a BPE's vocabulary is written beside the shards as encoder.json and vocab.bpe, a Hugging Face one as\n"
    "tokenizer.json (docs/DATA.md).";

void check_tokenizer_args(const PrepareArgs& a) {
  if (a.tokenizer != "bytes" && a.tokenizer != "bpe" && a.tokenizer != "gpt2" && a.tokenizer != "hf")
    fatal_all("command line: --tokenizer=" + a.tokenizer + " is not bytes, bpe, gpt2 or hf (trident prepare --help)");
  if (a.tokenizer == "bpe" && (a.vocab < 256 || a.vocab > 65536))
    fatal_all("command line: --tokenizer=bpe needs --vocab=N with N from 256 to 65536 (e.g. --vocab=1024)");
  if (a.tokenizer != "bpe" && a.vocab != 0)
    fatal_all("command line: --vocab is the size of a BPE to learn; give it with --tokenizer=bpe");
  if ((a.tokenizer == "gpt2") != !a.vocab_files.empty())
    fatal_all("command line: --tokenizer=gpt2 and --vocab-files=DIR (holding encoder.json and vocab.bpe) go together");
  if ((a.tokenizer == "hf") != !a.tokenizer_file.empty())
    fatal_all("command line: --tokenizer=hf and --tokenizer-file=FILE (a Hugging Face tokenizer.json) go together");
}

PrepareArgs parse_prepare(const std::vector<std::string>& args) {
  po::options_description options;
  options.add_options()("help,h", "")("val_fraction", po::value<double>(), "")("tokenizer", po::value<std::string>(), "")(
      "vocab", po::value<int>(), "")("vocab-files", po::value<std::string>(), "")("tokenizer-file", po::value<std::string>(), "")(
      "paths", po::value<std::vector<std::string>>(), "");
  const po::variables_map values = cli::parse_without_deck(args, options, "paths", kPrepareUsage);
  PrepareArgs result;
  result.help = values.count("help") > 0;
  if (values.count("val_fraction")) result.val_fraction = values["val_fraction"].as<double>();
  if (values.count("tokenizer")) result.tokenizer = values["tokenizer"].as<std::string>();
  if (values.count("vocab")) result.vocab = values["vocab"].as<int>();
  if (values.count("vocab-files")) result.vocab_files = values["vocab-files"].as<std::string>();
  if (values.count("tokenizer-file")) result.tokenizer_file = values["tokenizer-file"].as<std::string>();
  if (values.count("paths")) {
    auto paths = values["paths"].as<std::vector<std::string>>();
    result.out_dir = paths.front();
    result.inputs.assign(paths.begin() + 1, paths.end());
  }
  if (result.help) return result;
  if (result.inputs.empty())
    fatal_all(std::string("command line: give an output directory and at least one text file\n") + kPrepareUsage);
  if (!(result.val_fraction > 0 && result.val_fraction < 1))
    fatal_all("command line: --val_fraction must be in (0, 1), got " + std::to_string(result.val_fraction));
  check_tokenizer_args(result);
  return result;
}

// The tokenizer asked for: learned from the texts (bpe), read (gpt2, hf), or bytes.
data::Tokenizer make_tokenizer(const PrepareArgs& a, const std::vector<std::string>& texts) {
  if (a.tokenizer == "bytes") return data::Tokenizer::bytes();
  if (a.tokenizer == "hf") {
    try {
      return data::Tokenizer::from_hf_file(a.tokenizer_file);
    } catch (const std::runtime_error& e) {
      fatal_all(std::string(e.what()) + " (--tokenizer-file)");
    }
  }
  if (a.tokenizer == "gpt2") {
    try {
      return data::Tokenizer(std::make_shared<data::Bpe>(data::read_gpt2_files(a.vocab_files)), "gpt2");
    } catch (const std::runtime_error& e) {
      fatal_all(std::string(e.what()) + "; --vocab-files names a directory holding GPT-2's encoder.json and vocab.bpe");
    }
  }
  const auto start = SteadyClock::now();
  const std::vector<std::string_view> views(texts.begin(), texts.end());
  auto bpe = std::make_shared<data::Bpe>(data::train_bpe(views, a.vocab, [](int done, int wanted) {
    print0("  bpe: " + std::to_string(done) + " of " + std::to_string(wanted) + " merges");
  }));
  char line[160];
  std::snprintf(line, sizeof line, "learned a byte-level BPE of %d tokens (%d merges) in %.1f s", bpe->vocab(),
                static_cast<int>(bpe->merges().size()), seconds_since(start));
  print0(line);
  if (bpe->vocab() < a.vocab)
    warn0("the input has no pair left that occurs twice: the vocabulary has " + std::to_string(bpe->vocab()) +
          " tokens, fewer than the " + std::to_string(a.vocab) + " asked for");
  return data::Tokenizer(std::move(bpe), "bpe");
}

// Every input encoded, in order; progress lines on inputs of more than 16 MB.
std::vector<data::TokenId> encode_all(const data::Tokenizer& tokenizer, const std::vector<std::string>& texts) {
  size_t total = 0;
  for (const std::string& text : texts) total += text.size();
  const auto start = SteadyClock::now();
  size_t before = 0, reported = 0;
  auto progress = [&](size_t done, size_t) {
    if (total < (size_t(16) << 20) || before + done < reported + total / 10) return;
    reported = before + done;
    char line[128];
    std::snprintf(line, sizeof line, "  encoding: %3.0f%% (%.1f of %.1f MB, %.1f MB/s)", 100.0 * reported / total,
                  reported / 1e6, total / 1e6, reported / 1e6 / seconds_since(start));
    print0(line);
  };
  std::vector<data::TokenId> tokens;
  for (const std::string& text : texts) {
    const std::vector<data::TokenId> part = tokenizer.encode(text, data::Tokenizer::kChunkBytes, progress);
    tokens.insert(tokens.end(), part.begin(), part.end());
    before += text.size();
  }
  char line[160];
  std::snprintf(line, sizeof line, "encoded %.2f MB into %zu tokens (%.2f bytes per token) in %.2f s", total / 1e6,
                tokens.size(), tokens.empty() ? 0.0 : double(total) / tokens.size(), seconds_since(start));
  print0(line);
  return tokens;
}

// The file as it is (a tokenizer.json into the data directory), written aside and renamed.
void copy_file(const std::string& from, const std::string& to) {
  std::string bytes, why;
  if (!read_file(from, size_t(256) << 20, bytes, why)) throw std::runtime_error(from + ": " + why);
  const std::string problem = write_atomically(to, {{bytes.data(), bytes.size()}});
  if (!problem.empty()) throw std::runtime_error(problem);
}

// Rank 0 writes the shards, the vocabulary files of a BPE and the record.
void write_outputs(comm::Communicator& world, const PrepareArgs& a, const data::Tokenizer& tokenizer,
                   const std::vector<data::TokenId>& tokens, size_t val) {
  std::string error;
  if (world.rank() == 0) {
    try {
      std::filesystem::create_directories(a.out_dir);
      data::write_llmc_tokens(a.out_dir + "/train.bin", {tokens.begin(), tokens.end() - val}, tokenizer.vocab());
      data::write_llmc_tokens(a.out_dir + "/val.bin", {tokens.end() - val, tokens.end()}, tokenizer.vocab());
      if (tokenizer.kind() == "hf") copy_file(a.tokenizer_file, a.out_dir + "/" + data::kHfTokenizerFile);
      else if (tokenizer.bpe()) data::write_gpt2_files(*tokenizer.bpe(), a.out_dir);
      data::write_tokenizer_record(a.out_dir, {tokenizer.kind(), tokenizer.vocab()});
    } catch (const std::exception& e) {
      error = std::string("cannot write the prepared data: ") + e.what();
    }
  }
  comm::agree_on_error(world, error, 0);
}

// Every rank reads the inputs (they are small and equal) and tokenizes them; rank 0 writes.
void prepare(comm::Communicator& world, const PrepareArgs& a) {
  std::vector<std::string> texts;
  for (const std::string& path : a.inputs)
    // 1 GiB: every rank holds the text and its tokens, and a broadcast carries at most 2^31 words.
    texts.push_back(comm::read_on_root_and_broadcast(world, path, "text file",
                                                     "give readable text files of at most 1 GiB", size_t(1) << 30));
  const data::Tokenizer tokenizer = make_tokenizer(a, texts);
  const std::vector<data::TokenId> tokens = encode_all(tokenizer, texts);
  const size_t val = static_cast<size_t>(tokens.size() * a.val_fraction);
  if (val < 2 || tokens.size() - val < 2)
    fatal_all("the input has only " + std::to_string(tokens.size()) + " tokens: too little to split");
  write_outputs(world, a, tokenizer, tokens, val);
  print0("prepared " + a.out_dir + "/train.bin (" + std::to_string(tokens.size() - val) + " tokens) and " + a.out_dir +
         "/val.bin (" + std::to_string(val) + " tokens), vocab " + std::to_string(tokenizer.vocab()) + " (" +
         tokenizer.kind() + ")");
}

}  // namespace

int run_prepare(comm::Communicator& world, const std::vector<std::string>& args) {
  const PrepareArgs parsed = parse_prepare(args);
  if (parsed.help) {
    print0(kPrepareUsage);
    return kExitOk;
  }
  prepare(world, parsed);
  return kExitOk;
}

}  // namespace trident
