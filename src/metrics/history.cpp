// The metrics history in memory.
#include "metrics/history.hpp"

#include <algorithm>
#include <limits>

namespace trident::metrics {

void Series::resize(size_t rows) {
  if (integer) ints.resize(rows, 0);
  else real.resize(rows, std::numeric_limits<double>::quiet_NaN());
}

void History::apply(const SeriesRows& rows) {
  Series& target = series[rows.name];
  if (target.size() == 0) target.integer = rows.integer;
  const size_t end = rows.first_row + rows.size();
  if (target.size() < end) target.resize(end);
  // A series keeps the type it was created with (an int64 dataset stays one).
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t row = rows.first_row + i;
    if (target.integer)
      target.ints[row] = rows.integer ? rows.ints[i] : static_cast<long long>(rows.real[i]);
    else
      target.real[row] = rows.integer ? double(rows.ints[i]) : rows.real[i];
  }
}

std::string index_series_of(const std::string& name) {
  if (name.rfind("val_", 0) == 0) return "val_step";
  if (name.rfind("checkpoint/", 0) == 0) return "checkpoint/step";
  if (name.rfind("balance/", 0) == 0) return "balance/step";  // one row per measurement
  return "step";
}

void History::cut_back(int64_t step) {
  std::map<std::string, size_t> kept;  // per index series: its rows of steps <= step
  for (const char* index : {"step", "val_step", "checkpoint/step", "balance/step"}) {
    const auto found = series.find(index);
    if (found == series.end()) continue;
    size_t rows = 0;
    while (rows < found->second.size() && found->second.at(rows) <= double(step)) ++rows;
    kept[index] = rows;
  }
  for (auto& [name, values] : series) {
    const auto index = kept.find(index_series_of(name));
    values.resize(std::min(values.size(), index == kept.end() ? size_t(0) : index->second));
  }
}

void History::set_attributes(const Attributes& replacements) {
  for (const auto& [name, value] : replacements) {
    auto same = std::find_if(attributes.begin(), attributes.end(), [&](const auto& a) { return a.first == name; });
    if (same == attributes.end()) attributes.emplace_back(name, value);
    else same->second = value;
  }
}

}  // namespace trident::metrics
