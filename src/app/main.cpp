// trident: one executable on every rank; main() only starts MPI and dispatches the subcommand.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "comm/world.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/mpi_util.hpp"
#include "deck/doc.hpp"
#include "job/failures.hpp"
#include "job/threads.hpp"
#include "app/commands.hpp"

namespace {

int dispatch(trident::comm::Communicator& world, const std::vector<std::string>& args) {
  using namespace trident;
  const std::string command = args.empty() ? "help" : args.front();
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  if (command == "help" && rest.size() == 1 && rest[0] == "deck") {
    print0(deck::markdown_reference());
    return kExitOk;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    print0(main_help());
    return kExitOk;
  }
  if (command == "version" || command == "--version") {
    print0(version_text());
    return kExitOk;
  }
  if (command == "train") return run_train(world, rest);
  if (command == "layout") return run_layout(world, rest);
  if (command == "prepare") return run_prepare(world, rest);
  if (command == "eval") return run_eval(world, rest);
  if (command == "export") return run_export(world, rest);
  if (command == "generate") return run_generate(world, rest);
  if (command == "bench") return run_bench(world, rest);
  if (command == "commbench") return run_commbench(world, rest);
  if (command == "inspect") return run_inspect(world, rest);
  if (command == "doctor") return run_doctor(world, rest);
  if (command == "plan") return run_plan(world, rest);
  fatal_all("unknown command '" + command + "'; commands are train, eval, generate, prepare, export, bench, commbench, inspect, doctor, layout, plan, help, version "
            "(trident --help)");
}

}  // namespace

int main(int argc, char** argv) {
  trident::settle_openmp_threads(argv);  // before OpenMP's first use and MPI: it may run this program again
  trident::install_terminate_handler();
  trident::MpiSession mpi(&argc, &argv);
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const std::unique_ptr<trident::comm::Communicator> world = trident::comm::make_world();
    return dispatch(*world, args);
  } catch (const trident::UserError& e) {
    if (trident::world_rank() == 0) std::fprintf(stderr, "error: %s\n", e.what());
    return trident::kExitUserError;
  } catch (const trident::RunFailure& e) {
    if (trident::world_rank() == 0) std::fprintf(stderr, "error: %s\n", e.what());
    return e.status();
  } catch (...) {  // oneDNN, an allocation, a library: a fault of this rank, described
    fatal_one(trident::describe_exception(std::current_exception()));
  }
}
