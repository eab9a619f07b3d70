// trident commbench's rows on device buffers (NCCL's, or MPI's staged) and NCCL's per-level links.
#include "app/commbench_device.hpp"

#include <functional>

#include "kernels/backend.hpp"
#include "kernels/kernels.hpp"
#include "tensor/buffer.hpp"

namespace trident {

namespace {

// One operand in device memory and the collectives queued on it (each Work waits on its event).
struct DeviceOperand {
  DeviceOperand(const kernels::Context& device, size_t count)
      : ctx(device), buffer(count, MemoryCategory::Workspace, kernels::backend_of(device), MemoryKind::device) {}
  // Landed when it returns (a CUDA copy from pageable memory may still run after the call): a
  // row's clock starts after it.
  void upload(const std::vector<float>& values) {
    kernels::upload(ctx, buffer.view(), values.data());
    kernels::Backend& backend = kernels::backend_of(ctx);
    backend.seconds_between(backend.mark(ctx.stream), backend.mark(ctx.stream));  // waits for the stream
  }
  void finish() {
    for (comm::Work& work : queued) work.wait();
    queued.clear();
  }
  std::vector<float> download() {
    finish();
    std::vector<float> values(buffer.size());
    kernels::download(ctx, values.data(), buffer.view());
    return values;
  }
  kernels::Context ctx;
  Buffer<float> buffer;  // (count) f32
  std::vector<comm::Work> queued;
};

using Enqueue = std::function<comm::Work(float* data, size_t count, Stream stream)>;

// Collective `c`'s row on the operand: fill uploads the host data, run only queues `enqueue` on
// the operand's stream, finish waits for what it queued, wrong checks the downloaded result.
CommbenchRow device_row(Collective c, const std::string& algorithm, const std::shared_ptr<DeviceOperand>& operand,
                        const CommbenchValues& values, Enqueue enqueue) {
  CommbenchRow row = collective_row(c, algorithm, values);
  row.run = [operand, enqueue](std::vector<float>& v) {
    operand->queued.push_back(enqueue(operand->buffer.data(), v.size(), operand->ctx.stream));
  };
  row.wrong = [operand, wrong = row.wrong](const std::vector<float>&) { return wrong(operand->download()); };
  row.fill = [operand, fill = row.fill](std::vector<float>& v) {
    fill(v);
    operand->upload(v);
  };
  row.finish = [operand] { operand->finish(); };
  return row;
}

comm::CollectiveSettings with_algo(const comm::CollectiveSettings& job, const std::string& algo) {
  comm::CollectiveSettings settings = job;
  settings.algo = algo;  // flat: the group as one (NCCL's all-reduce; MPI's node or ring algorithm); auto: over its levels where it spans nodes
  settings.links = {};   // the host rows show the link model; these, the device's own path
  return settings;
}

auto all_reduce_on(comm::Communicator& c) {
  return [&c](float* data, size_t k, Stream s) { return c.all_reduce(data, k, DType::f32, comm::Op::Sum, s); };
}

}  // namespace

DeviceCommbench::DeviceCommbench(comm::GroupCollectives& world_group, const Job& job)
    : rank_(world_group.rank()),
      size_(world_group.size()),
      name_(job.settings.comm.collectives.backend == "nccl" ? "nccl" : "staged"),
      device_(job.device) {
  const comm::CollectiveSettings& settings = job.settings.comm.collectives;
  auto made = [&](comm::Communicator& group, const std::string& name, const std::string& algo) {
    return comm::make_group_communicator(group, job.topology, name, with_algo(settings, algo));
  };
  flat_ = made(world_group.flat(), "world (device, flat)", "flat");
  if (world_group.hierarchical()) hierarchical_ = made(world_group.flat(), "world (device)", "auto");
  if (name_ != "nccl") return;  // MPI's links are the host rows' (link_figures over the host levels)
  for (int l = 0; l < 3; ++l)
    if (world_group.level(l).size() > 1) levels_[l] = made(world_group.level(l), world_group.level(l).name(), "flat");
}

std::vector<CommbenchRow> DeviceCommbench::rows(size_t count) {
  const CommbenchValues values{size_, rank_};
  const auto operand = std::make_shared<DeviceOperand>(device_, count);
  comm::Communicator& flat = *flat_;
  std::vector<CommbenchRow> list = {device_row(Collective::all_reduce, name_, operand, values, all_reduce_on(flat))};
  if (hierarchical_)
    list.push_back(device_row(Collective::all_reduce, name_ + "_hier", operand, values, all_reduce_on(*hierarchical_)));
  list.push_back(device_row(Collective::reduce_scatter, name_, operand, values, [&flat](float* data, size_t k, Stream s) {
    return flat.reduce_scatter(data, k, DType::f32, comm::Op::Sum, s);
  }));
  list.push_back(device_row(Collective::all_gather, name_, operand, values, [&flat](float* data, size_t k, Stream s) {
    return flat.all_gather(data, k, DType::f32, s);
  }));
  return list;
}

std::pair<double, double> DeviceCommbench::level_figures(int level) {
  if (!levels_[level]) return {0.0, 0.0};
  comm::Communicator& c = *levels_[level];
  return link_figures(c.size(), [&](size_t count) {
    return device_row(Collective::all_reduce, name_, std::make_shared<DeviceOperand>(device_, count),
                      CommbenchValues{c.size(), c.rank()}, all_reduce_on(c));
  });
}

}  // namespace trident
