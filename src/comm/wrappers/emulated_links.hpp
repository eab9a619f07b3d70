// The α-β link model of single-host emulation, as a wrapper around any communicator: every
// step of transfers the wrapped communicator completes (a ring exchange, a tree chunk, a
// shared-memory chunk, a receive) takes at least latency + bytes / bandwidth of the
// slowest level it crossed — the real transfer counts towards it — so ranks on one host see the
// link speeds of the emulated cluster. The wrapper delays completion only: results, byte counts
// and the order of operations are the wrapped communicator's.
//
// Why per step and not per operation: the hierarchical all-reduce pipelines its rack and
// cross-rack levels piece by piece, and a ring's time is its steps' (2(P−1) latencies); a delay
// of the whole operation would lose both. The wrapped communicator reports its steps through
// Communicator::observe_steps; the model and the waiting live here, outside the transfer path.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "comm/communicator.hpp"

namespace trident::comm {

struct LinkModel {
  std::array<double, 3> latency_s{}, bandwidth_Bps{};  // by topo::Level; bandwidth 0 = off
  bool enabled(int level) const { return bandwidth_Bps[level] > 0; }
  bool any() const { return enabled(0) || enabled(1) || enabled(2); }
  double seconds(int level, double bytes) const {
    return enabled(level) ? latency_s[level] + bytes / bandwidth_Bps[level] : 0.0;
  }
  // The least time a step takes: its slowest transfer's.
  double step_seconds(const TransferStep& step) const;
};
// "LATENCY_US,BANDWIDTH_GBPS" or "off"; throws std::invalid_argument.
void parse_link(const std::string& text, LinkModel& model, int level);

class EmulatedLinks final : public Communicator {
 public:
  // Wraps `inner` (owned, or not: `borrowed`), which reports its steps to this wrapper from now on.
  EmulatedLinks(std::unique_ptr<Communicator> inner, const LinkModel& links);
  EmulatedLinks(Communicator& borrowed, const LinkModel& links);
  ~EmulatedLinks() override;
  EmulatedLinks(const EmulatedLinks&) = delete;
  EmulatedLinks& operator=(const EmulatedLinks&) = delete;

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const std::string& name() const override { return inner_.name(); }
  LevelBytes traffic() const override { return inner_.traffic(); }
  Work all_reduce(void* data, size_t count, DType dtype, Op op, Stream stream) override {
    return inner_.all_reduce(data, count, dtype, op, stream);
  }
  Work reduce_scatter(void* data, size_t count, DType dtype, Op op, Stream stream) override {
    return inner_.reduce_scatter(data, count, dtype, op, stream);
  }
  Work all_gather(void* data, size_t count, DType dtype, Stream stream) override {
    return inner_.all_gather(data, count, dtype, stream);
  }
  Work broadcast(void* data, size_t count, DType dtype, int root, Stream stream) override {
    return inner_.broadcast(data, count, dtype, root, stream);
  }
  Work send(const void* data, size_t count, DType dtype, int peer, int tag, Stream stream) override {
    return inner_.send(data, count, dtype, peer, tag, stream);
  }
  Work recv(void* data, size_t count, DType dtype, int peer, int tag, Stream stream) override {
    return inner_.recv(data, count, dtype, peer, tag, stream);
  }
  Work send_recv(const void* out, void* in, size_t count, DType dtype, int to, int from, int tag,
                 Stream stream) override {
    return inner_.send_recv(out, in, count, dtype, to, from, tag, stream);
  }
  Work gather(const void* in, void* out, size_t count, DType dtype, int root, Stream stream) override {
    return inner_.gather(in, out, count, dtype, root, stream);
  }
  Work all_gather_values(const void* in, void* out, size_t count, DType dtype, Stream stream) override {
    return inner_.all_gather_values(in, out, count, dtype, stream);
  }
  Work barrier(Stream stream) override { return inner_.barrier(stream); }
  Work fence(Stream stream) override { return inner_.fence(stream); }
  // A further observer (another wrapper) sees each step after this one's delay.
  void observe_steps(StepObserver observer) override { next_ = std::move(observer); }

  const LinkModel& links() const { return links_; }

 private:
  void delay(const TransferStep& step) const;  // sleeps until step.start + the model's time
  std::unique_ptr<Communicator> owned_;
  Communicator& inner_;
  LinkModel links_;
  StepObserver next_;
};

// `inner` itself when the model slows no level, else wrapped in EmulatedLinks.
std::unique_ptr<Communicator> with_links(std::unique_ptr<Communicator> inner, const LinkModel& links);

}  // namespace trident::comm
