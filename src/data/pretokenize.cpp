// Pre-tokenising by PCRE2.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/pretokenize.hpp"

#include <pcre2.h>

#include <stdexcept>

namespace trident::data {
namespace {

pcre2_code* compiled(const std::shared_ptr<void>& code) { return static_cast<pcre2_code*>(code.get()); }

// Calls on_piece(b, e, matched) for the pieces of text[begin, end) (see split), the scan from `begin`.
template <class OnPiece>
void scan(pcre2_code* code, std::string_view text, size_t begin, size_t end, OnPiece&& on_piece) {
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(pcre2_match_data_create(1, nullptr),
                                                                       pcre2_match_data_free);
  if (!match) throw std::bad_alloc();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (size_t at = begin; at < end;) {
    // PCRE2_NOTEMPTY: a pattern that can match nothing never stalls the scan.
    const int rc = pcre2_match(code, subject, text.size(), at, PCRE2_NOTEMPTY, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return on_piece(at, end, false);  // the rest lies between matches
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw std::runtime_error("pre-tokenising at byte " + std::to_string(at) + ": " +
                               reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    const size_t from = span[0] < end ? span[0] : end;
    if (from > at) on_piece(at, from, false);  // text no match took: a piece of its own
    if (from == end) return;
    on_piece(from, span[1], true);
    at = span[1];
  }
}

}  // namespace

std::string literal_pattern(const std::string& text) {
  std::string out = "\\Q";
  for (size_t at = 0; at < text.size();) {
    const size_t e = text.find("\\E", at);
    if (e == std::string::npos) {
      out += text.substr(at);
      break;
    }
    out += text.substr(at, e - at) + "\\E\\\\E\\Q";  // close the quote, a literal \E, quote again
    at = e + 2;
  }
  return out + "\\E";
}

Pretokenizer::Pretokenizer(const std::string& pattern) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::invalid_argument("the pre-tokenising pattern does not compile: " +
                                std::string(reinterpret_cast<const char*>(message)) + " at character " +
                                std::to_string(offset));
  }
  code_ = std::shared_ptr<void>(code, [](void* c) { pcre2_code_free(static_cast<pcre2_code*>(c)); });
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // where the JIT is missing, pcre2_match interprets: same pieces
}

const Pretokenizer& Pretokenizer::gpt2() {
  static const Pretokenizer gpt2(kGpt2Pattern);
  return gpt2;
}

void Pretokenizer::split(std::string_view text, size_t begin, size_t end,
                         const std::function<void(std::string_view, bool)>& piece) const {
  scan(compiled(code_), text, begin, end, [&](size_t b, size_t e, bool matched) { piece(text.substr(b, e - b), matched); });
}

std::vector<std::string_view> Pretokenizer::pieces(std::string_view text) const {
  std::vector<std::string_view> all;
  scan(compiled(code_), text, 0, text.size(), [&](size_t b, size_t e, bool) { all.push_back(text.substr(b, e - b)); });
  return all;
}

std::vector<size_t> Pretokenizer::cuts(std::string_view text, size_t bytes) const {
  std::vector<size_t> cuts = {0};
  scan(compiled(code_), text, 0, text.size(), [&](size_t, size_t e, bool) {
    if (e >= cuts.back() + bytes && e < text.size()) cuts.push_back(e);
  });
  cuts.push_back(text.size());
  if (text.empty()) cuts.pop_back();  // {0}: no chunk
  return cuts;
}

}  // namespace trident::data
