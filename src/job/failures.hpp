// Failures that reach main() as exceptions — from oneDNN, an allocation, a library — reported
// like every other one-rank fault, never as "unexpected": what failed, with the CPU's ISA and
// oneDNN's version, and what to do about it; also for exceptions that escape a thread.
#pragma once

#include <exception>
#include <string>

namespace trident {

// One line for fatal_one: the kind of failure, its message (which names the operation, shapes
// and types where our code raised it), the CPU (ISA, oneDNN) and a hint the user can act on.
std::string describe_exception(std::exception_ptr error);

// std::set_terminate: an exception escaping any thread (the gradient reducer's, the
// checkpoint writer's) becomes the same one-rank fault as in main(), with MPI_Abort.
void install_terminate_handler();

}  // namespace trident
