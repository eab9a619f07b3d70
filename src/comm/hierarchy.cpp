// Building the per-level communicators of a group, and the hierarchical all-reduce.
#include "comm/hierarchy.hpp"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.hpp"
#include "comm/nccl/nccl.hpp"
#include "comm/wrappers/widen.hpp"
#include "core/mpi_util.hpp"

namespace trident::comm {
namespace {

// World ranks of the members of `group`, in group order.
std::vector<int> world_ranks_of(MPI_Comm group) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(group, &size));
  std::vector<int> members(size);
  const int me = world_rank();
  MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, members.data(), 1, MPI_INT, group));
  return members;
}

topo::Level level_between(const topo::Topology& t, int a, int b) {
  if (t.place(a).node == t.place(b).node) return topo::Level::Node;
  if (t.place(a).rack == t.place(b).rack) return topo::Level::Rack;
  return topo::Level::CrossRack;
}

// Collective: the level at which each rank of `comm` is from this rank.
std::vector<topo::Level> levels_of(MPI_Comm comm, const topo::Topology& t) {
  std::vector<topo::Level> levels;
  for (int w : world_ranks_of(comm)) levels.push_back(level_between(t, world_rank(), w));
  return levels;
}

std::unique_ptr<MpiCommunicator> make_communicator(MPI_Comm comm, const topo::Topology& t,
                                                const std::string& name,
                                                const CollectiveSettings& settings, Traffic kind) {
  return std::make_unique<MpiCommunicator>(comm, levels_of(comm, t), name, settings.timeout_s, kind);
}

char* offset(void* data, size_t elements, DType dtype) {
  return static_cast<char*>(data) + elements * dtype_size(dtype);
}

}  // namespace

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

GroupCollectives::GroupCollectives(MPI_Comm group, const topo::Topology& t, const std::string& name,
                                   const CollectiveSettings& settings, Traffic kind)
    : settings_(settings) {
  const std::vector<int> members = world_ranks_of(group);
  span_ = t.span(members);
  flat_ = make_communicator(group, t, name, settings, kind);
  // Members per node, the nodes of each rack that hold members, and this rank's place.
  std::map<int, std::vector<int>> by_node;
  for (int w : members) by_node[t.place(w).node].push_back(w);
  const bool regular = regular_layout(t, members);
  const int me = world_rank();
  const auto& mine = by_node[t.place(me).node];
  const int local = static_cast<int>(std::find(mine.begin(), mine.end(), me) - mine.begin());
  std::map<int, std::vector<int>> nodes_in_rack;  // rack -> the group's nodes there, in order
  for (const auto& [node, ranks] : by_node) nodes_in_rack[t.place(ranks.front()).rack].push_back(node);
  const auto& rack_nodes = nodes_in_rack[t.place(me).rack];
  const int node_place = static_cast<int>(std::find(rack_nodes.begin(), rack_nodes.end(), t.place(me).node) - rack_nodes.begin());
  // Every rank of the group takes part in the splits, regular or not (they are collective).
  MPI_CHECK(MPI_Comm_split(group, t.place(me).node, local, &node_comm_));
  MPI_CHECK(MPI_Comm_split(group, t.place(me).rack * static_cast<int>(members.size()) + local, node_place, &rack_comm_));
  MPI_CHECK(MPI_Comm_split(group, node_place * static_cast<int>(members.size()) + local, t.place(me).rack, &cross_comm_));
  node_ = make_communicator(node_comm_, t, "node level of " + name, settings, kind);
  rack_ = make_communicator(rack_comm_, t, "rack level of " + name, settings, kind);
  cross_ = make_communicator(cross_comm_, t, "cross-rack level of " + name, settings, kind);
  // Every member computes `regular` from the same topology and member list: no need to agree.
  const bool spans_nodes = span_ != topo::Level::Node;
  if (settings.algo == "hierarchical" && !regular)
    fatal_all("comm.algo = hierarchical needs the same number of " + name + "-group members on "
              "every node; this layout puts different numbers on some nodes; use comm.algo = auto");
  use_hierarchy_ = regular && (settings.algo == "hierarchical" || (settings.algo == "auto" && spans_nodes));
  if (settings.backend == "nccl") make_device_communicators(group, t, kind);
}

