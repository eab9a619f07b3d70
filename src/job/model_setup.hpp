// The model a deck describes: its configuration and its initial parameters (random from
// train.seed, or what model.init names — an llm.c model file or a Hugging Face model directory,
// model/hf_model.hpp — checked against the deck).
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "deck/record.hpp"
#include "job/settings.hpp"
#include "layout/grid.hpp"
#include "model/transformer.hpp"
#include "optim/loss_scaler.hpp"

namespace trident {

// Where the model's kernels run: the device's default stream, or with cuda.graphs one a capture
// can record (released with the process).
kernels::Context model_context(const kernels::Context& device, const KernelSettings& kernels);

// The deck's choices of how the model computes what it computes — model.attention (flash or
// materialized) and model.classifier_chunk — set on `model`: every command that runs a forward
// makes them as training does.
void set_attention_and_classifier(model::Transformer& model, const ModelSettings& settings);

// The model of [model]. Collective in effect (every rank reads the same header): a model.init
// file that is missing, malformed or disagrees with the deck is a UserError naming both.
model::GptConfig model_config(const ModelSettings& model, const deck::Record& deck);
// The part of the model world rank `rank` holds: its tensor slice and its pipeline stage's
// blocks (parallel.stage_layers or the even split).
model::Partition partition_for_rank(const RunSettings& settings, const layout::Grid& grid, int rank);
// The same under an explicit split, e.g. one balance.pipeline chose: blocks per virtual stage
// u = chunk·pipeline + stage, pipeline·v of them (v = 1: blocks per stage); more than pipeline
// counts is the interleaved split (model::interleaved_partition).
model::Partition partition_for_rank(const std::vector<int>& split, const layout::Grid& grid, int rank);
// The run's split as above: parallel.stage_layers, else the even split of model.layers over the
// pipeline·v virtual stages (pipeline::stage_layer_counts).
std::vector<int> layer_split(const RunSettings& settings);
// parallel.virtual_stages = v > 1: layer_split; empty when v = 1.
std::vector<int> virtual_layer_counts(const RunSettings& settings);
// Blocks per pipeline stage: parallel.stage_layers, or the even split of model.layers; interleaved,
// the sum of the stage's chunks.
std::vector<int> stage_layer_counts(const RunSettings& settings, int stages);

// This rank's slice of the initial model in host memory: random by the counter-based rule, or
// cut from model.init's llm.c file, or read (its rows only) from its Hugging Face directory.
// The whole model with the default slice.
std::vector<float> initial_parameters(const RunSettings& settings, const model::GptConfig& config,
                                      const model::Partition& slice = {});
std::vector<float> initial_parameters(const RunSettings& settings, const model::Transformer& gpt);
// The same uploaded into the model (rounded to a 16-bit model's type).
void initialise_parameters(const RunSettings& settings, model::Transformer& gpt);
// The whole model (llm.c order), assembled on world rank 0 from the slices `mine` (this rank's
// fp32 parameters, of partition `part`) of data replica 0's ranks (every tensor slice of every
// stage), which send them over `world` (every rank, in world-rank order; under its watchdog);
// empty on every other rank. split: the ranks' split now (blocks per virtual stage, as
// partition_for_rank's).
std::vector<float> gather_whole_model(const model::GptConfig& config, const model::Partition& part,
                                      const std::vector<float>& mine, const std::vector<int>& split,
                                      const layout::Grid& grid, comm::Communicator& world);

}  // namespace trident
