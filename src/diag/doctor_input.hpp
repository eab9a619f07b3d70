// What `trident doctor` reads of a run directory: the figures of its metrics.h5 that the rules
// of diag/doctor.hpp check (series after the warm-up step, the deck's attributes, checkpoints,
// memory peaks) and the memory budget to compare the peaks with.
#pragma once

#include <string>

#include "diag/doctor.hpp"

namespace trident {

// budget_gb > 0 (doctor's --budget_gb) is the budget per rank; else the run's memory.budget_gb
// when set; else this host's memory shared by the ranks of a node (budget_source says which).
// A directory without a readable metrics.h5 is a UserError.
diag::RunFigures read_run_figures(const std::string& dir, double budget_gb = 0);

}  // namespace trident
