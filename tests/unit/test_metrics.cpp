// metrics.h5: series appended, flushed, read back; attributes; a second flush extends.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdio>

#include "metrics/metrics_file.hpp"

BOOST_AUTO_TEST_CASE(series_and_attributes_round_trip) {
  const std::string path = "/tmp/trident-metrics-" + std::to_string(getpid()) + ".h5";
  {
    trident::metrics::MetricsFile file(path, {{"deck", "[model]\nlayers = 2\n"}, {"model.layers", "2"}});
    for (int i = 0; i < 5; ++i) {
      file.append_int("step", i + 1);
      file.append("loss", 10.0 - i);
    }
    file.flush();
    // What is flushed is readable while the run goes on (a killed run keeps it).
    BOOST_TEST(trident::metrics::read_series(path, "loss").size() == 5u);
    file.append_int("step", 6);
    file.append("loss", 4.5);
    file.append("val_loss", 4.0);
  }  // the destructor flushes the rest
  const auto loss = trident::metrics::read_series(path, "loss");
  const auto step = trident::metrics::read_series(path, "step");
  BOOST_TEST((loss == std::vector<double>{10, 9, 8, 7, 6, 4.5}));
  BOOST_TEST((step == std::vector<double>{1, 2, 3, 4, 5, 6}));
  BOOST_TEST(trident::metrics::read_series(path, "val_loss").size() == 1u);
  BOOST_TEST(trident::metrics::read_attribute(path, "model.layers") == "2");
  BOOST_TEST(trident::metrics::read_attribute(path, "deck") == "[model]\nlayers = 2\n");
  BOOST_CHECK_THROW(trident::metrics::read_series(path, "nope"), std::runtime_error);
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(unwritable_path_is_reported) {
  BOOST_CHECK_THROW(trident::metrics::MetricsFile("/nonexistent/dir/m.h5", {}), std::runtime_error);
}

// A resumed run continues the file: every series is cut back to the rows of steps up to the
// checkpoint's, by its index series (step, val_step, checkpoint/step).
BOOST_AUTO_TEST_CASE(resume_cuts_every_series_back_to_the_step) {
  const std::string path = "/tmp/trident-metrics-resume-" + std::to_string(getpid()) + ".h5";
  {
    trident::metrics::MetricsFile file(path, {{"deck", "first"}});
    for (int s = 1; s <= 7; ++s) {
      file.append_int("step", s);
      file.append("loss", 10.0 - s);
      file.append("stage1/forward_ms", s);
      if (s % 3 == 0) {
        file.append_int("val_step", s);
        file.append("val_loss", 20.0 - s);
        file.append_int("checkpoint/step", s);
        file.append("checkpoint/write_s", 0.1 * s);
      }
    }
  }
  {
    trident::metrics::MetricsFile file(path, {{"deck", "second"}}, 4);
    file.append_int("step", 5);
    file.append("loss", 42.0);
  }
  BOOST_TEST((trident::metrics::read_series(path, "step") == std::vector<double>{1, 2, 3, 4, 5}));
  BOOST_TEST((trident::metrics::read_series(path, "loss") == std::vector<double>{9, 8, 7, 6, 42}));
  BOOST_TEST((trident::metrics::read_series(path, "stage1/forward_ms") == std::vector<double>{1, 2, 3, 4}));
  BOOST_TEST((trident::metrics::read_series(path, "val_step") == std::vector<double>{3}));
  BOOST_TEST((trident::metrics::read_series(path, "checkpoint/write_s").size() == 1u));
  BOOST_TEST(trident::metrics::read_attribute(path, "deck") == "second");
  std::remove(path.c_str());
}
