// The subcommands. Each returns the process exit status; user errors are thrown as UserError.
#pragma once

#include <string>
#include <vector>

namespace trident {

int run_train(const std::vector<std::string>& args);
int run_layout(const std::vector<std::string>& args);
int run_prepare(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_generate(const std::vector<std::string>& args);
int run_export(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);
int run_commbench(const std::vector<std::string>& args);
int run_inspect(const std::vector<std::string>& args);
int run_doctor(const std::vector<std::string>& args);
int run_plan(const std::vector<std::string>& args);
std::string version_text();
std::string main_help();

}  // namespace trident
