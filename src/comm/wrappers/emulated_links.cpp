// The link model's wrapper: the delay of each reported step.
#include "comm/wrappers/emulated_links.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "core/clock.hpp"

namespace trident::comm {

double LinkModel::step_seconds(const TransferStep& step) const {
  double slowest = 0.0;
  for (const auto& [level, bytes] : step.level_bytes) slowest = std::max(slowest, seconds(static_cast<int>(level), bytes));
  return slowest;
}

void parse_link(const std::string& text, LinkModel& model, int level) {
  if (text == "off") {
    model.latency_s[level] = model.bandwidth_Bps[level] = 0;
    return;
  }
  double latency_us = 0, bandwidth_gbps = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lf,%lf%c", &latency_us, &bandwidth_gbps, &tail) != 2 ||
      latency_us < 0 || bandwidth_gbps <= 0)
    throw std::invalid_argument("'" + text + "' is not 'LATENCY_US,BANDWIDTH_GBPS' (e.g. 5,25) or off");
  model.latency_s[level] = latency_us * 1e-6;
  model.bandwidth_Bps[level] = bandwidth_gbps * 1e9;
}

EmulatedLinks::EmulatedLinks(std::unique_ptr<Communicator> inner, const LinkModel& links)
    : owned_(std::move(inner)), inner_(*owned_), links_(links) {
  inner_.observe_steps([this](const TransferStep& step) { delay(step); });
}

EmulatedLinks::EmulatedLinks(Communicator& borrowed, const LinkModel& links) : inner_(borrowed), links_(links) {
  inner_.observe_steps([this](const TransferStep& step) { delay(step); });
}

EmulatedLinks::~EmulatedLinks() { inner_.observe_steps({}); }

void EmulatedLinks::delay(const TransferStep& step) const {
  const double remaining = step.start + links_.step_seconds(step) - steady_seconds();
  if (remaining > 0) std::this_thread::sleep_for(std::chrono::duration<double>(remaining));
  if (next_) next_(step);
}

std::unique_ptr<Communicator> with_links(std::unique_ptr<Communicator> inner, const LinkModel& links) {
  if (!links.any()) return inner;
  return std::make_unique<EmulatedLinks>(std::move(inner), links);
}

}  // namespace trident::comm