// Every member of a level communicator sees the same size and the same use_hierarchy_, so
// each NCCL communicator is made by all of its members or by none (creation is collective).
// Only the pipeline's communicator carries point-to-point (two more NCCL communicators).
void GroupCollectives::make_device_communicators(MPI_Comm group, const topo::Topology& t, Traffic kind) {
  const NcclSettings& nccl = settings_.nccl;
  NcclCommOptions flat = communicator_options(nccl, span_, name());
  flat.point_to_point = kind == Traffic::Pipeline;
  device_flat_ = make_nccl_communicator(group, levels_of(group, t), flat, settings_.timeout_s, kind);
  if (!use_hierarchy_) return;
  const std::pair<MPI_Comm, topo::Level> levels[] = {
      {node_comm_, topo::Level::Node}, {rack_comm_, topo::Level::Rack}, {cross_comm_, topo::Level::CrossRack}};
  std::unique_ptr<Communicator>* made[] = {&device_node_, &device_rack_, &device_cross_};
  for (int l = 0; l < 3; ++l) {
    if (level(l).size() == 1) continue;
    const NcclCommOptions options = communicator_options(nccl, levels[l].second, level(l).name());
    *made[l] = make_nccl_communicator(levels[l].first, levels_of(levels[l].first, t), options, settings_.timeout_s, kind);
  }
}

Communicator& GroupCollectives::device(const char* operation) {
  REQUIRE(device_flat_ != nullptr, operation << " on the " << name() << " group with a device stream, but its "
                                             "communicators were made for comm.backend = mpi (host memory only)");
  return *device_flat_;
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

Work GroupCollectives::device_all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) {
  const bool few = dtype == DType::f64 || dtype == DType::i32;
  if (few || !use_hierarchy_ || op != Op::Sum || settings_.algo == "mpi" || count == 0)
    return device("all-reduce").all_reduce(data, count, dtype, op, stream);
  return hierarchical_all_reduce(device_node_.get(), device_rack_.get(), device_cross_.get(), data, count, dtype, stream);
}

GroupCollectives::~GroupCollectives() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm* c : {&node_comm_, &rack_comm_, &cross_comm_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

void GroupCollectives::all_reduce_f32(float* data, size_t n, Op op) {
  if (flat_->size() == 1 || n == 0) return;
  if (settings_.algo == "mpi") return flat_->all_reduce_f32(data, n, Algo::Mpi, op);
  if (!use_hierarchy_ || op != Op::Sum) {
    // Inside one node the node's algorithm; across nodes, flat, a ring (NCCL's choice).
    return flat_->all_reduce_f32(data, n, span_ == topo::Level::Node ? settings_.node_algo : Algo::Ring, op);
  }
  // Inside the node: through shared memory with node_algo = shm, else the ring.
  const Algo inside = settings_.node_algo == Algo::Shm ? Algo::Shm : Algo::Ring;
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
void GroupCollectives::across_nodes(float* shard, size_t len) {
  constexpr size_t kMaxPieces = 8, kMinPiece = size_t(1) << 18, kPieceAlign = 4096;  // floats
  const size_t pieces = std::min(kMaxPieces, len / kMinPiece);
  if (rack_->size() == 1 || cross_->size() == 1 || pieces < 2) {
    rack_->all_reduce_f32(shard, len, settings_.rack_algo);
    cross_->all_reduce_f32(shard, len, settings_.cross_rack_algo);
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
      cross_->all_reduce_f32(shard + begin, end - begin, settings_.cross_rack_algo);
    }
  });
  for (size_t k = 0; k < count; ++k) {
    const auto [begin, end] = range(k);
    rack_->all_reduce_f32(shard + begin, end - begin, settings_.rack_algo);
    {
      std::lock_guard<std::mutex> lock(mutex);
      summed = k + 1;
    }
    summed_over_rack.notify_one();
  }
  cross_rack.join();
}

std::string GroupCollectives::describe() const {
  if (settings_.algo == "mpi") return "MPI_Allreduce";
  if (!use_hierarchy_) return std::string("flat over ") + std::to_string(flat_->size()) + " ranks";
  return "hierarchical: node " + std::to_string(node_->size()) + " x rack " +
         std::to_string(rack_->size()) + " x cross-rack " + std::to_string(cross_->size());
}

