// Text that came from a user or a file (deck values, paths, file contents), made safe to echo in
// a one-line error message: every byte visible, nothing that moves the cursor or hides, bounded.
#pragma once

#include <cstddef>
#include <string>

namespace trident {

// The longest a value echoed in a message may be before it is cut: a value is quoted so the user
// can find it, and 120 bytes are enough for that; a megabyte value is not a message.
constexpr size_t kEchoBytes = 120;

// `text` with control characters, invalid UTF-8 and invisible characters (a byte-order mark,
// zero-width and direction marks) escaped as \xNN or \uNNNN, and, when longer than `max_bytes`,
// cut at a character boundary with "… (N bytes)" appended, N the length of the original.
std::string printable(const std::string& text, size_t max_bytes = kEchoBytes);

// A whole error message: the same escapes except that line breaks stay (usage texts span lines),
// bounded at a few kilobytes. What every error path applies last, so no NUL ends a message early
// and no raw binary reaches the terminal.
std::string printable_message(const std::string& message);

// The byte offset of the first UTF-8 encoding error in `text`, or std::string::npos.
size_t invalid_utf8_at(const std::string& text);

}  // namespace trident
