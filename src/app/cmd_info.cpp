// `trident --help` and `trident --version`.

#include <string>

#include "comm/world.hpp"
#include "kernels/build_info.hpp"
#include "core/version.hpp"
#include "app/commands.hpp"

namespace trident {

std::string main_help() {
  return "trident " TRIDENT_VERSION
         " - GPT training with tensor x pipeline x data parallelism, one binary on every rank\n"
         "\n"
         "usage: mpirun -np N trident COMMAND DECK [options] [--section.key=value ...]\n"
         "       srun trident COMMAND DECK [...]\n"
         "\n"
         "commands:\n"
         "  train     set up and train the model of DECK (--check: validate deck, layout and run\n"
         "            directory against the job and stop without writing)\n"
         "  eval      validation loss of the deck's model (model.init or random): val_loss <value>\n"
         "  generate  text from the deck's model (model.init, --checkpoint=FILE): --prompt=TEXT\n"
         "  prepare   OUT_DIR TEXT_FILE... [--tokenizer=bytes|bpe --vocab=N|gpt2 --vocab-files=DIR]: token shards\n"
         "  export    DECK OUT: the deck's model or a checkpoint's as an llm.c file or a Hugging Face directory\n"
         "  bench     DECK [--gemm]: training-step speed on one rank (--gemm: GEMM ceiling)\n"
         "  commbench DECK: our collectives vs MPI's per algorithm and level (nccl-tests' table)\n"
         "  inspect   CHECKPOINT.h5: step, layout, tensors and checksum verification (exit 1: corrupt)\n"
         "  doctor    RUN_DIR...: the troubleshooting rules over metrics.h5, with figures and remedies\n"
         "  layout    print the rank table (host, node, rack, tensor/data/pipeline coordinates)\n"
         "            and the levels (node, rack, cross-rack) each kind of parallel group spans\n"
         "  plan      DECK [--gpus=N] [--hardware=PROFILE]: memory, step time and the best layouts,\n"
         "            in one process, before a GPU hour is spent (docs/PLANNER.md)\n"
         "  version   version and build: MPI, CUDA, cuBLASLt, NCCL\n"
         "  help      this text; `trident help deck`: the deck reference in Markdown\n"
         "\n"
         "`trident COMMAND --help` lists every deck key with its default and meaning; any key\n"
         "can be overridden on the command line: --parallel.tensor=2.\n"
         "Exit status: 0 success, 1 a fault on some rank (job aborted) or a run that diverged,\n"
         "2 bad input, 3 stopped by SIGUSR1/SIGTERM (after writing a full checkpoint once training started).";
}

std::string version_text() {
  std::string mpi = comm::mpi_library_version();
  mpi = mpi.substr(0, mpi.find_first_of(",\n"));
  return "trident " TRIDENT_VERSION "\nMPI: " + mpi + "\n" + kernels::accelerator_summary();
}

}  // namespace trident
