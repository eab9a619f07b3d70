// What the planner (src/plan/) is given from a deck, shared by `trident plan` and by
// parallel.layout = auto (job/auto_layout.hpp): the workload and the deck's layout as the
// planner sees them, a hardware profile by name, and a layout back as deck keys.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "deck/deck.hpp"
#include "deck/record.hpp"
#include "job/settings.hpp"
#include "plan/hardware.hpp"
#include "plan/step_model.hpp"

namespace trident {

// inputs/hardware/NAME.ini from the working directory or beside the executable, or a path.
std::string profile_path(const std::string& name);
// The profile NAME names, read on rank 0 of `world` and shared (every rank parses the same
// bytes); a missing or malformed one is a UserError naming it and `named_by` (the flag or key).
plan::Hardware load_hardware(comm::Communicator& world, const std::string& name, const std::string& named_by);

plan::Workload workload_from(const RunSettings& settings, const deck::Record& deck);
plan::Layout layout_from(const RunSettings& settings, const plan::Hardware& hw);

// A layout's deck keys: parallel.tensor, pipeline, data, context, virtual_stages, schedule,
// sequence_parallel, tp_comm_overlap, stage_layers (the even split), train.micro_batch,
// memory.recompute, optim.zero.
std::vector<deck::Override> layout_overrides(const plan::Layout& layout);
// `overrides` without the keys that `replacements` set (a key given twice is a deck error): the
// command line's overrides beneath a layout's keys, or a probe's.
std::vector<deck::Override> without_keys_of(const std::vector<deck::Override>& overrides,
                                            const std::vector<deck::Override>& replacements);

}  // namespace trident
