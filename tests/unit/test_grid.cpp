// Grid arithmetic against brute force, for every factorisation of every world size 1..64.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <array>
#include <vector>

#include "layout/grid.hpp"

using trident::layout::Coord;
using trident::layout::Grid;
using trident::layout::GroupKind;

namespace {

// The rank order spelled out as loops: pipeline outermost, then data, tensor innermost.
std::vector<Coord> enumerate_in_rank_order(int tp, int pp, int dp) {
  std::vector<Coord> coords;
  for (int p = 0; p < pp; ++p)
    for (int d = 0; d < dp; ++d)
      for (int t = 0; t < tp; ++t) coords.push_back({t, d, p});
  return coords;
}

std::vector<int> brute_group(const std::vector<Coord>& coords, GroupKind kind, int rank, int pp, int cp = 1) {
  const Coord me = coords[rank];
  std::vector<int> members;
  for (int r = 0; r < static_cast<int>(coords.size()); ++r) {
    const Coord c = coords[r];
    bool same = false;
    switch (kind) {
      case GroupKind::Tensor: same = c.dp == me.dp && c.pp == me.pp; break;
      case GroupKind::Data: same = c.tp == me.tp && c.pp == me.pp; break;
      case GroupKind::Pipeline: same = c.tp == me.tp && c.dp == me.dp; break;
      case GroupKind::Embedding:
        same = c.tp == me.tp && c.dp == me.dp && (me.pp == 0 || me.pp == pp - 1) &&
               (c.pp == 0 || c.pp == pp - 1);
        break;
      case GroupKind::Context: same = c.tp == me.tp && c.pp == me.pp && c.dp / cp == me.dp / cp; break;
    }
    if (same) members.push_back(r);
  }
  return members;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grid)

// Context parallelism: the data group is data × context (dp = context rank + c · replica), the
// context group a replica's c consecutive data ranks — next to the tensor group in rank order.
BOOST_AUTO_TEST_CASE(context_groups_sit_inside_the_data_group_next_to_tensor) {
  for (const auto& [tp, cp, pp, replicas] : std::vector<std::array<int, 4>>{{2, 2, 2, 2}, {1, 4, 2, 1}, {2, 3, 1, 2}}) {
    const Grid grid(tp, pp, replicas * cp, cp);
    const auto coords = enumerate_in_rank_order(tp, pp, replicas * cp);
    BOOST_TEST(grid.replicas() == replicas);
    for (int rank = 0; rank < grid.world_size(); ++rank) {
      for (GroupKind kind : {GroupKind::Tensor, GroupKind::Data, GroupKind::Pipeline, GroupKind::Context})
        BOOST_TEST(grid.group(kind, rank) == brute_group(coords, kind, rank, pp, cp));
      const Coord c = grid.coord_of(rank);
      BOOST_TEST(grid.context_rank(c) * 1 + cp * grid.replica(c) == c.dp);
      const std::vector<int> context = grid.group(GroupKind::Context, rank);
      BOOST_TEST(context.back() - context.front() == (cp - 1) * tp);  // consecutive after the tensor ranks
    }
  }
  BOOST_CHECK_THROW(Grid(2, 1, 3, 2), std::invalid_argument);  // 3 data ranks are not whole groups of 2
}

BOOST_AUTO_TEST_CASE(grid_matches_brute_force_for_all_factorisations_up_to_64) {
  int layouts = 0;
  for (int world = 1; world <= 64; ++world)
    for (int tp = 1; tp <= world; ++tp)
      for (int pp = 1; pp <= world / tp; ++pp) {
        if (world % (tp * pp) != 0) continue;
        const int dp = world / (tp * pp);
        const Grid grid(tp, pp, dp);
        const auto coords = enumerate_in_rank_order(tp, pp, dp);
        BOOST_REQUIRE_EQUAL(grid.world_size(), world);
        ++layouts;
        for (int rank = 0; rank < world; ++rank) {
          BOOST_REQUIRE(grid.coord_of(rank) == coords[rank]);
          BOOST_REQUIRE_EQUAL(grid.rank_of(coords[rank]), rank);
          for (GroupKind kind : {GroupKind::Tensor, GroupKind::Data, GroupKind::Pipeline,
                                 GroupKind::Embedding})
            BOOST_REQUIRE(grid.group(kind, rank) == brute_group(coords, kind, rank, pp));
        }
        BOOST_REQUIRE_EQUAL(grid.all_groups(GroupKind::Tensor).size(), size_t(pp * dp));
        BOOST_REQUIRE_EQUAL(grid.all_groups(GroupKind::Data).size(), size_t(tp * pp));
        BOOST_REQUIRE_EQUAL(grid.all_groups(GroupKind::Pipeline).size(), size_t(tp * dp));
        BOOST_REQUIRE_EQUAL(grid.all_groups(GroupKind::Embedding).size(), size_t(tp * dp));
      }
  // Sum over n = 1..64 of the number of ordered factorisations into 3 factors.
  BOOST_TEST(layouts == 796);
}

BOOST_AUTO_TEST_CASE(group_index_numbers_groups_by_lowest_member) {
  const Grid grid(2, 2, 2);
  BOOST_TEST(grid.group_index(GroupKind::Tensor, 5) == 2);  // {4,5} is the third tensor group
  BOOST_TEST(grid.group_index(GroupKind::Data, 3) == 1);    // {1,3}
  BOOST_TEST(grid.group_index(GroupKind::Pipeline, 6) == 2);  // {2,6}
  const Grid middle(1, 3, 1);
  BOOST_TEST(middle.group_index(GroupKind::Embedding, 1) == -1);  // middle stage: no embedding
  BOOST_TEST((middle.group(GroupKind::Embedding, 2) == std::vector<int>{0, 2}));
}

BOOST_AUTO_TEST_CASE(grid_rejects_bad_sizes_and_ranks) {
  BOOST_CHECK_THROW(Grid(0, 1, 1), std::invalid_argument);
  const Grid grid(2, 1, 2);
  BOOST_CHECK_THROW(grid.coord_of(4), std::out_of_range);
  BOOST_CHECK_THROW(grid.rank_of({2, 0, 0}), std::out_of_range);
}

BOOST_AUTO_TEST_SUITE_END()
