// Byte-level BPE (issue 19): GPT-2's pre-tokenising split (whitespace runs, digits,
// contractions, non-ASCII), merge order worked by hand, training, GPT-2's file format, parallel
// encoding equal to one serial pass, and byte-exact round trips over text, binary and invalid UTF-8.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/bpe.hpp"
#include "data/bpe_files.hpp"
#include "data/pretokenize.hpp"
#include "data/tokenizer.hpp"

namespace data = trident::data;

namespace {

std::vector<std::string> pieces(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view piece : data::Pretokenizer::gpt2().pieces(text)) out.emplace_back(piece);
  return out;
}

using Strings = std::vector<std::string>;

// The 256 bytes in GPT-2's order, then `extra` tokens; merges by token text.
data::Bpe hand_vocabulary(const std::vector<std::pair<std::string, std::string>>& merge_texts) {
  std::vector<std::string> tokens;
  for (unsigned char b : data::gpt2_byte_order()) tokens.emplace_back(1, static_cast<char>(b));
  auto id = [&](const std::string& text) {
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == text) return static_cast<int>(i);
    tokens.push_back(text);
    return static_cast<int>(tokens.size() - 1);
  };
  std::vector<std::pair<int, int>> merges;
  for (const auto& [left, right] : merge_texts) {
    const int l = id(left), r = id(right);
    id(left + right);
    merges.emplace_back(l, r);
  }
  return data::Bpe(tokens, merges);
}

Strings token_texts(const data::Bpe& bpe, const std::string& text) {
  Strings out;
  for (data::TokenId id : bpe.encode(text)) out.push_back(bpe.tokens()[id]);
  return out;
}

std::string mixed_text(size_t bytes, unsigned seed) {
  const char* words[] = {"the", " model", "  ", "\n\n", " 2024", "'s", " naïve", " 東京", "\t", " don't", "!!", " ", "x²", "\u3000"};
  std::mt19937 rng(seed);
  std::string text;
  while (text.size() < bytes) text += words[rng() % (sizeof words / sizeof words[0])];
  return text;
}

