// Model configuration and initialisation from the deck.
#include "job/model_setup.hpp"

#include <cstdio>
#include <numeric>
#include <tuple>
#include <stdexcept>

#include "core/error.hpp"
#include "model/hf_model.hpp"
#include "model/llmc_io.hpp"
#include "pipeline/schedule.hpp"

namespace trident {
namespace {

void require_match(const deck::Record& deck, const std::string& key, int from_deck, int from_header,
                   const std::string& file) {
  if (from_deck != from_header)
    fatal_all(file + ": the model file has " + key + " = " + std::to_string(from_header) +
              " but the deck says " + deck.cite(key) + "; make the deck match the file (" +
              deck.cite("model.init") + ")");
}

std::string real_text(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(v));
  return text;
}

// The llama keys of the deck against a Hugging Face config.json: each must say what the file does.
void require_llama_match(const deck::Record& deck, const model::GptConfig& ours, const model::GptConfig& file_config,
                         const std::string& file) {
  require_match(deck, "model.kv_heads", model::kv_heads(ours), model::kv_heads(file_config), file);
  require_match(deck, "model.ffn_hidden", ours.ffn_hidden, file_config.ffn_hidden, file);
  if (ours.tie_embeddings != file_config.tie_embeddings) {
    const std::string tied = file_config.tie_embeddings ? "true" : "false";
    fatal_all(file + ": the model file has tie_word_embeddings = " + tied + " but the deck says " +
              deck.cite("model.tie_embeddings") + "; set model.tie_embeddings = " + tied + " (" +
              deck.cite("model.init") + ")");
  }
  // (key, the deck's, the file's, one of the rotary scaling's: compared only where either scales)
  const std::tuple<const char*, float, float, bool> reals[] = {
      {"model.rope_theta", ours.rope_theta, file_config.rope_theta, false},
      {"model.norm_eps", ours.norm_eps, file_config.norm_eps, false},
      {"model.rope_factor", ours.rope_factor, file_config.rope_factor, true},
      {"model.rope_low_freq_factor", ours.rope_low_freq_factor, file_config.rope_low_freq_factor, true},
      {"model.rope_high_freq_factor", ours.rope_high_freq_factor, file_config.rope_high_freq_factor, true},
      {"model.rope_original_context", ours.rope_original_context, file_config.rope_original_context, true}};
  for (const auto& [key, from_deck, from_file, scaling] : reals) {
    if (from_deck == from_file) continue;
    if (scaling && !model::rope_scaled(ours) && !model::rope_scaled(file_config)) continue;  // neither scales
    fatal_all(file + ": the model file has " + key + " = " + real_text(from_file) +
              (scaling && !model::rope_scaled(file_config) ? " (no rotary scaling)" : "") + " but the deck says " +
              (scaling ? deck.cite("model.rope_scaling") + ", " : std::string()) + deck.cite(key) +
              "; make the deck match the file (" + deck.cite("model.init") + ")");
  }
}

}  // namespace

model::GptConfig model_config(const ModelSettings& model, const deck::Record& deck) {
  model::GptConfig c;
  c.layers = model.layers;
  c.heads = model.heads;
  c.channels = model.hidden;
  c.vocab = model.vocab;
  c.max_seq_len = model.seq_len;
  c.padded_vocab = model::padded_vocab_for(c.vocab);
  c.arch = model.arch;
  c.kv_heads = model.kv_heads;
  c.ffn_hidden = model.ffn_hidden;
  c.rope_theta = model.rope_theta;
  c.norm_eps = model.norm_eps;
  c.rope_factor = model.rope_factor;
  c.rope_low_freq_factor = model.rope_low_freq_factor;
  c.rope_high_freq_factor = model.rope_high_freq_factor;
  c.rope_original_context = model.rope_original_context;
  c.tie_embeddings = model.tie_embeddings;
  if (!model.from_file()) return c;
  const std::string& file = model.init;
  const bool hf = model::is_hf_directory(file);
  if (model::is_llama(c) && !hf)
    fatal_all(deck.cite("model.init") + ", but an llm.c model file holds GPT-2 (" + deck.cite("model.arch") +
              "); give a Hugging Face LlamaForCausalLM directory (config.json and model.safetensors) or 'random'");
  model::GptConfig header;
  try {
    header = hf ? model::read_hf_model_config(file) : model::read_llmc_header(file);
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + " (" + deck.cite("model.init") +
              "); give an llm.c fp32 model file, a Hugging Face model directory (config.json and model.safetensors) "
              "or 'random'");
  }
  if (header.arch != c.arch)
    fatal_all(file + ": the model file is " + model::arch_name(header.arch) + " but the deck says " +
              deck.cite("model.arch") + "; make the deck match the file (" + deck.cite("model.init") + ")");
  require_match(deck, "model.layers", model.layers, header.layers, file);
  require_match(deck, "model.heads", model.heads, header.heads, file);
  require_match(deck, "model.hidden", model.hidden, header.channels, file);
  require_match(deck, "model.vocab", model.vocab, header.vocab, file);
  if (model::is_llama(c)) require_llama_match(deck, c, header, file);
  if (model.seq_len > header.max_seq_len)
    fatal_all(file + ": the model file's " + (model::is_llama(c) ? "max_position_embeddings is " : "position table has ") +
              std::to_string(header.max_seq_len) + (model::is_llama(c) ? "" : " rows") + " but the deck asks for " +
              deck.cite("model.seq_len") + "; use at most " + std::to_string(header.max_seq_len));
  if (hf) {  // every rank reads its own slice later: all checked here, together
    try {
      model::check_hf_model_files(file, header);
    } catch (const std::runtime_error& e) {
      fatal_all(std::string(e.what()) + " (" + deck.cite("model.init") + ")");
    }
  }
  return header;
}

