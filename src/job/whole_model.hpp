// The whole model on one rank, for the commands that read or write it whole (`trident generate`,
// `trident export`): the deck's (random, or model.init's file or directory) or a checkpoint's of
// any layout (the reader takes every element: resharding onto one rank). Each is checked against
// the memory it needs first (exit 2 with the figures).
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "job/job.hpp"
#include "model/config.hpp"

namespace trident {

struct WholeModel {
  model::GptConfig config;
  std::vector<float> params;  // (num_parameters(config)) in our order (model/params.hpp)
};

// `command` names the command in the messages.
WholeModel whole_model_from_deck(comm::Communicator& world, const Job& job, const std::string& command);
WholeModel whole_model_from_checkpoint(comm::Communicator& world, const Job& job, const std::string& path,
                                       const std::string& command);

}  // namespace trident
