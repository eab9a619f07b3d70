// `trident inspect FILE.h5`: what a checkpoint holds (step, layout, every tensor with its shape)
// and whether every checksum verifies. Exit status 0: sound; 1: corrupt; 2: no such file, or not a file.
// Runs on any number of ranks (each verifies its share of every dataset).
#include <hdf5.h>

#include <cstdio>
#include <stdexcept>

#include "ckpt/checkpoint_file.hpp"
#include "ckpt/datasets.hpp"
#include "core/error.hpp"
#include "core/file_util.hpp"
#include "core/printable.hpp"
#include "core/log.hpp"
#include "comm/agreement.hpp"
#include "app/commands.hpp"

namespace trident {
namespace {

const char* kInspectUsage =
    "usage: trident inspect CHECKPOINT.h5\n"
    "Prints the checkpoint's step, layout and tensors, and verifies every checksum.\n"
    "Exit status 0 when the file is sound, 1 when it is corrupt or incomplete.";

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + ")";
}

// Who wrote it and what it follows (docs/CHECKPOINTS.md, Lineage); read after the metadata
// checksum verified, so these lines are what was written.
std::string lineage_text(const ckpt::Metadata& m) {
  if (m.format_version < 2)
    return "lineage: not recorded (format version 1: written before run ids; metadata not checksummed)\n";
  return "lineage: run " + m.run_id + ", branch " + m.branch + ", parent " +
         (m.parent.empty() ? std::string("none (the run started at step 0)") : m.parent) + "\nid: " + m.id() +
         "\nmetadata checksum: verified\n";
}

std::string describe(const ckpt::Metadata& m) {
  char line[512];
  std::snprintf(line, sizeof line,
                "kind %s, step %lld, tokens seen %lld, optimizer updates %lld, skipped steps %lld\n"
                "written %s by trident %s, layout tensor %lld x pipeline %lld x data %lld%s, stage layers %s\n"
                "model: layers %d, heads %d, hidden %d, vocab %d (padded %d), seq_len %d\n",
                m.kind.c_str(), static_cast<long long>(m.step), static_cast<long long>(m.tokens_seen),
                static_cast<long long>(m.optimizer_updates), static_cast<long long>(m.skipped_steps),
                m.written_at.c_str(), m.version.c_str(), static_cast<long long>(m.tensor),
                static_cast<long long>(m.pipeline), static_cast<long long>(m.data), m.zero ? (" (ZeRO-" + std::to_string(m.zero) + ")").c_str() : "",
                m.stage_layers.c_str(), m.model.layers, m.model.heads, m.model.channels, m.model.vocab,
                m.model.padded_vocab, m.model.max_seq_len);
  std::string text = line;
  text += "precision " + m.precision + " (parameters stored as fp32 master weights)";
  if (m.loss_scale > 0) {
    std::snprintf(line, sizeof line, ", loss scale %g (%lld good steps, hysteresis left %lld)", m.loss_scale,
                  static_cast<long long>(m.loss_scale_good_steps), static_cast<long long>(m.loss_scale_hysteresis_left));
    text += line;
  }
  text += "\n" + lineage_text(m);
  for (const auto& [name, shape] : ckpt::checkpoint_datasets(m.model, m.kind)) {
    std::snprintf(line, sizeof line, "  %-24s %s\n", name.c_str(), shape_text(shape).c_str());
    text += line;
  }
  return text;
}

}  // namespace

int run_inspect(comm::Communicator& world, const std::vector<std::string>& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    print0(kInspectUsage);
    return kExitOk;
  }
  if (args.size() != 1) fatal_all(std::string("inspect takes one checkpoint file\n") + kInspectUsage);
  const std::string path = args[0];
  // By type before HDF5 opens it: a directory is not "missing", and a FIFO would block the read.
  const std::string not_file = world.rank() == 0 ? regular_file_problem(path) : "";
  std::string missing = not_file.empty() ? "" : "checkpoint '" + printable(path) + "': " + not_file +
                                                    "; give a checkpoint file (RUN_DIR/checkpoints/step-*.h5)";
  comm::agree_on_error(world, missing, 0);
  std::string header;
  if (world.rank() == 0) {
    try {
      header = describe(ckpt::read_metadata(path));
    } catch (const std::runtime_error& e) {
      header = "";
      missing = e.what();
    }
  }
  comm::broadcast_string(world, missing, 0);
  print0(path + ":");
  if (!missing.empty()) {
    print0("CORRUPT: " + missing);
    return kExitFault;
  }
  print0(header);
  const std::string problem = ckpt::verify_checkpoint(path, world);
  print0(problem.empty() ? "checksums: all verified" : "CORRUPT: " + problem);
  return problem.empty() ? kExitOk : kExitFault;
}

}  // namespace trident
