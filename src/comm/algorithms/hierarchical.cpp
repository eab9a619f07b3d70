// The hierarchical all-reduce: the level communicators of a group and the algorithm over them.
#include "comm/algorithms/hierarchical.hpp"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.hpp"
#include "core/mpi_util.hpp"

namespace trident::comm {
namespace {

topo::Level level_between(const topo::Topology& t, int a, int b) {
  if (t.place(a).node == t.place(b).node) return topo::Level::Node;
  if (t.place(a).rack == t.place(b).rack) return topo::Level::Rack;
  return topo::Level::CrossRack;
}

char* offset(void* data, size_t elements, DType dtype) {
  return static_cast<char*>(data) + elements * dtype_size(dtype);
}

}  // namespace

// World ranks of the members of `group`, in group order.
std::vector<int> world_ranks_of(MPI_Comm group) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(group, &size));
  std::vector<int> members(size);
  const int me = world_rank();
  MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, members.data(), 1, MPI_INT, group));
  return members;
}

std::vector<topo::Level> levels_of(MPI_Comm comm, const topo::Topology& t) {
  std::vector<topo::Level> levels;
  for (int w : world_ranks_of(comm)) levels.push_back(level_between(t, world_rank(), w));
  return levels;
}

std::unique_ptr<MpiCommunicator> make_mpi_communicator(MPI_Comm comm, const topo::Topology& t, const std::string& name,
                                                       const CollectiveSettings& settings, Traffic kind) {
  return std::make_unique<MpiCommunicator>(comm, levels_of(comm, t), name, settings.timeout_s, kind);
}

bool regular_layout(const topo::Topology& t, const std::vector<int>& members) {
  std::map<int, int> per_node;
  std::map<int, std::set<int>> nodes_in_rack;
  for (int w : members) ++per_node[t.place(w).node], nodes_in_rack[t.place(w).rack].insert(t.place(w).node);
  for (const auto& [node, count] : per_node)
    if (count != per_node.begin()->second) return false;
  for (const auto& [rack, nodes] : nodes_in_rack)
    if (nodes.size() != nodes_in_rack.begin()->second.size()) return false;
  return true;
}

bool uses_shared_window(const topo::Topology& t, const std::vector<int>& members, int me,
                        const CollectiveSettings& settings) {
  if (settings.node_algo != Algo::Shm || settings.algo == "mpi" || members.size() < 2) return false;
  const bool spans_nodes = t.span(members) != topo::Level::Node;
  if (!spans_nodes) return true;  // the flat all-reduce inside one node: node_algo
  const bool hierarchy = regular_layout(t, members) && (settings.algo == "hierarchical" || settings.algo == "auto");
  if (!hierarchy) return false;  // flat across nodes: the ring
  int on_my_node = 0;
  for (int w : members) on_my_node += t.place(w).node == t.place(me).node;
  return on_my_node > 1;
}

Work hierarchical_all_reduce(Communicator* node, Communicator* rack, Communicator* cross, void* data,
                             size_t count, DType dtype, Stream stream) {
  std::vector<Work> steps;
  std::pair<size_t, size_t> shard{0, count};
  if (node) {
    steps.push_back(node->reduce_scatter(data, count, dtype, Op::Sum, stream));
    shard = segment_of(count, node->size(), node->rank());
  }
  for (Communicator* level : {rack, cross})
    if (level) steps.push_back(level->all_reduce(offset(data, shard.first, dtype), shard.second - shard.first, dtype, Op::Sum, stream));
  if (node) steps.push_back(node->all_gather(data, count, dtype, stream));
  return all_of(std::move(steps));
}

