// Agreements over a group, on top of the Communicator interface: strings broadcast and
// gathered, an error one rank (or any rank) found thrown on every rank together, a verdict all
// ranks share, a file read once and broadcast. What the commands, the job set-up and the
// checkpoint code use to make every rank take the same branch (docs/ARCHITECTURE.md, "Errors").
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/file_util.hpp"

namespace trident::comm {

// root's text to every rank of the group.
void broadcast_string(Communicator& group, std::string& text, int root);
// Every rank contributes one string; every rank receives all of them, in rank order.
std::vector<std::string> all_gather_strings(Communicator& group, const std::string& mine);
// The lowest rank whose value equals rank `rank`'s (values: one per rank, as gathered): a color
// that groups the ranks of equal values.
int first_rank_with_same(const std::vector<std::string>& values, int rank);

// Rank `root` knows whether an error occurred (empty message = none); every rank of `group`
// learns it, and all throw the same UserError together.
void agree_on_error(Communicator& group, const std::string& message_on_root, int root);
// Any rank may have an error (empty = none): the lowest such rank's message, the same on every
// rank ("" if none). agree_on_first_error throws it as a UserError on every rank.
std::string first_error(Communicator& group, const std::string& mine);
void agree_on_first_error(Communicator& group, const std::string& mine);
// Whether `ok` holds on every rank of the group (the same answer everywhere).
bool all_true(Communicator& group, bool ok);

// Rank 0 reads `path` (at most max_bytes) and broadcasts its bytes. If rank 0 cannot read it,
// every rank throws the same UserError: "cannot read <what> '<path>': <reason>; <hint>".
std::string read_on_root_and_broadcast(Communicator& group, const std::string& path, const std::string& what,
                                       const std::string& hint, size_t max_bytes = kMaxConfigBytes);

}  // namespace trident::comm
