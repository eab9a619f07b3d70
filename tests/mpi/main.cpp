// Boost.Test entry of the multi-rank tests, run by `mpirun -np N` for N in 1, 2, 4, 8. A global
// fixture owns MPI; only rank 0 prints the summary report (every rank still logs its errors).
#define BOOST_TEST_DYN_LINK
#define BOOST_TEST_MODULE trident_mpi
#include <boost/test/results_reporter.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>

#include "comm/world.hpp"
#include "core/mpi_util.hpp"
#include "mpi_fixture.hpp"

namespace {

std::unique_ptr<trident::comm::Communicator> the_world;

struct MpiFixture {
  MpiFixture() {
    auto& suite = boost::unit_test::framework::master_test_suite();
    session = std::make_unique<trident::MpiSession>(&suite.argc, &suite.argv);
    if (trident::world_rank() != 0)
      boost::unit_test::results_reporter::set_level(boost::unit_test::NO_REPORT);
  }
  ~MpiFixture() {
    the_world.reset();
    session.reset();
  }
  std::unique_ptr<trident::MpiSession> session;
};

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

trident::comm::Communicator& trident::testing::world() {
  if (!the_world) the_world = trident::comm::make_world();
  return *the_world;
}

bool trident::testing::everywhere(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}
