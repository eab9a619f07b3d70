// trident commbench's table rows: one collective by one algorithm, with the data it starts from
// and the check of what it must end with — on host memory (our algorithms and MPI's,
// cmd_commbench.cpp) or on a device (NCCL's, commbench_device.cpp), over the same values.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace trident {

struct CommbenchRow {
  std::string collective, algorithm;
  double bus_factor = 0;  // nccl-tests: all-reduce 2(n−1)/n, reduce-scatter and all-gather (n−1)/n
  // Each takes the host copy of the data (a device row keeps the operand on its device: fill
  // uploads it, wrong downloads it first).
  std::function<void(std::vector<float>&)> run;
  std::function<size_t(const std::vector<float>&)> wrong;  // after one run on fresh data
  std::function<void(std::vector<float>&)> fill;
  // Until the runs queued so far are done (a device row's run only queues); empty: run waits.
  std::function<void()> finish;
};

// The values the rows of a group of n ranks start from on rank r, and what each collective must
// leave: every element an exact small integer, so a wrong sum cannot hide in rounding.
struct CommbenchValues {
  int n, r;
  void fill_sum(std::vector<float>& v) const;        // rank r: (r + 1)·(i % 7 + 1)
  size_t wrong_sum(const std::vector<float>& v) const;  // all-reduce: elements not n(n+1)/2·(i % 7 + 1)
  size_t wrong_own_sum(const std::vector<float>& v) const;  // reduce-scatter: rank r's segment only
  void fill_own(std::vector<float>& v) const;        // all-gather's input: r + 1 in rank r's segment, else 0
  size_t wrong_gathered(const std::vector<float>& v) const;  // all-gather: segment k not k + 1
};

enum class Collective { all_reduce, reduce_scatter, all_gather };

// Collective `c`'s row by `algorithm` over `values`' group without its run: its name, its bus
// factor, its data (fill_sum, or fill_own for the all-gather) and its check (wrong_sum,
// wrong_own_sum, wrong_gathered), on host memory.
CommbenchRow collective_row(Collective c, const std::string& algorithm, const CommbenchValues& values);

// A level's α and β as the planner's link model takes them (plan/hardware.hpp: a ring all-reduce
// of S bytes over n ranks takes 2(n−1)·α + 2(n−1)/n·S/β): α a ring step's latency, from a small
// all-reduce's time over its 2(n−1) steps, and β the bus bandwidth of a large one. all_reduce(k):
// the row of an all-reduce of k floats over the level's `size` ranks. {0, 0} for one rank.
std::pair<double, double> link_figures(int size, const std::function<CommbenchRow(size_t)>& all_reduce);

}  // namespace trident
