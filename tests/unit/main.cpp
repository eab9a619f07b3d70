// Boost.Test entry point of the single-process unit tests (no MPI: what they test is pure).
#define BOOST_TEST_DYN_LINK
#define BOOST_TEST_MODULE trident_unit
#include <boost/test/unit_test.hpp>