HostLevels::HostLevels(MPI_Comm group, const std::vector<int>& members, const topo::Topology& t,
                       const std::string& name, const CollectiveSettings& settings, Traffic kind)
    : node_algo_(settings.node_algo), rack_algo_(settings.rack_algo), cross_rack_algo_(settings.cross_rack_algo) {
  // Members per node, the nodes of each rack that hold members, and this rank's place.
  std::map<int, std::vector<int>> by_node;
  for (int w : members) by_node[t.place(w).node].push_back(w);
  const int me = world_rank();
  const auto& mine = by_node[t.place(me).node];
  const int local = static_cast<int>(std::find(mine.begin(), mine.end(), me) - mine.begin());
  std::map<int, std::vector<int>> nodes_in_rack;  // rack -> the group's nodes there, in order
  for (const auto& [node, ranks] : by_node) nodes_in_rack[t.place(ranks.front()).rack].push_back(node);
  const auto& rack_nodes = nodes_in_rack[t.place(me).rack];
  const int node_place = static_cast<int>(std::find(rack_nodes.begin(), rack_nodes.end(), t.place(me).node) - rack_nodes.begin());
  const int n = static_cast<int>(members.size());
  MPI_CHECK(MPI_Comm_split(group, t.place(me).node, local, &node_comm_));
  MPI_CHECK(MPI_Comm_split(group, t.place(me).rack * n + local, node_place, &rack_comm_));
  MPI_CHECK(MPI_Comm_split(group, node_place * n + local, t.place(me).rack, &cross_comm_));
  node_ = make_mpi_communicator(node_comm_, t, "node level of " + name, settings, kind);
  rack_ = make_mpi_communicator(rack_comm_, t, "rack level of " + name, settings, kind);
  cross_ = make_mpi_communicator(cross_comm_, t, "cross-rack level of " + name, settings, kind);
}

HostLevels::~HostLevels() {
  node_.reset(), rack_.reset(), cross_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm* c : {&node_comm_, &rack_comm_, &cross_comm_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

void HostLevels::all_reduce_f32(float* data, size_t n) {
  // Inside the node: through shared memory with node_algo = shm, else the ring.
  const Algo inside = node_algo_ == Algo::Shm ? Algo::Shm : Algo::Ring;
  node_->reduce_scatter_f32(data, n, inside);
  const auto shard = segment_of(n, node_->size(), node_->rank());
  across_nodes(data + shard.first, shard.second - shard.first);
  node_->all_gather_f32(data, n, inside);
}

// The shard's all-reduce across nodes: over the rack, then across racks. A large shard goes in
// pieces, pipelined: while this thread sums piece k + 1 over the rack, a second thread sends
// piece k across racks, so the two levels' links are busy at once (NCCL pipelines its
// hierarchical algorithms the same way). Every piece still goes rack first, then cross-rack.
// Pieces are multiples of kPieceAlign floats, so that group sizes dividing it split them evenly.
void HostLevels::across_nodes(float* shard, size_t len) {
  constexpr size_t kMaxPieces = 8, kMinPiece = size_t(1) << 18, kPieceAlign = 4096;  // floats
  const size_t pieces = std::min(kMaxPieces, len / kMinPiece);
  if (rack_->size() == 1 || cross_->size() == 1 || pieces < 2) {
    rack_->all_reduce_f32(shard, len, rack_algo_);
    cross_->all_reduce_f32(shard, len, cross_rack_algo_);
    return;
  }
  const size_t piece = (len / pieces + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
  const size_t count = (len + piece - 1) / piece;  // at most `pieces`: the aligned ones may cover len sooner
  auto range = [&](size_t k) { return std::pair{k * piece, std::min(len, (k + 1) * piece)}; };
  std::mutex mutex;
  std::condition_variable summed_over_rack;
  size_t summed = 0;  // pieces the rack level is done with
  std::thread cross_rack([&] {
    for (size_t k = 0; k < count; ++k) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        summed_over_rack.wait(lock, [&] { return summed > k; });
      }
      const auto [begin, end] = range(k);
      cross_->all_reduce_f32(shard + begin, end - begin, cross_rack_algo_);
    }
  });
  for (size_t k = 0; k < count; ++k) {
    const auto [begin, end] = range(k);
    rack_->all_reduce_f32(shard + begin, end - begin, rack_algo_);
    {
      std::lock_guard<std::mutex> lock(mutex);
      summed = k + 1;
    }
    summed_over_rack.notify_one();
  }
  cross_rack.join();
}

std::string HostLevels::describe() const {
  return "hierarchical: node " + std::to_string(node_->size()) + " x rack " + std::to_string(rack_->size()) +
         " x cross-rack " + std::to_string(cross_->size());
}

}  // namespace trident::comm
