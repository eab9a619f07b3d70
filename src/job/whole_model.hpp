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

// What a command does with the whole model, which its memory check counts before the parameters
// are read (job/memory_plan.hpp): a model of a micro-batch's forward (eval:
// check_whole_model_fits), a decoder of `positions` positions (generate: check_decoder_fits), or
// the parameters in host memory alone, nothing on a device (export: check_parameters_fit_host).
struct WholeModelUse {
  enum Kind { forward, decode, host_only } kind = forward;
  int positions = 0;  // decode
};

// The checkpoint `checkpoint` names when it is not empty, else the deck's model; a checkpoint
// and model.init both given is a UserError. `command` names the command in the messages.
WholeModel whole_model(comm::Communicator& world, const Job& job, const std::string& checkpoint,
                       const std::string& command, WholeModelUse use = {});

}  // namespace trident