std::vector<float> initial_parameters(const RunSettings& settings, const model::GptConfig& config,
                                      const model::Partition& slice) {
  std::vector<float> values(static_cast<size_t>(model::num_parameters(config, slice)));  // on the host
  if (!settings.model.from_file()) {
    model::init_params(config, values.data(), settings.train.seed, slice);
    return values;
  }
  // The files were checked whole by model_config: what fails now changed under the job.
  try {
    if (model::is_hf_directory(settings.model.init)) {
      model::read_hf_model_slice(settings.model.init, config, slice, values.data());
      return values;
    }
    std::vector<float> whole(static_cast<size_t>(model::num_parameters(config)));
    model::read_llmc_params(settings.model.init, config, whole.data());
    model::extract_slice(config, whole.data(), values.data(), slice);
  } catch (const std::runtime_error& e) {
    fatal_one(e.what());
  }
  return values;
}

std::vector<float> initial_parameters(const RunSettings& settings, const model::Transformer& gpt) {
  return initial_parameters(settings, gpt.config(), gpt.tensor_group().slice);
}

void initialise_parameters(const RunSettings& settings, model::Transformer& gpt) {
  gpt.upload_params(initial_parameters(settings, gpt).data());
}

std::vector<int> layer_split(const RunSettings& settings) {
  std::vector<long> given;
  for (int64_t n : settings.parallel.stage_layers) given.push_back(static_cast<long>(n));
  return pipeline::stage_layer_counts(settings.model.layers,
                                      settings.parallel.pipeline * settings.parallel.virtual_stages, given);
}

std::vector<int> virtual_layer_counts(const RunSettings& settings) {
  return settings.parallel.virtual_stages == 1 ? std::vector<int>{} : layer_split(settings);
}

std::vector<int> stage_layer_counts(const RunSettings& settings, int stages) {
  return pipeline::stage_totals(layer_split(settings), stages);
}

model::Partition partition_for_rank(const RunSettings& settings, const layout::Grid& grid, int rank) {
  return partition_for_rank(layer_split(settings), grid, rank);
}

model::Partition partition_for_rank(const std::vector<int>& split, const layout::Grid& grid, int rank) {
  const layout::Coord coord = grid.coord_of(rank);
  if (static_cast<int>(split.size()) > grid.pp_size())
    return model::interleaved_partition(split, grid.pp_size(), coord.pp, coord.tp, grid.tp_size());
  return model::stage_partition(split, coord.pp, coord.tp, grid.tp_size());
}

namespace {

// Adds the part `part` holds (`values`, its local layout) into the whole model.
void place_part(const model::GptConfig& config, const model::Partition& part, const float* values,
                std::vector<float>& whole) {
  const auto global_specs = model::param_specs(config);
  const auto specs = model::param_specs(config, part);
  int64_t global_offset = 0, local_offset = 0;
  for (int t = 0; t < model::kNumParamTensors; ++t) {
    for (int64_t i = 0; i < specs[t].count(); ++i)
      whole[global_offset + model::global_index(config, part, t, i)] = values[local_offset + i];
    global_offset += global_specs[t].count();
    local_offset += specs[t].count();
  }
}

}  // namespace

std::vector<float> gather_whole_model(const model::GptConfig& config, const model::Partition& mine_part,
                                      const std::vector<float>& mine, const std::vector<int>& split,
                                      const layout::Grid& grid, comm::Communicator& world) {
  const int me = world.rank();  // the world keeps world-rank order
  const int tag = 77;
  if (grid.coord_of(me).dp != 0) return {};
  if (me != 0) {
    world.send(mine.data(), mine.size(), DType::f32, 0, tag, Stream{}).wait();
    return {};
  }
  std::vector<float> whole(static_cast<size_t>(model::num_parameters(config)));
  place_part(config, mine_part, mine.data(), whole);
  for (int rank = 1; rank < grid.world_size(); ++rank) {
    if (grid.coord_of(rank).dp != 0) continue;
    const model::Partition part = partition_for_rank(split, grid, rank);
    std::vector<float> values(static_cast<size_t>(model::num_parameters(config, part)));
    world.recv(values.data(), values.size(), DType::f32, rank, tag, Stream{}).wait();
    place_part(config, part, values.data(), whole);  // the tied wte twice: equal copies
  }
  return whole;
}

void set_attention_and_classifier(model::Transformer& model, const ModelSettings& settings) {
  model.set_flash_attention(settings.flash_attention);
  model.set_classifier_chunk(settings.classifier_chunk);
}

kernels::Context model_context(const kernels::Context& device, const KernelSettings& kernels) {
  kernels::Context ctx = device;
  if (kernels.graphs) ctx.stream = kernels::backend_of(ctx).create_capturable_stream();
  return ctx;
}

}  // namespace trident
