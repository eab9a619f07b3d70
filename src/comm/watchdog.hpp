// The watchdog's verdict in words, the same for every communicator (MPI or NCCL): which
// operation on which group waited how long for which peers. The caller ends the job with it
// (fatal_one) after whatever its backend needs first (ncclCommAbort).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace trident::comm {

// peers: (rank in the group, world rank) of each peer still awaited.
std::string watchdog_message(const std::string& operation, const std::string& group, int group_size,
                             double timeout_s, const std::vector<std::pair<int, int>>& peers);

}  // namespace trident::comm
