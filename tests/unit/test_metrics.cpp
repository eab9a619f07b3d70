// metrics.h5: series appended, flushed, read back; attributes; a second flush extends.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "metrics/journal.hpp"
#include "metrics/metrics_file.hpp"
#include "metrics/snapshot.hpp"

BOOST_AUTO_TEST_SUITE(metrics)

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
  std::remove((path + ".journal").c_str());
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
  std::remove((path + ".journal").c_str());
}

namespace {

namespace m = trident::metrics;

std::string temp_path(const std::string& what) {
  return "/tmp/trident-metrics-" + what + "-" + std::to_string(getpid()) + ".h5";
}

void remove_all(const std::string& path) {
  std::remove(path.c_str());
  std::remove((path + ".journal").c_str());
}

// Steps 1..n of "step" and "loss" (= 100 - step), flushed each step, as a run does.
void write_steps(m::MetricsFile& file, int from, int to) {
  for (int s = from; s <= to; ++s) {
    file.append_int("step", s);
    file.append("loss", 100.0 - s);
    file.flush();
  }
}

// A child process writes steps 1..n and dies by SIGKILL with the file open (no destructor,
// no last snapshot): what a killed run leaves behind.
void killed_after(const std::string& path, int steps) {
  const pid_t child = fork();
  if (child == 0) {
    m::MetricsFile file(path, {{"deck", "first"}});
    write_steps(file, 1, steps);
    kill(getpid(), SIGKILL);
  }
  int status = 0;
  waitpid(child, &status, 0);
  BOOST_REQUIRE(WIFSIGNALED(status));
}

}  // namespace

