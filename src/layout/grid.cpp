// Grid arithmetic (see grid.hpp for the rank order and why).
#include "layout/grid.hpp"

#include <stdexcept>

namespace trident::layout {

const char* group_kind_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::Tensor: return "tensor";
    case GroupKind::Pipeline: return "pipeline";
    case GroupKind::Data: return "data";
    case GroupKind::Embedding: return "embedding";
    case GroupKind::Context: return "context";
  }
  return "?";
}

Grid::Grid(int tp_size, int pp_size, int dp_size, int cp_size)
    : tp_size_(tp_size), pp_size_(pp_size), dp_size_(dp_size), cp_size_(cp_size) {
  if (tp_size < 1 || pp_size < 1 || dp_size < 1 || cp_size < 1)
    throw std::invalid_argument("grid sizes must be at least 1");
  if (dp_size % cp_size != 0) throw std::invalid_argument("the data group must hold whole context groups");
}

Coord Grid::coord_of(int world_rank) const {
  if (world_rank < 0 || world_rank >= world_size())
    throw std::out_of_range("world rank outside the grid");
  Coord c;
  c.tp = world_rank % tp_size_;
  c.dp = (world_rank / tp_size_) % dp_size_;
  c.pp = world_rank / (tp_size_ * dp_size_);
  return c;
}

int Grid::rank_of(const Coord& c) const {
  if (c.tp < 0 || c.tp >= tp_size_ || c.dp < 0 || c.dp >= dp_size_ || c.pp < 0 ||
      c.pp >= pp_size_)
    throw std::out_of_range("coordinate outside the grid");
  return c.tp + tp_size_ * (c.dp + dp_size_ * c.pp);
}

std::vector<int> Grid::group(GroupKind kind, int world_rank) const {
  const Coord me = coord_of(world_rank);
  std::vector<int> members;
  Coord c = me;
  switch (kind) {
    case GroupKind::Tensor:
      for (c.tp = 0; c.tp < tp_size_; ++c.tp) members.push_back(rank_of(c));
      break;
    case GroupKind::Data:
      for (c.dp = 0; c.dp < dp_size_; ++c.dp) members.push_back(rank_of(c));
      break;
    case GroupKind::Pipeline:
      for (c.pp = 0; c.pp < pp_size_; ++c.pp) members.push_back(rank_of(c));
      break;
    case GroupKind::Context:
      for (c.dp = me.dp - me.dp % cp_size_; c.dp < me.dp - me.dp % cp_size_ + cp_size_; ++c.dp)
        members.push_back(rank_of(c));
      break;
    case GroupKind::Embedding:
      if (me.pp != 0 && me.pp != pp_size_ - 1) break;
      c.pp = 0;
      members.push_back(rank_of(c));
      if (pp_size_ > 1) c.pp = pp_size_ - 1, members.push_back(rank_of(c));
      break;
  }
  return members;
}

std::vector<std::vector<int>> Grid::all_groups(GroupKind kind) const {
  std::vector<std::vector<int>> groups;
  for (int rank = 0; rank < world_size(); ++rank) {
    std::vector<int> members = group(kind, rank);
    if (!members.empty() && members.front() == rank) groups.push_back(std::move(members));
  }
  return groups;
}

int Grid::group_index(GroupKind kind, int world_rank) const {
  const std::vector<int> members = group(kind, world_rank);
  if (members.empty()) return -1;
  const auto groups = all_groups(kind);
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].front() == members.front()) return static_cast<int>(i);
  return -1;
}

}  // namespace trident::layout