struct TempDir {
  std::string path;
  TempDir() {
    char pattern[] = "/tmp/trident-bpe.XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(bpe)

BOOST_AUTO_TEST_CASE(pretokenize_words_and_spaces) {
  BOOST_TEST(pieces("Hello world") == (Strings{"Hello", " world"}));
  BOOST_TEST(pieces("a  b") == (Strings{"a", " ", " b"}));           // the last space goes with the word
  BOOST_TEST(pieces("a\n\n b") == (Strings{"a", "\n\n", " b"}));
  BOOST_TEST(pieces("a\nb") == (Strings{"a", "\n", "b"}));           // one non-space character: \s+
  BOOST_TEST(pieces("end   ") == (Strings{"end", "   "}));           // a run at the end stays whole
  BOOST_TEST(pieces("a \n") == (Strings{"a", " \n"}));
  BOOST_TEST(pieces(" ") == (Strings{" "}));
  BOOST_TEST(pieces("").empty());
}

BOOST_AUTO_TEST_CASE(pretokenize_digits_punctuation_contractions) {
  BOOST_TEST(pieces("in 2024, 42") == (Strings{"in", " 2024", ",", " 42"}));
  BOOST_TEST(pieces("v2.0") == (Strings{"v", "2", ".", "0"}));
  BOOST_TEST(pieces("don't we'll they've I'm") ==
             (Strings{"don", "'t", " we", "'ll", " they", "'ve", " I", "'m"}));
  BOOST_TEST(pieces("I'M") == (Strings{"I", "'", "M"}));  // contractions are lower case only
  BOOST_TEST(pieces("x!?' y") == (Strings{"x", "!?'", " y"}));
  BOOST_TEST(pieces(" ...") == (Strings{" ..."}));
}

BOOST_AUTO_TEST_CASE(pretokenize_non_ascii) {
  BOOST_TEST(pieces("naïve café 東京") == (Strings{"naïve", " café", " 東京"}));
  BOOST_TEST(pieces("x² ½") == (Strings{"x", "²", " ½"}));  // ² and ½ are numbers (No)
  BOOST_TEST(pieces("a\u3000\u3000b") == (Strings{"a", "\u3000", "\u3000", "b"}));  // \s, but only " " joins a word
  BOOST_TEST(pieces("a\u00a0b") == (Strings{"a", "\u00a0", "b"}));
  // Invalid UTF-8 (a lone continuation byte, a truncated sequence): one-byte characters of no class.
  BOOST_TEST(pieces("a\x80\xe6\x9d z") == (Strings{"a", "\x80\xe6\x9d", " z"}));
}

BOOST_AUTO_TEST_CASE(merge_order_by_rank) {
  // (a,b) before (b,c): "abc" -> ab, c; then (ab,c) joins them.
  BOOST_TEST(token_texts(hand_vocabulary({{"a", "b"}, {"b", "c"}}), "abc") == (Strings{"ab", "c"}));
  BOOST_TEST(token_texts(hand_vocabulary({{"b", "c"}, {"a", "b"}}), "abc") == (Strings{"a", "bc"}));
  BOOST_TEST(token_texts(hand_vocabulary({{"a", "b"}, {"b", "c"}, {"ab", "c"}}), "abc") == (Strings{"abc"}));
  // "bcab": (a,b) rank 0 first -> b c ab; then (b,c) -> bc ab; (bc,ab) has no merge.
  BOOST_TEST(token_texts(hand_vocabulary({{"a", "b"}, {"b", "c"}}), "bcab") == (Strings{"bc", "ab"}));
  // Every occurrence left to right, not overlapping.
  BOOST_TEST(token_texts(hand_vocabulary({{"a", "a"}}), "aaa") == (Strings{"aa", "a"}));
  BOOST_TEST(token_texts(hand_vocabulary({{"a", "a"}, {"aa", "aa"}}), "aaaaa") == (Strings{"aaaa", "a"}));
  // Merges never cross a piece: " b" is its own piece after "a".
  BOOST_TEST(token_texts(hand_vocabulary({{"a", " "}, {" ", "b"}}), "a b") == (Strings{"a", " b"}));
}

BOOST_AUTO_TEST_CASE(training_by_pair_frequency) {
  // Pieces "ab", " ab", " ab": (a,b) occurs 3 times, (' ',a) twice -> merge ab; then (' ',ab)
  // twice -> " ab"; then no pair occurs twice and training stops below the vocabulary asked for.
  const std::string text = "ab ab ab";
  const data::Bpe bpe = data::train_bpe({text}, 300);
  BOOST_TEST(bpe.vocab() == 258);
  BOOST_TEST(bpe.tokens()[256] == "ab");
  BOOST_TEST(bpe.tokens()[257] == " ab");
  BOOST_TEST(bpe.encode(text).size() == 3u);
  // Ties go to the pair of lower ids: (a,b) and (c,d) both occur twice; 'a' < 'c'.
  const data::Bpe tie = data::train_bpe({std::string("abab cdcd")}, 258);
  BOOST_TEST(tie.tokens()[256] == "ab");
  BOOST_TEST(tie.tokens()[257] == "cd");
  // The vocabulary asked for bounds it; the first 256 tokens are the bytes in GPT-2's order.
  const data::Bpe small = data::train_bpe({mixed_text(20000, 1)}, 260);
  BOOST_TEST(small.vocab() == 260);
  BOOST_TEST(small.tokens()[0] == "!");
  BOOST_TEST(small.tokens()[188] == std::string(1, '\0'));
  BOOST_TEST(data::train_bpe({std::string()}, 1024).vocab() == 256);  // empty input: bytes only
  BOOST_CHECK_THROW(data::train_bpe({text}, 255), std::invalid_argument);
  BOOST_CHECK_THROW(data::train_bpe({text}, data::kMaxVocab + 1), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(gpt2_symbols_and_files) {
  BOOST_TEST(data::bytes_to_symbols(" ") == "\u0120");   // Ġ
  BOOST_TEST(data::bytes_to_symbols("\n") == "\u010a");  // Ċ
  BOOST_TEST(data::bytes_to_symbols("a!") == "a!");
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  BOOST_TEST(data::symbols_to_bytes(data::bytes_to_symbols(all)) == all);
  BOOST_CHECK_THROW(data::symbols_to_bytes(" "), std::invalid_argument);  // a raw space is no symbol

  TempDir dir;
  const data::Bpe trained = data::train_bpe({mixed_text(50000, 2)}, 400);
  data::write_gpt2_files(trained, dir.path);
  std::ifstream merges(dir.path + "/vocab.bpe");
  std::string first;
  std::getline(merges, first);
  BOOST_TEST(first == "#version: 0.2");
  const data::Bpe read = data::read_gpt2_files(dir.path);
  BOOST_TEST(read.tokens() == trained.tokens());
  BOOST_TEST(read.merges() == trained.merges());
  const std::string text = mixed_text(30000, 3);
  BOOST_TEST(read.encode(text) == trained.encode(text));
}

BOOST_AUTO_TEST_CASE(malformed_files_are_named) {
  TempDir dir;
  data::write_gpt2_files(data::train_bpe({mixed_text(5000, 4)}, 300), dir.path);
  { std::ofstream(dir.path + "/encoder.json") << "{\"a\": 0, \"b\": 0}"; }
  try {
    data::read_gpt2_files(dir.path);
    BOOST_FAIL("a duplicate id was accepted");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("encoder.json") != std::string::npos);
  }
  // Through the JSON library (core/json.hpp), its errors ours: the file, the byte, what to give.
  auto message = [&](const std::string& text) -> std::string {
    { std::ofstream(dir.path + "/encoder.json") << text; }
    try {
      data::read_gpt2_files(dir.path);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "accepted";
  };
  const std::string truncated = message("{\"a\": 0,");
  BOOST_TEST(truncated.find("/encoder.json: ") != std::string::npos, truncated);
  BOOST_TEST(truncated.find("at byte 9; give GPT-2's encoder.json format") != std::string::npos, truncated);
  for (const char* bad : {"{\"a\": -1}", "{\"a\": \"x\"}", "{\"a\": 1.5}", "[0, 1]"})
    BOOST_TEST(message(bad).find("give GPT-2's encoder.json format") != std::string::npos, bad << ": " << message(bad));
  BOOST_CHECK_THROW(data::read_gpt2_files(dir.path + "/missing"), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(round_trip_text_binary_invalid_utf8) {
  const data::Bpe bpe = data::train_bpe({mixed_text(100000, 5)}, 700);
  std::mt19937 rng(6);
  std::string binary(200000, '\0');
  for (char& c : binary) c = static_cast<char>(rng());
  const std::string invalid = "ok \xff\xfe \xc3\x28 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 end\xc3";
  for (const std::string& text : {mixed_text(80000, 7), binary, invalid, std::string(5000, ' '), std::string()}) {
    const std::vector<data::TokenId> ids = bpe.encode(text);
    BOOST_TEST(bpe.decode(ids.data(), ids.size()) == text);
  }
  BOOST_TEST(bpe.encode("").empty());
}

BOOST_AUTO_TEST_CASE(parallel_chunks_equal_one_serial_pass) {
  const std::string text = mixed_text(300000, 8) + std::string(3000, ' ') + "tail";
  const auto bpe = std::make_shared<data::Bpe>(data::train_bpe({text}, 600));
  const data::Tokenizer tokenizer(bpe, "bpe");
  const std::vector<data::TokenId> serial = bpe->encode(text);
  size_t calls = 0, last = 0, totals = 0;
  const std::vector<data::TokenId> chunked = tokenizer.encode(text, 4096, [&](size_t done, size_t total) {
    ++calls, last = done, totals = total;
  });
  BOOST_TEST(totals == text.size());
  BOOST_TEST(calls > 10u);  // many chunks: the text is larger than one
  BOOST_TEST(last == text.size());
  BOOST_TEST(chunked == serial);
  BOOST_TEST(tokenizer.decode(chunked) == text);
  // Cuts are piece boundaries of the serial scan: "a  b" is a, " ", " b" — never inside the last two.
  const data::Pretokenizer& gpt2 = data::Pretokenizer::gpt2();
  BOOST_TEST(gpt2.cuts("ab  cd", 1) == (std::vector<size_t>{0, 2, 3, 6}));
  BOOST_TEST(gpt2.cuts("ab  cd", 100) == (std::vector<size_t>{0, 6}));
  BOOST_TEST(gpt2.cuts("", 1).size() == 1u);  // {0}: no chunk
}

// Another pattern (Llama 3's, which groups digits by three and takes a newline run with the
// punctuation before it): the chunked encoding is still one serial pass, since the cuts come
// from the pattern's own scan.
BOOST_AUTO_TEST_CASE(any_pattern_chunks_equal_one_serial_pass) {
  const data::Pretokenizer llama3(
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  std::vector<std::string> got;
  for (std::string_view p : llama3.pieces("I'M 12345 ok.\n\nnext")) got.emplace_back(p);
  BOOST_TEST(got == (Strings{"I", "'M", " ", "123", "45", " ok", ".\n\n", "next"}));
  const std::string text = mixed_text(200000, 3) + ".\n\n" + mixed_text(5000, 4);
  std::vector<std::string> serial, chunked;
  for (std::string_view p : llama3.pieces(text)) serial.emplace_back(p);
  const std::vector<size_t> cuts = llama3.cuts(text, 777);
  BOOST_TEST(cuts.size() > 100u);
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    llama3.split(text, cuts[i], cuts[i + 1], [&](std::string_view p, bool) { chunked.emplace_back(p); });
  BOOST_TEST(chunked == serial);
  std::string joined;
  for (const std::string& p : serial) joined += p;
  BOOST_TEST(joined == text);  // the pieces cover the text
  BOOST_CHECK_THROW(data::Pretokenizer("(unclosed"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(tokenizer_record) {
  TempDir dir;
  BOOST_TEST(!data::read_tokenizer_record(dir.path).has_value());
  BOOST_TEST(data::Tokenizer::load(dir.path).kind() == "bytes");
  const data::Bpe bpe = data::train_bpe({mixed_text(20000, 9)}, 300);
  data::write_gpt2_files(bpe, dir.path);
  data::write_tokenizer_record(dir.path, {"bpe", bpe.vocab()});
  const data::Tokenizer loaded = data::Tokenizer::load(dir.path);
  BOOST_TEST(loaded.kind() == "bpe");
  BOOST_TEST(loaded.vocab() == 300);
  data::write_tokenizer_record(dir.path, {"bpe", 301});
  BOOST_CHECK_THROW(data::Tokenizer::load(dir.path), std::runtime_error);  // the record disagrees
  BOOST_TEST(data::data_directory("data/default/train.bin") == "data/default");
  BOOST_TEST(data::data_directory("train.bin") == ".");
  BOOST_TEST(data::data_directory("/d/shard_*.bin") == "/d");
}

BOOST_AUTO_TEST_SUITE_END()
