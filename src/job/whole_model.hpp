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

// The checkpoint `checkpoint` names when it is not empty, else the deck's model; a checkpoint
// and model.init both given is a UserError. `command` names the command in the messages.
// decode_positions > 0: the model is for a decoder of that many positions (trident generate),
// checked as one (check_decoder_fits), else as the whole model's forward and backward.
WholeModel whole_model(comm::Communicator& world, const Job& job, const std::string& checkpoint,
                       const std::string& command, int decode_positions = 0);

}  // namespace trident
