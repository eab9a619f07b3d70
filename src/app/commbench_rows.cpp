// The values commbench's rows start from and the checks of what they end with.
#include "app/commbench_rows.hpp"

#include <algorithm>

#include "comm/communicator.hpp"
#include "core/clock.hpp"

namespace trident {

namespace {
float sum_at(int n, size_t i) { return float(n * (n + 1) / 2 * (i % 7 + 1)); }  // of fill_sum's values
}  // namespace

void CommbenchValues::fill_sum(std::vector<float>& v) const {
  for (size_t i = 0; i < v.size(); ++i) v[i] = float((r + 1) * (i % 7 + 1));
}

size_t CommbenchValues::wrong_sum(const std::vector<float>& v) const {
  size_t wrong = 0;
  for (size_t i = 0; i < v.size(); ++i) wrong += v[i] != sum_at(n, i);
  return wrong;
}

size_t CommbenchValues::wrong_own_sum(const std::vector<float>& v) const {
  const auto seg = comm::segment_of(v.size(), n, r);
  size_t wrong = 0;
  for (size_t i = seg.first; i < seg.second; ++i) wrong += v[i] != sum_at(n, i);
  return wrong;
}

void CommbenchValues::fill_own(std::vector<float>& v) const {
  const auto seg = comm::segment_of(v.size(), n, r);
  std::fill(v.begin(), v.end(), 0.0f);
  std::fill(v.begin() + seg.first, v.begin() + seg.second, float(r + 1));
}

size_t CommbenchValues::wrong_gathered(const std::vector<float>& v) const {
  size_t wrong = 0;
  for (int k = 0; k < n; ++k) {
    const auto seg = comm::segment_of(v.size(), n, k);
    for (size_t i = seg.first; i < seg.second; ++i) wrong += v[i] != float(k + 1);
  }
  return wrong;
}

CommbenchRow collective_row(Collective c, const std::string& algorithm, const CommbenchValues& values) {
  const int n = values.n;
  CommbenchRow row;
  row.algorithm = algorithm;
  row.fill = [values](std::vector<float>& v) { values.fill_sum(v); };
  switch (c) {
    case Collective::all_reduce:
      row.collective = "all_reduce", row.bus_factor = 2.0 * (n - 1) / n;
      row.wrong = [values](const std::vector<float>& v) { return values.wrong_sum(v); };
      break;
    case Collective::reduce_scatter:
      row.collective = "reduce_scatter", row.bus_factor = double(n - 1) / n;
      row.wrong = [values](const std::vector<float>& v) { return values.wrong_own_sum(v); };
      break;
    case Collective::all_gather:
      row.collective = "all_gather", row.bus_factor = double(n - 1) / n;
      row.fill = [values](std::vector<float>& v) { values.fill_own(v); };
      row.wrong = [values](const std::vector<float>& v) { return values.wrong_gathered(v); };
      break;
  }
  return row;
}

std::pair<double, double> link_figures(int size, const std::function<CommbenchRow(size_t)>& all_reduce) {
  if (size == 1) return {0.0, 0.0};
  auto mean = [&](size_t count, int iterations) {
    const CommbenchRow row = all_reduce(count);
    std::vector<float> v(count);
    row.fill(v);
    row.run(v);  // warm-up
    if (row.finish) row.finish();
    const double start = steady_seconds();
    for (int i = 0; i < iterations; ++i) row.run(v);
    if (row.finish) row.finish();
    return (steady_seconds() - start) / iterations;
  };
  const size_t large = size_t(4) << 20;
  const double latency = mean(2, 50) / (2.0 * (size - 1));
  const double seconds = mean(large, 5);
  const double busbw = large * sizeof(float) / seconds * 2.0 * (size - 1) / size;
  return {latency, busbw};
}

}  // namespace trident
