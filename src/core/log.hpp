// Console output conventions: rank 0 speaks for the job; warnings are marked as such.
#pragma once

#include <string>

namespace trident {

void print0(const std::string& line);  // stdout, rank 0 only (every rank when MPI is not up)
void warn0(const std::string& line);   // stderr "warning: ...", rank 0 only

// "1 rank", "8 ranks": a count and its noun, plural with an s where it is not 1.
inline std::string count_of(long long n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace trident
