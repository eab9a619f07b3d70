// Error paths shared by every rank: user errors (all ranks agree, rank 0 reports, exit 2) and
// one-rank faults (report with rank and host, then MPI_Abort so no peer waits forever).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "core/printable.hpp"

namespace trident {

// Exit statuses the program documents (README, docs/DECK.md).
constexpr int kExitOk = 0;
constexpr int kExitFault = 1;      // one rank failed: I/O, MPI, internal check
constexpr int kExitUserError = 2;  // bad deck, bad command line, impossible layout
constexpr int kExitStopped = 3;    // stopped by SIGUSR1/SIGTERM after writing a full checkpoint

// A condition every rank sees together that ends the run (training diverged past
// optim.max_bad_steps, …): main() catches it, rank 0 prints "error: <what>", every rank
// finalizes MPI and returns `status`.
class RunFailure : public std::runtime_error {
 public:
  RunFailure(const std::string& message, int status)
      : std::runtime_error(printable_message(message)), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// A user error that every rank detects identically (all ranks parse the same deck text, so
// they all throw the same UserError). main() catches it: rank 0 prints "error: <what>",
// every rank finalizes MPI and returns kExitUserError. Never thrown for a condition that
// only some ranks can see — use fatal_one, or agree first (comm::agree_on_error,
// comm/agreement.hpp). The message is made printable here, once for every path: what() is a C
// string, so a NUL echoed from a file would otherwise end the message early.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(printable_message(message)) {}
};

// Throws UserError; the name says who must call it: all ranks, together.
[[noreturn]] void fatal_all(const std::string& message);

// A fault seen by this rank alone: prints "[rank r@host] file:line: message" to stderr and
// calls MPI_Abort on MPI_COMM_WORLD, which ends every rank of the job.
[[noreturn]] void fatal_one_at(const char* file, int line, const std::string& message);
#define fatal_one(message) ::trident::fatal_one_at(__FILE__, __LINE__, (message))

// An internal invariant: stays on in release builds; a failure is a one-rank fault.
#define REQUIRE(condition, message)                                                    \
  do {                                                                                 \
    if (!(condition)) {                                                                \
      std::ostringstream require_os_;                                                  \
      require_os_ << "check failed: " #condition ": " << message;                      \
      ::trident::fatal_one_at(__FILE__, __LINE__, require_os_.str());                  \
    }                                                                                  \
  } while (0)

// MPI calls return their errors (MPI_ERRORS_RETURN is installed at start-up); this turns a
// failure into a one-rank fault naming the call and MPI's own message.
void check_mpi_at(int code, const char* call, const char* file, int line);
#define MPI_CHECK(call) ::trident::check_mpi_at((call), #call, __FILE__, __LINE__)

}  // namespace trident
