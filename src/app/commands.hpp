// The subcommands. Each returns the process exit status; user errors are thrown as UserError.
// `world`: the job's control communicator over every rank (comm/world.hpp), made by main().
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace trident {

int run_train(comm::Communicator& world, const std::vector<std::string>& args);
int run_layout(comm::Communicator& world, const std::vector<std::string>& args);
int run_prepare(comm::Communicator& world, const std::vector<std::string>& args);
int run_eval(comm::Communicator& world, const std::vector<std::string>& args);
int run_generate(comm::Communicator& world, const std::vector<std::string>& args);
int run_export(comm::Communicator& world, const std::vector<std::string>& args);
int run_bench(comm::Communicator& world, const std::vector<std::string>& args);
int run_commbench(comm::Communicator& world, const std::vector<std::string>& args);
int run_inspect(comm::Communicator& world, const std::vector<std::string>& args);
int run_doctor(comm::Communicator& world, const std::vector<std::string>& args);
int run_plan(comm::Communicator& world, const std::vector<std::string>& args);
std::string version_text();
std::string main_help();

}  // namespace trident
