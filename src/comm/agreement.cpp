// Agreements over a group, through the Communicator interface alone: strings travel as 32-bit
// words (the interface's element type for a few values), padded to a whole word.
#include "comm/agreement.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/error.hpp"
#include "core/printable.hpp"

namespace trident::comm {
namespace {

size_t words_for(size_t bytes) { return (bytes + 3) / 4; }

}  // namespace

void broadcast_string(Communicator& group, std::string& text, int root) {
  int32_t length = static_cast<int32_t>(text.size());
  group.broadcast(&length, 1, DType::i32, root, Stream{}).wait();
  std::vector<int32_t> words(words_for(static_cast<size_t>(length)), 0);
  // An empty text has no words: memcpy's pointers must not be null even for 0 bytes (UBSan).
  if (group.rank() == root && !text.empty()) std::memcpy(words.data(), text.data(), text.size());
  group.broadcast(words.data(), words.size(), DType::i32, root, Stream{}).wait();
  text.assign(reinterpret_cast<const char*>(words.data()), static_cast<size_t>(length));
}

std::vector<std::string> all_gather_strings(Communicator& group, const std::string& mine) {
  const size_t size = static_cast<size_t>(group.size());
  const int32_t my_length = static_cast<int32_t>(mine.size());
  std::vector<int32_t> lengths(size);
  group.all_gather_values(&my_length, lengths.data(), 1, DType::i32, Stream{}).wait();
  // Every rank's text in a slot of the longest one's words.
  const size_t slot = words_for(static_cast<size_t>(*std::max_element(lengths.begin(), lengths.end())));
  std::vector<int32_t> words(slot, 0), all(slot * size);
  if (!mine.empty()) std::memcpy(words.data(), mine.data(), mine.size());
  if (slot > 0) group.all_gather_values(words.data(), all.data(), slot, DType::i32, Stream{}).wait();
  std::vector<std::string> result(size);
  for (size_t r = 0; r < size; ++r)
    result[r].assign(reinterpret_cast<const char*>(all.data() + r * slot), static_cast<size_t>(lengths[r]));
  return result;
}

int first_rank_with_same(const std::vector<std::string>& values, int rank) {
  const auto same = std::find(values.begin(), values.end(), values.at(static_cast<size_t>(rank)));
  return static_cast<int>(same - values.begin());
}

void agree_on_error(Communicator& group, const std::string& message_on_root, int root) {
  std::string message = message_on_root;
  broadcast_string(group, message, root);
  if (!message.empty()) fatal_all(message);
}

std::string first_error(Communicator& group, const std::string& mine) {
  // The lowest rank with a message: the maximum of −rank over those that have one.
  int32_t first = mine.empty() ? -group.size() : -group.rank();
  group.all_reduce(&first, 1, DType::i32, Op::Max, Stream{}).wait();
  if (first == -group.size()) return "";
  std::string message = mine;
  broadcast_string(group, message, -first);
  return message;
}

void agree_on_first_error(Communicator& group, const std::string& mine) {
  const std::string message = first_error(group, mine);
  if (!message.empty()) fatal_all(message);
}

bool all_true(Communicator& group, bool ok) {
  int32_t failed = ok ? 0 : 1;
  group.all_reduce(&failed, 1, DType::i32, Op::Max, Stream{}).wait();
  return failed == 0;
}

std::string read_on_root_and_broadcast(Communicator& group, const std::string& path, const std::string& what,
                                       const std::string& hint, size_t max_bytes) {
  std::string text, why, error;
  if (group.rank() == 0 && !read_file(path, max_bytes, text, why))
    error = "cannot read " + what + " '" + printable(path) + "': " + why + "; " + hint;
  agree_on_error(group, error, 0);
  broadcast_string(group, text, 0);
  return text;
}

}  // namespace trident::comm
