// The watchdog's message.
#include "comm/watchdog.hpp"

#include <cstdio>

namespace trident::comm {

std::string watchdog_message(const std::string& operation, const std::string& group, int group_size,
                             double timeout_s, const std::vector<std::pair<int, int>>& peers) {
  std::string waiting;
  for (const auto& [peer, world] : peers)
    waiting += (waiting.empty() ? "" : ", ") + std::to_string(peer) + " (world rank " + std::to_string(world) + ")";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
  return "watchdog: " + operation + " on the " + group + " group (" + std::to_string(group_size) +
         " ranks) has waited " + seconds + " s (comm.timeout_s) for rank(s) " + waiting +
         " of the group; aborting the job so that no rank hangs";
}

}  // namespace trident::comm
