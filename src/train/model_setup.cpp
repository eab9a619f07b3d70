// Model configuration and initialisation from the deck.
#include "train/model_setup.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "core/mpi_util.hpp"
#include "model/llmc_io.hpp"

namespace trident {
namespace {

bool from_file(const deck::Deck& deck) { return deck.get_string("model.init") != "random"; }

void require_match(const deck::Deck& deck, const std::string& key, int from_header,
                   const std::string& file) {
  if (deck.get_int(key) != from_header)
    fatal_all(file + ": the model file has " + key + " = " + std::to_string(from_header) +
              " but the deck says " + deck.cite(key) + "; make the deck match the file (" +
              deck.cite("model.init") + ")");
}

}  // namespace

model::GptConfig model_config_from_deck(const deck::Deck& deck) {
  model::GptConfig c;
  c.layers = static_cast<int>(deck.get_int("model.layers"));
  c.heads = static_cast<int>(deck.get_int("model.heads"));
  c.channels = static_cast<int>(deck.get_int("model.hidden"));
  c.vocab = static_cast<int>(deck.get_int("model.vocab"));
  c.max_seq_len = static_cast<int>(deck.get_int("model.seq_len"));
  c.padded_vocab = model::padded_vocab_for(c.vocab);
  if (!from_file(deck)) return c;
  const std::string file = deck.get_string("model.init");
  model::GptConfig header;
  try {
    header = model::read_llmc_header(file);
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + " (" + deck.cite("model.init") +
              "); give an llm.c fp32 model file or 'random'");
  }
  require_match(deck, "model.layers", header.layers, file);
  require_match(deck, "model.heads", header.heads, file);
  require_match(deck, "model.hidden", header.channels, file);
  require_match(deck, "model.vocab", header.vocab, file);
  if (deck.get_int("model.seq_len") > header.max_seq_len)
    fatal_all(file + ": the model file's position table has " + std::to_string(header.max_seq_len) +
              " rows but the deck asks for " + deck.cite("model.seq_len") + "; use at most " +
              std::to_string(header.max_seq_len));
  return header;
}

void initialise_parameters(const deck::Deck& deck, model::Gpt2& gpt) {
  const model::Partition& slice = gpt.tensor_group().slice;
  if (!from_file(deck)) {
    model::init_params(gpt.config(), gpt.params(), static_cast<uint64_t>(deck.get_int("train.seed")), slice);
    return;
  }
  std::vector<float> whole(static_cast<size_t>(model::num_parameters(gpt.config())));
  try {
    model::read_llmc_params(deck.get_string("model.init"), gpt.config(), whole.data());
  } catch (const std::runtime_error& e) {
    fatal_one(e.what());
  }
  model::extract_slice(gpt.config(), whole.data(), gpt.params(), slice);
}

std::vector<float> gather_whole_model(const model::Gpt2& gpt, const layout::Grid& grid) {
  const model::GptConfig& config = gpt.config();
  const model::TensorGroup& group = gpt.tensor_group();
  std::vector<float> whole;
  if (group.slice.size == 1) {
    if (world_rank() == 0) whole.assign(gpt.params(), gpt.params() + gpt.num_parameters());
    return whole;
  }
  // World rank 0's tensor group (data rank 0, stage 0) sends its slices; the others wait.
  if (grid.group(layout::GroupKind::Tensor, 0) !=
      grid.group(layout::GroupKind::Tensor, world_rank())) return whole;
  const int64_t local = gpt.num_parameters();
  std::vector<float> slices(group.slice.rank == 0 ? static_cast<size_t>(local * group.slice.size) : 0);
  MPI_CHECK(MPI_Gather(gpt.params(), static_cast<int>(local), MPI_FLOAT, slices.data(),
                       static_cast<int>(local), MPI_FLOAT, 0, group.comm));
  if (group.slice.rank != 0) return whole;
  whole.resize(static_cast<size_t>(model::num_parameters(config)));
  const auto global_specs = model::param_specs(config);
  for (int r = 0; r < group.slice.size; ++r) {
    const model::Partition slice{r, group.slice.size};
    const auto specs = model::param_specs(config, slice);
    int64_t global_offset = 0, local_offset = 0;
    for (int t = 0; t < model::kNumParamTensors; ++t) {
      const float* from = slices.data() + r * local + local_offset;
      for (int64_t i = 0; i < specs[t].count(); ++i)
        whole[global_offset + model::global_index(config, slice, t, i)] = from[i];
      global_offset += global_specs[t].count();
      local_offset += specs[t].count();
    }
  }
  return whole;
}

}  // namespace trident
