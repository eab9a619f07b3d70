// Checkpoint lineage without files: which checkpoints resume = auto tries, and whether a run
// continues the current branch or starts a new one (moving the old one aside), for a fresh
// run, a second run, a roll-back, a resume of the tip, a branch whose tip lies elsewhere, and
// a directory of an earlier trident; and the branch pointer's text round trip.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include "ckpt/lineage.hpp"

namespace {

using namespace trident;

ckpt::Entry entry(const std::string& run, const std::string& branch, int64_t step, const std::string& kind = "full") {
  ckpt::Entry e;
  e.step = step;
  e.kind = kind;
  e.metadata.step = step;
  e.metadata.kind = kind;
  e.metadata.run_id = run;
  e.metadata.branch = branch;
  char name[64];
  std::snprintf(name, sizeof name, "d/step-%08lld.%s.h5", static_cast<long long>(step), kind.c_str());
  e.path = name;
  return e;
}

ckpt::BranchPointer pointer_at(const ckpt::Entry& tip) {
  ckpt::BranchPointer p;
  p.branch = tip.metadata.branch;
  p.tip = tip.path.substr(2);
  p.tip_id = tip.metadata.id();
  p.tip_step = tip.step;
  return p;
}

// Branch A (runs a1, a2) wrote 4 and 8; damaged 12 of unknown lineage; newest first.
ckpt::DirectoryState branch_a() {
  ckpt::DirectoryState state;
  state.dir = "d";
  ckpt::Entry damaged = entry("", "", 12);
  damaged.problem = "metadata checksum mismatch";
  state.entries = {damaged, entry("a2", "A", 8), entry("a1", "A", 4)};
  state.pointer = pointer_at(state.entries[1]);
  return state;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lineage)

BOOST_AUTO_TEST_CASE(auto_tries_the_branch_newest_first_and_reports_damage) {
  ckpt::DirectoryState state = branch_a();
  state.entries.insert(state.entries.begin(), entry("b1", "B", 20));  // another branch's, newer
  std::vector<std::string> notes;
  const auto files = ckpt::auto_candidates(state, notes);
  BOOST_TEST((files == std::vector<std::string>{"d/step-00000012.full.h5", "d/step-00000008.full.h5",
                                               "d/step-00000004.full.h5"}));
  BOOST_TEST(notes.size() == 1u);  // the other branch's file is named as left out
}

BOOST_AUTO_TEST_CASE(auto_continues_the_branch_and_prunes_only_its_files) {
  const ckpt::DirectoryState state = branch_a();
  const ckpt::Metadata& chosen = state.entries[1].metadata;
  const ckpt::Lineage l = ckpt::plan_lineage(state, "auto", "d", &chosen, state.entries[1].path, "a3");
  BOOST_TEST(!l.new_branch);
  BOOST_TEST(l.branch == "A");
  BOOST_TEST(l.parent == "a2/step-00000008.full");
  BOOST_TEST(l.set_aside.empty());
  BOOST_TEST((l.branch_files == std::vector<std::string>{"d/step-00000004.full.h5", "d/step-00000008.full.h5"}));
}

BOOST_AUTO_TEST_CASE(a_fresh_run_starts_a_branch_and_moves_the_old_one_aside) {
  const ckpt::Lineage l = ckpt::plan_lineage(branch_a(), "none", "d", nullptr, "", "b1");
  BOOST_TEST(l.new_branch);
  BOOST_TEST(l.branch == "b1");
  BOOST_TEST(l.parent.empty());
  BOOST_TEST(l.set_aside == "A");
  BOOST_TEST(l.branch_files.empty());
}

BOOST_AUTO_TEST_CASE(a_roll_back_starts_a_branch_a_resume_of_the_tip_does_not) {
  const ckpt::DirectoryState state = branch_a();
  const ckpt::Metadata& older = state.entries[2].metadata;  // step 4: a roll-back
  const ckpt::Lineage back = ckpt::plan_lineage(state, state.entries[2].path, "d", &older, state.entries[2].path, "r1");
  BOOST_TEST(back.new_branch);
  BOOST_TEST(back.parent == "a1/step-00000004.full");
  BOOST_TEST(back.set_aside == "A");
  const ckpt::Metadata& tip = state.entries[1].metadata;  // step 8, the newest of A
  const ckpt::Lineage same = ckpt::plan_lineage(state, state.entries[1].path, "d", &tip, state.entries[1].path, "r2");
  BOOST_TEST(!same.new_branch);
  BOOST_TEST(same.branch == "A");
}

BOOST_AUTO_TEST_CASE(a_new_branch_without_files_resumes_its_parent_elsewhere) {
  ckpt::DirectoryState state;  // branch R started from A's step 4, now in branches/A, then killed
  state.dir = "d";
  state.pointer = ckpt::BranchPointer{"R", "branches/A/step-00000004.full.h5", "a1/step-00000004.full", 4, "r1", ""};
  std::vector<std::string> notes;
  const auto files = ckpt::auto_candidates(state, notes);
  BOOST_TEST((files == std::vector<std::string>{"d/branches/A/step-00000004.full.h5"}));
  ckpt::Metadata parent = entry("a1", "A", 4).metadata;
  const ckpt::Lineage l = ckpt::plan_lineage(state, "auto", "d", &parent, files[0], "r2");
  BOOST_TEST(!l.new_branch);
  BOOST_TEST(l.branch == "R");
}

BOOST_AUTO_TEST_CASE(an_earlier_tridents_directory_is_adopted_with_a_warning) {
  ckpt::DirectoryState state;
  state.dir = "d";
  state.entries = {entry("", "", 8), entry("", "", 4)};
  std::vector<std::string> notes;
  BOOST_TEST(ckpt::auto_candidates(state, notes).size() == 2u);
  BOOST_TEST(notes.size() == 1u);
  const ckpt::Lineage l = ckpt::plan_lineage(state, "auto", "d", &state.entries[0].metadata, state.entries[0].path, "n1");
  BOOST_TEST(l.new_branch);
  BOOST_TEST(l.set_aside.empty());  // nothing newer to collide with; its files are pruned as this line's
  BOOST_TEST(l.branch_files.size() == 2u);
}

BOOST_AUTO_TEST_CASE(branch_pointer_round_trips) {
  const ckpt::BranchPointer p{"B", "step-00000008.full.h5", "r/step-00000008.full", 8, "r", "2026-11-29T12:00:00Z"};
  const auto back = ckpt::BranchPointer::from_text(p.to_text());
  BOOST_TEST_REQUIRE(back.has_value());
  BOOST_TEST(back->to_text() == p.to_text());
  BOOST_TEST(!ckpt::BranchPointer::from_text("garbage\n").has_value());
  BOOST_TEST(ckpt::make_run_id() != ckpt::make_run_id());
}

BOOST_AUTO_TEST_SUITE_END()
