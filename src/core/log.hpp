// Console output conventions: rank 0 speaks for the job; warnings are marked as such.
#pragma once

#include <string>

namespace trident {

void print0(const std::string& line);  // stdout, rank 0 only (every rank when MPI is not up)
void warn0(const std::string& line);   // stderr "warning: ...", rank 0 only

}  // namespace trident