LevelBytes GroupCollectives::traffic() const {
  LevelBytes total;
  const Communicator* all[] = {flat_.get(),        node_.get(),        rack_.get(),        cross_.get(),
                               device_flat_.get(), device_node_.get(), device_rack_.get(), device_cross_.get()};
  for (const Communicator* c : all)
    for (int l = 0; c && l < 3; ++l)
      total.sent[l] += c->traffic().sent[l], total.received[l] += c->traffic().received[l];
  return total;
}

Work GroupCollectives::all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) {
  if (!stream.device.is_cpu()) return device_all_reduce(data, count, dtype, op, stream);
  if (dtype == DType::f64 || dtype == DType::i32) return flat_->all_reduce(data, count, dtype, op, stream);
  as_f32(data, count, dtype, wide_, [&](float* values) { all_reduce_f32(values, count, op); });
  return Work();
}

// The ring, as the ZeRO-1 reduction has always run it (node_algo does not apply).
Work GroupCollectives::reduce_scatter(void* data, size_t count, DType dtype, Op op, Stream stream) {
  if (!stream.device.is_cpu()) return device("reduce-scatter").reduce_scatter(data, count, dtype, op, stream);
  return flat_->reduce_scatter(data, count, dtype, op, stream);
}

Work GroupCollectives::all_gather(void* data, size_t count, DType dtype, Stream stream) {
  if (!stream.device.is_cpu()) return device("all-gather").all_gather(data, count, dtype, stream);
  return flat_->all_gather(data, count, dtype, stream);
}

Work GroupCollectives::broadcast(void* data, size_t count, DType dtype, int root, Stream stream) {
  if (!stream.device.is_cpu()) return device("broadcast").broadcast(data, count, dtype, root, stream);
  return flat_->broadcast(data, count, dtype, root, stream);
}

Work GroupCollectives::send(const void* data, size_t count, DType dtype, int peer, int tag, Stream stream) {
  if (!stream.device.is_cpu()) return device("send").send(data, count, dtype, peer, tag, stream);
  return flat_->send(data, count, dtype, peer, tag, stream);
}

Work GroupCollectives::recv(void* data, size_t count, DType dtype, int peer, int tag, Stream stream) {
  if (!stream.device.is_cpu()) return device("recv").recv(data, count, dtype, peer, tag, stream);
  return flat_->recv(data, count, dtype, peer, tag, stream);
}

Work GroupCollectives::gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) {
  if (!stream.device.is_cpu()) return device("gather").gather(in, out, count, dtype, root, stream);
  return flat_->gather(in, out, count, dtype, root, stream);
}

Work GroupCollectives::all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) {
  if (!stream.device.is_cpu()) return device("all-gather-values").all_gather_values(in, out, count, dtype, stream);
  return flat_->all_gather_values(in, out, count, dtype, stream);
}

Work GroupCollectives::barrier(Stream stream) {
  if (!stream.device.is_cpu()) return device("barrier").barrier(stream);
  return flat_->barrier(stream);
}

// Every level's operations on the stream are ordered before the flat communicator's fence (one
// event on the stream); its watchdog names this group.
Work GroupCollectives::fence(Stream stream) {
  if (stream.device.is_cpu() || device_flat_ == nullptr) return Work{};
  return device_flat_->fence(stream);
}

void GroupCollectives::observe_steps(StepObserver observer) {
  for (MpiCommunicator* c : {flat_.get(), node_.get(), rack_.get(), cross_.get()}) c->observe_steps(observer);
}

std::unique_ptr<Communicator> make_group_communicator(MPI_Comm group, const topo::Topology& topology,
                                                      const std::string& name,
                                                      const CollectiveSettings& settings, Traffic kind) {
  auto group_collectives = std::make_unique<GroupCollectives>(group, topology, name, settings, kind);
  return with_staging(with_links(std::move(group_collectives), settings.links),
                      settings.backend == "mpi" ? settings.staging : DeviceCopies{});
}

}  // namespace trident::comm
