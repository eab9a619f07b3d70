// Shared helpers of the multi-rank tests: every verdict is agreed over MPI_COMM_WORLD, so all
// ranks pass or fail the same check together and none returns early between collectives.
#pragma once

#include <mpi.h>

#include <random>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace trident::testing {

// The job's control communicator over every rank (comm::make_world), made at the first call and
// freed before MPI ends: what the code under test takes as its world.
comm::Communicator& world();

// True on every rank iff `ok` is true on every rank.
bool everywhere(bool ok);

// n values uniform in [−1, 1) from `seed`: the same on every rank for the same seed.
inline std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen);
  return v;
}

// Runs `body` and returns the UserError message it threw ("" if none) — on this rank.
template <class Body>
std::string user_error_of(Body&& body);

}  // namespace trident::testing

#include "core/error.hpp"

template <class Body>
std::string trident::testing::user_error_of(Body&& body) {
  try {
    body();
  } catch (const trident::UserError& e) {
    return e.what();
  }
  return "";
}
