// Token files: opened by type (a FIFO is refused, not waited on) and read with pread, so that a
// file truncated or rewritten under a running job is reported naming it (issue 20), not SIGBUS.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/token_data.hpp"

namespace data = trident::data;

namespace {

struct TokenDir {
  std::string dir;
  TokenDir() {
    char pattern[] = "/tmp/trident-tokens.XXXXXX";
    dir = mkdtemp(pattern);
  }
  ~TokenDir() { std::filesystem::remove_all(dir); }
  // Tokens i % 200, or with a vocabulary over 65,536 (uint32 shards) i * 977 % vocab.
  std::string shard(const std::string& name, int count, int vocab = 256) const {
    std::vector<data::TokenId> tokens(count);
    for (int i = 0; i < count; ++i) tokens[i] = vocab > 65536 ? data::TokenId(int64_t(i) * 977 % vocab) : i % 200;
    data::write_llmc_tokens(dir + "/" + name, tokens, vocab);
    return dir + "/" + name;
  }
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string open_error(const std::string& pattern) {
  try {
    data::TokenData tokens(pattern, data::TokenFormat::Llmc, 256);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(token_data)

BOOST_AUTO_TEST_CASE(reads_across_shards) {
  TokenDir d;
  d.shard("a.bin", 300);
  d.shard("b.bin", 100);
  const data::TokenData tokens(d.dir + "/*.bin", data::TokenFormat::Llmc, 256);
  BOOST_TEST(tokens.size() == 400);
  std::vector<int32_t> out(10);
  BOOST_TEST(tokens.read(295, 10, out.data()).empty());
  const std::vector<int32_t> expected = {95, 96, 97, 98, 99, 0, 1, 2, 3, 4};
  BOOST_TEST(out == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(fifo_and_directory_are_refused_at_once) {
  TokenDir d;
  const std::string fifo = d.dir + "/train.fifo";
  BOOST_REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const std::string fifo_error = open_error(fifo);  // returns: O_NONBLOCK, then fstat
  BOOST_TEST(contains(fifo_error, "token file '" + fifo + "': is a FIFO (named pipe), not a regular file"), fifo_error);
  const std::string dir_error = open_error(d.dir);
  BOOST_TEST(contains(dir_error, "is a directory; give token files"), dir_error);
}

BOOST_AUTO_TEST_CASE(truncated_under_the_reader_is_reported_naming_the_file) {
  TokenDir d;
  const std::string path = d.shard("train.bin", 5000);
  const data::TokenData tokens(path, data::TokenFormat::Llmc, 256);
  BOOST_REQUIRE(truncate(path.c_str(), 2048) == 0);  // 1024 header bytes + 512 tokens left
  std::vector<int32_t> out(100);
  BOOST_TEST(tokens.read(100, 100, out.data()).empty());  // still there
  const std::string problem = tokens.read(4000, 100, out.data());
  BOOST_TEST(contains(problem, "token file '" + path + "': changed under the job: it was 11024 bytes when opened and is 2048 now"),
             problem);
}

BOOST_AUTO_TEST_CASE(rewritten_with_tokens_outside_the_vocabulary_is_reported) {
  TokenDir d;
  const std::string path = d.shard("train.bin", 1000);
  const data::TokenData tokens(path, data::TokenFormat::Llmc, 256);
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(1024 + 2 * 10);
    const uint16_t outside = 60000;
    file.write(reinterpret_cast<const char*>(&outside), sizeof outside);
  }
  std::vector<int32_t> out(20);
  const std::string problem = tokens.read(0, 20, out.data());
  BOOST_TEST(contains(problem, "changed under the job: token 60000 at position 10 is not below the vocabulary size 256"),
             problem);
}

// Llama 3's vocabulary needs 32-bit ids: shards of llm.c's Llama 3 kind (magic 20240801,
// version 7, uint32), read beside 16-bit ones in one stream, each as its header says.
BOOST_AUTO_TEST_CASE(wide_and_narrow_shards_in_one_stream) {
  TokenDir d;
  const int vocab = 128256;
  d.shard("a.bin", 300);  // 16-bit (its ids fit the small vocabulary)
  const std::string wide = d.shard("b.bin", 500, vocab);
  int32_t header[3];
  std::ifstream(wide, std::ios::binary).read(reinterpret_cast<char*>(header), sizeof header);
  BOOST_TEST(header[0] == data::kLlmcWideTokensMagic);
  BOOST_TEST(header[1] == data::kLlmcWideTokensVersion);
  BOOST_TEST(std::filesystem::file_size(wide) == 1024u + 4u * 500u);
  const data::TokenData tokens(d.dir + "/*.bin", data::TokenFormat::Llmc, vocab);
  BOOST_REQUIRE_EQUAL(tokens.size(), 800);
  std::vector<int32_t> out(800);
  BOOST_TEST(tokens.read(0, 800, out.data()).empty());
  bool equal = true;
  for (int i = 0; i < 800; ++i) equal = equal && out[i] == (i < 300 ? i % 200 : int32_t(int64_t(i - 300) * 977 % vocab));
  BOOST_TEST(equal);
  BOOST_TEST(*std::max_element(out.begin(), out.end()) > 65535);
  BOOST_CHECK_THROW(data::TokenData(wide, data::TokenFormat::Llmc, 65536), std::runtime_error);  // ids beyond it
}

BOOST_AUTO_TEST_SUITE_END()
