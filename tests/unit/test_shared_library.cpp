// core/shared_library.hpp: libraries opened on first use, their problems named; in a CUDA build,
// cuBLASLt reached through the forwarders of kernels/cuda/cuda_libraries.cpp.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/shared_library.hpp"

#if TRIDENT_CUDA
#include <cublasLt.h>
#include <dlfcn.h>

#include "kernels/cuda/cuda_libraries.hpp"
#endif

using trident::SharedLibrary;

namespace {

// The message of what `f` throws ("" if nothing).
template <typename F>
std::string thrown(F f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(shared_library)

BOOST_AUTO_TEST_CASE(a_missing_library_is_named_with_what_needs_it) {
  SharedLibrary library("libtrident-no-such-library.so.7", "kernels.device = nothing");
  BOOST_TEST(has(library.problem(), "libtrident-no-such-library.so.7"));
  BOOST_TEST(library.path().empty());
  const std::string why = thrown([&] { library.symbol("anything"); });
  BOOST_TEST(has(why, "kernels.device = nothing needs libtrident-no-such-library.so.7, which cannot be loaded"));
}

BOOST_AUTO_TEST_CASE(a_present_library_opens_and_gives_its_functions) {
  SharedLibrary library("libm.so.6", "the test");
  BOOST_TEST(library.problem().empty());
  BOOST_TEST(has(library.path(), "libm.so.6"));
  const auto cosine = reinterpret_cast<double (*)(double)>(library.symbol("cos"));
  BOOST_TEST(cosine(0.5) == std::cos(0.5));
  const std::string why = thrown([&] { library.symbol("trident_no_such_function"); });
  BOOST_TEST(has(why, "the test needs trident_no_such_function from"));
  BOOST_TEST(has(why, "libm.so.6, which lacks it"));
}

#if TRIDENT_CUDA
// The forwarded cublasLtGetVersion is cuBLASLt's own (it needs no GPU), and the summary of
// `trident version` says where the library came from.
BOOST_AUTO_TEST_CASE(cublaslt_is_reached_through_its_forwarders) {
  SharedLibrary& library = trident::kernels::cuda::cublaslt_library();
  if (!library.problem().empty()) {
    BOOST_TEST(has(trident::kernels::cuda::cublaslt_summary(), "cuBLASLt not loadable"));
    return;
  }
  void* own = dlsym(dlopen(library.soname().c_str(), RTLD_NOW | RTLD_NOLOAD), "cublasLtGetVersion");
  BOOST_REQUIRE(own != nullptr);
  BOOST_TEST(cublasLtGetVersion() == reinterpret_cast<size_t (*)()>(own)());
  BOOST_TEST(cublasLtGetVersion() >= size_t(CUBLAS_VER_MAJOR) * 10000);
  BOOST_TEST(has(trident::kernels::cuda::cublaslt_summary(),
                 "cuBLASLt " + std::to_string(cublasLtGetVersion()) + " (" + library.path() + ")"));
}
#endif

BOOST_AUTO_TEST_SUITE_END()