// The snapshot is a complete HDF5 file at every instant: a run killed with the file "open"
// leaves a metrics.h5 that opens, and the journal beside it holds every flushed row.
BOOST_AUTO_TEST_CASE(a_killed_writer_leaves_a_readable_file_and_its_rows) {
  const std::string path = temp_path("killed");
  killed_after(path, 7);
  BOOST_TEST(m::read_snapshot(path).series.count("step") == 0u);  // rows only in the journal yet
  BOOST_TEST((m::read_series(path, "step") == std::vector<double>{1, 2, 3, 4, 5, 6, 7}));
  {
    m::MetricsFile resumed(path, {{"deck", "second"}}, 5);
    BOOST_TEST(resumed.recovery_notes().empty());
    write_steps(resumed, 6, 9);
  }
  const m::History history = m::read_snapshot(path);  // closed: the snapshot alone has it all
  BOOST_TEST((m::read_series(path, "step") == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  BOOST_TEST(history.series.at("loss").real.size() == 9u);
  BOOST_TEST(history.series.at("loss").real[8] == 91.0);
  BOOST_TEST(m::read_attribute(path, "deck") == "second");
  remove_all(path);
}

// A record torn by a kill in the middle of its write is recognised (length and checksum) and
// dropped; every record before it is read. Cut at every byte of the last record.
BOOST_AUTO_TEST_CASE(a_torn_journal_tail_is_dropped_and_reported) {
  const std::string journal = temp_path("torn") + ".journal";
  uintmax_t first_end = 0, whole = 0;
  {
    m::JournalWriter writer(journal, "snapshot-1");
    writer.append({{"step", true, 0, {}, {1, 2}}, {"loss", false, 0, {9.5, 8.5}, {}}});
    first_end = std::filesystem::file_size(journal);
    writer.append({{"step", true, 2, {}, {3}}, {"loss", false, 2, {7.5}, {}}});
    whole = std::filesystem::file_size(journal);
  }
  const m::Journal intact = m::read_journal(journal);
  BOOST_TEST(intact.snapshot_id == "snapshot-1");
  BOOST_TEST(intact.records == 2u);
  BOOST_TEST(intact.rows.size() == 4u);
  BOOST_TEST(intact.rows[3].real[0] == 7.5);
  BOOST_TEST(intact.dropped_bytes == 0u);
  std::filesystem::copy_file(journal, journal + ".whole");
  for (uintmax_t cut = first_end + 1; cut < whole; ++cut) {
    std::filesystem::copy_file(journal + ".whole", journal, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(journal, cut);
    const m::Journal torn = m::read_journal(journal);
    BOOST_TEST_REQUIRE(torn.records == 1u);
    BOOST_TEST(torn.rows.size() == 2u);
    BOOST_TEST(torn.dropped_bytes == cut - first_end);
  }
  // A flipped bit in the last record's values: the checksum catches it.
  std::filesystem::copy_file(journal + ".whole", journal, std::filesystem::copy_options::overwrite_existing);
  {
    std::fstream file(journal, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(whole - 3));
    file.put('\x5a');
  }
  BOOST_TEST(m::read_journal(journal).records == 1u);
  std::remove((journal + ".whole").c_str());
  std::remove(journal.c_str());
}

// Resuming over a torn journal says so and keeps the rows before the tear.
BOOST_AUTO_TEST_CASE(resume_over_a_torn_journal_reports_it) {
  const std::string path = temp_path("torn-resume");
  killed_after(path, 4);
  const std::string journal = path + ".journal";
  std::filesystem::resize_file(journal, std::filesystem::file_size(journal) - 3);
  {
    m::MetricsFile resumed(path, {}, 3);
    BOOST_TEST(resumed.recovery_notes().size() == 1u);
    BOOST_TEST(resumed.recovery_notes().at(0).find("torn") != std::string::npos);
  }
  BOOST_TEST((m::read_series(path, "step") == std::vector<double>{1, 2, 3}));
  remove_all(path);
}

// An unreadable snapshot (damaged from outside) is moved aside, never silently replaced; what
// the journal holds is kept, and the lost steps are named.
BOOST_AUTO_TEST_CASE(a_damaged_snapshot_is_moved_aside_and_reported) {
  const std::string path = temp_path("damaged");
  killed_after(path, 6);
  {
    std::ofstream garbage(path, std::ios::binary | std::ios::trunc);
    garbage << "not an HDF5 file";
  }
  std::vector<std::string> notes;
  {
    m::MetricsFile resumed(path, {}, 5);
    notes = resumed.recovery_notes();
  }
  BOOST_TEST_REQUIRE(notes.size() == 2u);
  BOOST_TEST(notes[0].find("moved to '" + path + ".damaged-") != std::string::npos);
  BOOST_TEST((m::read_series(path, "step") == std::vector<double>{1, 2, 3, 4, 5}));
  for (const auto& entry : std::filesystem::directory_iterator("/tmp"))
    if (entry.path().string().rfind(path + ".damaged-", 0) == 0) std::filesystem::remove(entry.path());
  remove_all(path);
}

// A stale journal (its snapshot already replaced: a kill between the rename and the new
// journal) is not applied twice.
BOOST_AUTO_TEST_CASE(a_stale_journal_is_ignored) {
  const std::string path = temp_path("stale");
  killed_after(path, 3);
  std::filesystem::copy_file(path + ".journal", path + ".old");
  { m::MetricsFile resumed(path, {}, 3); }  // closed: snapshot has steps 1..3, new journal
  std::filesystem::rename(path + ".old", path + ".journal");
  { m::MetricsFile again(path, {}, 3); BOOST_TEST(again.recovery_notes().empty()); }
  BOOST_TEST((m::read_series(path, "step") == std::vector<double>{1, 2, 3}));
  remove_all(path);
}

// A new run in the same directory keeps the previous run's history (journal included) beside
// the new file, and says so.
BOOST_AUTO_TEST_CASE(a_new_run_keeps_the_previous_history) {
  const std::string path = temp_path("previous");
  killed_after(path, 5);
  std::vector<std::string> notes;
  {
    m::MetricsFile fresh(path, {{"deck", "new"}});
    notes = fresh.recovery_notes();
    write_steps(fresh, 1, 2);
  }
  BOOST_TEST_REQUIRE(notes.size() == 1u);
  const std::string marker = "is kept as '";
  const size_t at = notes[0].find(marker);
  BOOST_TEST_REQUIRE(at != std::string::npos);
  const std::string aside = notes[0].substr(at + marker.size(), notes[0].size() - at - marker.size() - 1);
  BOOST_TEST((m::read_series(aside, "step") == std::vector<double>{1, 2, 3, 4, 5}));
  BOOST_TEST((m::read_series(path, "step") == std::vector<double>{1, 2}));
  std::remove(aside.c_str());
  remove_all(path);
}

BOOST_AUTO_TEST_SUITE_END()
