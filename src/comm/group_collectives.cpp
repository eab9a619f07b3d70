// The group router: host operations to the MPI communicators (flat, or the hierarchical
// all-reduce over the levels), device operations to the NCCL ones.
#include "comm/group_collectives.hpp"

#include "comm/mpi/native_handle.hpp"
#include "comm/nccl/nccl.hpp"
#include "core/error.hpp"
#include "core/mpi_util.hpp"

namespace trident::comm {

GroupCollectives::GroupCollectives(MPI_Comm group, const topo::Topology& t, const std::string& name,
                                   const CollectiveSettings& settings, Traffic kind)
    : settings_(settings) {
  const std::vector<int> members = world_ranks_of(group);
  span_ = t.span(members);
  flat_ = make_mpi_communicator(group, t, name, settings, kind);
  levels_ = std::make_unique<HostLevels>(group, members, t, name, settings, kind);
  // Every member computes `regular` from the same topology and member list: no need to agree.
  const bool regular = regular_layout(t, members);
  const bool spans_nodes = span_ != topo::Level::Node;
  if (settings.algo == "hierarchical" && !regular)
    fatal_all("comm.algo = hierarchical needs the same number of " + name + "-group members on "
              "every node; this layout puts different numbers on some nodes; use comm.algo = auto");
  use_hierarchy_ = regular && (settings.algo == "hierarchical" || (settings.algo == "auto" && spans_nodes));
  if (settings.backend == "nccl") make_device_communicators(group, t, kind);
}

GroupCollectives::GroupCollectives(Communicator& group, const topo::Topology& t, const std::string& name,
                                   const CollectiveSettings& settings, Traffic kind)
    : GroupCollectives(native_handle(group), t, name, settings, kind) {}

// Every member of a level communicator sees the same size and the same use_hierarchy_, so
// each NCCL communicator is made by all of its members or by none (creation is collective).
// Only the pipeline's, the context ring's and the tensor group's (parallel.tp_comm_overlap's
// rings) communicators carry point-to-point (two more NCCL communicators each).
void GroupCollectives::make_device_communicators(MPI_Comm group, const topo::Topology& t, Traffic kind) {
  const NcclSettings& nccl = settings_.nccl;
  NcclCommOptions flat = communicator_options(nccl, span_, name());
  flat.point_to_point = kind == Traffic::Pipeline || kind == Traffic::Context || kind == Traffic::Tensor;
  device_flat_ = make_nccl_communicator(group, levels_of(group, t), flat, settings_.timeout_s, kind);
  if (!use_hierarchy_) return;
  const std::pair<MPI_Comm, topo::Level> levels[] = {{levels_->handle(0), topo::Level::Node},
                                                      {levels_->handle(1), topo::Level::Rack},
                                                      {levels_->handle(2), topo::Level::CrossRack}};
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

Work GroupCollectives::device_all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) {
  const bool few = dtype == DType::f64 || dtype == DType::i32;
  if (few || !use_hierarchy_ || op != Op::Sum || settings_.algo == "mpi" || count == 0)
    return device("all-reduce").all_reduce(data, count, dtype, op, stream);
  return hierarchical_all_reduce(device_node_.get(), device_rack_.get(), device_cross_.get(), data, count, dtype, stream);
}

void GroupCollectives::all_reduce_f32(float* data, size_t n, Op op) {
  if (flat_->size() == 1 || n == 0) return;
  if (settings_.algo == "mpi") return flat_->all_reduce_f32(data, n, Algo::Mpi, op);
  if (!use_hierarchy_ || op != Op::Sum) {
    // Inside one node the node's algorithm; across nodes, flat, a ring (NCCL's choice).
    return flat_->all_reduce_f32(data, n, span_ == topo::Level::Node ? settings_.node_algo : Algo::Ring, op);
  }
  levels_->all_reduce_f32(data, n);
}

std::string GroupCollectives::describe() const {
  if (settings_.algo == "mpi") return "MPI_Allreduce";
  if (!use_hierarchy_) return std::string("flat over ") + std::to_string(flat_->size()) + " ranks";
  return levels_->describe();
}

LevelBytes GroupCollectives::traffic() const {
  LevelBytes total;
  const Communicator* all[] = {flat_.get(),        &levels_->level(0), &levels_->level(1), &levels_->level(2),
                               device_flat_.get(), device_node_.get(), device_rack_.get(), device_cross_.get()};
  for (const Communicator* c : all)
    for (int l = 0; c && l < 3; ++l)
      total.sent[l] += c->traffic().sent[l], total.received[l] += c->traffic().received[l];
  return total;
}

Work GroupCollectives::all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) {
  if (!stream.device.is_cpu()) return device_all_reduce(data, count, dtype, op, stream);
  // Scalars through MPI's own collective; 16-bit values by the flat ring with 16-bit messages
  // (comm/mpi/mpi_communicator.hpp), the hierarchy's levels being f32 algorithms.
  if (dtype != DType::f32) return flat_->all_reduce(data, count, dtype, op, stream);
  all_reduce_f32(static_cast<float*>(data), count, op);
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

Work GroupCollectives::send_recv(const void* out, void* in, size_t count, DType dtype, int to, int from, int tag,
                                 Stream stream) {
  if (!stream.device.is_cpu()) return device("ring step").send_recv(out, in, count, dtype, to, from, tag, stream);
  return flat_->send_recv(out, in, count, dtype, to, from, tag, stream);
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
  for (MpiCommunicator* c : {flat_.get(), &levels_->level(0), &levels_->level(1), &levels_->level(2)})
    c->observe_steps(observer);
}

std::unique_ptr<Communicator> make_group_communicator(MPI_Comm group, const topo::Topology& topology,
                                                      const std::string& name,
                                                      const CollectiveSettings& settings, Traffic kind) {
  auto group_collectives = std::make_unique<GroupCollectives>(group, topology, name, settings, kind);
  return with_staging(with_links(std::move(group_collectives), settings.links),
                      settings.backend == "mpi" ? settings.staging : DeviceCopies{});
}

std::unique_ptr<Communicator> make_group_communicator(Communicator& group, const topo::Topology& topology,
                                                      const std::string& name, const CollectiveSettings& settings,
                                                      Traffic kind) {
  return make_group_communicator(native_handle(group), topology, name, settings, kind);
}

}  // namespace trident::comm
