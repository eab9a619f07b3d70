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

// A checkpoint's model is its own, not the deck's: a forward over the deck's windows and tokens
// must fit it — a GPT-2's position table has max_seq_len rows, and a token at or past its
// vocabulary has no row of wte (nor a logit). Checked before its parameters are read.
void require_deck_fits_checkpoint(const Job& job, const model::GptConfig& config, const std::string& checkpoint) {
  const std::string model = "the model of checkpoint '" + printable(checkpoint) + "'";
  const int T = job.settings.train.seq_len;
  if (!model::is_llama(config) && T > config.max_seq_len)
    fatal_all(model + " has a context of " + std::to_string(config.max_seq_len) + " positions, fewer than " +
              job.record.cite("model.seq_len") + "; evaluate with model.seq_len = " +
              std::to_string(config.max_seq_len) + " or less");
  if (job.settings.model.vocab > config.vocab)
    fatal_all(model + " has a vocabulary of " + std::to_string(config.vocab) + " tokens, fewer than " +
              job.record.cite("model.vocab") + ": the data's tokens may have no row in it; evaluate data of its "
              "tokenizer with model.vocab = " + std::to_string(config.vocab));
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
  if (use.kind == WholeModelUse::forward) require_deck_fits_checkpoint(job, m.config, path);
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
