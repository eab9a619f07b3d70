// The whole model from the deck or from a checkpoint.
#include "job/whole_model.hpp"

#include <stdexcept>

#include "ckpt/checkpoint_file.hpp"
#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/printable.hpp"
#include "job/memory_plan.hpp"
#include "job/model_setup.hpp"

namespace trident {
namespace {

// The memory the command will use with the model, before its parameters exist.
void check_fits(comm::Communicator& world, const Job& job, const model::GptConfig& config, const std::string& command,
                const WholeModelUse& use) {
  switch (use.kind) {
    case WholeModelUse::decode:
      return check_decoder_fits(world, job.device, job.settings, job.record, config, use.positions);
    case WholeModelUse::host_only:
      return check_parameters_fit_host(world, job.settings, job.record, config, command);
    case WholeModelUse::forward:
      return check_whole_model_fits(world, job.device, job.settings, job.record, config, command);
  }
}

WholeModel whole_model_from_checkpoint(comm::Communicator& world, const Job& job, const std::string& path,
                                       const std::string& command, const WholeModelUse& use) {
  const std::string not_file = regular_file_problem(path);
  if (!not_file.empty())
    fatal_all("checkpoint '" + printable(path) + "': " + not_file + "; give a checkpoint file (RUN_DIR/checkpoints/step-*.h5)");
  WholeModel m;
  try {
    m.config = ckpt::read_metadata(path).model;
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + "; give a checkpoint written by trident train (trident inspect checks one)");
  }
  check_fits(world, job, m.config, command, use);
  m.params.resize(static_cast<size_t>(model::num_parameters(m.config)));
  ckpt::StateView state;
  state.config = m.config;
  state.params = m.params.data();
  const std::string problem = ckpt::read_checkpoint(path, world, state);
  if (!problem.empty()) fatal_all("checkpoint '" + printable(path) + "': " + problem + "; trident inspect says more");
  return m;
}

WholeModel whole_model_from_deck(comm::Communicator& world, const Job& job, const std::string& command,
                                 const WholeModelUse& use) {
  WholeModel m;
  m.config = model_config(job.settings.model, job.record);  // a model file's header checked against its size
  check_fits(world, job, m.config, command, use);
  m.params = initial_parameters(job.settings, m.config);
  return m;
}

}  // namespace

WholeModel whole_model(comm::Communicator& world, const Job& job, const std::string& checkpoint,
                       const std::string& command, WholeModelUse use) {
  if (checkpoint.empty()) return whole_model_from_deck(world, job, command, use);
  if (job.settings.model.from_file())
    fatal_all("command line: give the model as --model.init=FILE or --checkpoint=FILE, not both");
  return whole_model_from_checkpoint(world, job, checkpoint, command, use);
}

}  // namespace trident
