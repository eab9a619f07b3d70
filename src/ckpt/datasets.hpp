// The datasets of a checkpoint file: their names and shapes by kind, and the checks a file's
// datasets pass before anything is read from them or sized by them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/metadata.hpp"
#include "core/h5.hpp"
#include "model/config.hpp"

namespace trident::ckpt {

// The datasets of a checkpoint of this kind, e.g. "params/wte", "adamw_m/blocks.qkvw", with
// their global shapes: every tensor of the model that has elements (the slots an architecture
// leaves empty — llama's biases, GPT-2's untied head — have no dataset).
std::vector<std::pair<std::string, std::vector<int64_t>>> checkpoint_datasets(const model::GptConfig& config,
                                                                              const std::string& kind);
// Sections: 0 the parameters ("params"), 1 and 2 AdamW's moments ("adamw_m", "adamw_v");
// tensor: model/params.hpp's index, named as the architecture names it. "params/wte".
std::string dataset_name(const model::GptConfig& config, int section, int tensor);
// Whether tensor t of the whole model has elements, and so a dataset.
bool has_dataset(const model::GptConfig& config, int tensor);
int sections_of(const std::string& kind);  // full: 3, fast: 1

// Every dataset the metadata promises is there as trident writes it (hard links only, float32,
// contiguous, its bytes all in the file), all of them together no larger than the file: ""
// or the first problem.
std::string storage_problem(hid_t file, const std::string& path, const Metadata& metadata);

}  // namespace trident::ckpt
