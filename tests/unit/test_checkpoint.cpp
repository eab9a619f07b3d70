// Checkpoint geometry and bookkeeping without MPI: every rank slice's hyperslab lists exactly
// the elements model::global_index says, in order, for every tensor and many partitions; flat
// ranges of a slice decompose into hyperslabs covering exactly that range; the checksum is
// layout-independent and sensitive to every bit; metadata round-trips as text.
#define BOOST_TEST_DYN_LINK
#include <algorithm>
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "ckpt/checkpoint_file.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/slab.hpp"
#include "optim/loss_scaler.hpp"

namespace {

using namespace trident;

model::GptConfig small_model() {
  model::GptConfig config;
  config.max_seq_len = 8;
  config.vocab = 200;
  config.padded_vocab = 256;
  config.layers = 6;
  config.heads = 4;
  config.channels = 16;
  return config;
}

// Global flat indices of the hyperslabs' elements, in order.
std::vector<int64_t> indices_of(const std::vector<int64_t>& shape, const std::vector<ckpt::Hyperslab>& slabs) {
  std::vector<int64_t> out;
  for (const ckpt::Hyperslab& slab : slabs)
    ckpt::for_each_run(shape, slab, [&](int64_t begin, int64_t length) {
      for (int64_t i = 0; i < length; ++i) out.push_back(begin + i);
    });
  return out;
}

std::vector<model::Partition> partitions(const model::GptConfig& config) {
  std::vector<model::Partition> result;
  for (int size : {1, 2, 4})
    for (int rank = 0; rank < size; ++rank)
      for (auto [first, count] : {std::pair{0, 6}, std::pair{0, 2}, std::pair{2, 3}, std::pair{5, 1}}) {
        model::Partition p;
        p.rank = rank;
        p.size = size;
        p.first_layer = first;
        p.num_layers = count;
        p.first_stage = first == 0;
        p.last_stage = first + count == config.layers;
        result.push_back(p);
      }
  // Interleaved: the 6 blocks over virtual stages of uneven and even sizes.
  for (const auto& [virtual_layers, stages] : {std::pair{std::vector<int>{2, 1, 1, 2}, 2},
                                               std::pair{std::vector<int>{1, 1, 1, 1, 1, 1}, 3},
                                               std::pair{std::vector<int>{1, 2, 1, 1, 1}, 1}})
    for (int stage = 0; stage < stages; ++stage)
      for (int size : {1, 2})
        for (int rank = 0; rank < size; ++rank)
          result.push_back(model::interleaved_partition(virtual_layers, stages, stage, rank, size));
  return result;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

// A llama of the same size with grouped-query attention (4 heads, 2 of key/value: q, k and v
// rows of two sizes), SwiGLU's [gate | up] and an untied head.
model::GptConfig small_llama() {
  model::GptConfig config = small_model();
  config.arch = model::Arch::llama;
  config.kv_heads = 2, config.ffn_hidden = 24, config.tie_embeddings = false;
  return config;
}

BOOST_AUTO_TEST_CASE(slice_hyperslabs_match_global_index) {
  for (const model::GptConfig& config : {small_model(), small_llama()})
  for (const model::Partition& part : partitions(config))
    for (int t = 0; t < model::kNumParamTensors; ++t) {
      const std::vector<ckpt::TensorSlab> slabs = ckpt::tensor_slabs(config, part, t);
      const int64_t n = model::param_specs(config, part)[t].count();
      int64_t elements = 0;
      std::vector<int64_t> got;
      for (const ckpt::TensorSlab& slab : slabs) {  // the chunks' slabs in the stage's order
        elements += slab.elements();
        for (int64_t i : indices_of(slab.global_shape, {slab.slice})) got.push_back(i);
      }
      BOOST_TEST_REQUIRE(elements == n);
      std::vector<int64_t> want;
      for (int64_t i = 0; i < n; ++i) want.push_back(model::global_index(config, part, t, i));
      BOOST_TEST(got == want, "tensor " << t << " rank " << part.rank << "/" << part.size << " layers "
                                        << part.first_layer << "+" << part.num_layers << " in " << part.chunks()
                                        << " chunks");
    }
}

BOOST_AUTO_TEST_CASE(flat_ranges_decompose_exactly) {
  const model::GptConfig config = small_model();
  model::Partition part;
  part.rank = 1;
  part.size = 4;
  part.first_layer = 2;
  part.num_layers = 3;
  part.first_stage = part.last_stage = false;
  for (int t : {4, 5, 6, 10, 12, 2}) {  // strided q/k/v rows, columns, rows, plain
    const ckpt::TensorSlab slab = ckpt::tensor_slabs(config, part, t).at(0);
    const std::vector<int64_t> all = indices_of(slab.global_shape, {slab.slice});
    const int64_t n = slab.elements();
    for (int64_t begin = 0; begin <= n; begin += 7)
      for (int64_t end = begin; end <= n; end += 13) {
        const auto slabs = ckpt::range_hyperslabs(slab, begin, end);
        BOOST_TEST(slabs.size() <= 2 * 4 - 1 + 2u);  // at most 2·(expanded dims) − 1
        const std::vector<int64_t> want(all.begin() + begin, all.begin() + end);
        BOOST_TEST(indices_of(slab.global_shape, slabs) == want, "tensor " << t << " [" << begin << ", " << end << ")");
      }
  }
}

BOOST_AUTO_TEST_CASE(checksum_is_layout_independent_and_bit_sensitive) {
  const model::GptConfig config = small_model();
  const std::vector<int64_t> shape = model::param_specs(config)[4].shape;  // qkvw, the strided one
  const ckpt::TensorSlab whole = ckpt::whole_slab(shape);
  std::vector<float> values(static_cast<size_t>(whole.elements()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.001f * static_cast<float>(i % 977) - 0.3f;
  const uint64_t reference = ckpt::partial_checksum(shape, whole.slice, values.data());
  for (int size : {2, 4}) {  // the ranks' parts, each from its own slice of the values, add up
    uint64_t sum = 0;
    for (int rank = 0; rank < size; ++rank) {
      model::Partition part;
      part.rank = rank;
      part.size = size;
      const ckpt::TensorSlab slab = ckpt::tensor_slabs(config, part, 4).at(0);
      std::vector<float> mine;
      for (int64_t i = 0; i < slab.elements(); ++i) mine.push_back(values[model::global_index(config, part, 4, i)]);
      sum += ckpt::partial_checksum(shape, slab.slice, mine.data());
    }
    BOOST_TEST(sum == reference);
  }
  for (size_t at : {size_t(0), values.size() / 3, values.size() - 1})
    for (int bit : {0, 17, 31}) {
      std::vector<float> flipped = values;
      uint32_t bits;
      std::memcpy(&bits, &flipped[at], 4);
      bits ^= 1u << bit;
      std::memcpy(&flipped[at], &bits, 4);
      BOOST_TEST(ckpt::partial_checksum(shape, whole.slice, flipped.data()) != reference);
    }
  std::vector<float> swapped = values;  // moved elements change it too
  std::swap(swapped[1], swapped[2]);
  BOOST_TEST(ckpt::partial_checksum(shape, whole.slice, swapped.data()) != reference);
}

BOOST_AUTO_TEST_CASE(metadata_round_trips_as_text) {
  ckpt::Metadata m;
  m.kind = "full";
  m.step = 1200;
  m.tokens_seen = 1200LL * 512 * 1024;
  m.optimizer_updates = 1197;
  m.skipped_steps = 3;
  m.model = small_model();
  m.tensor = 2;
  m.pipeline = 4;
  m.data = 8;
  m.zero = 1;
  m.stage_layers = "1,2,2,1";
  m.deck = "[model]\nlayers = 6\n; a = b \\ c\n";
  m.written_at = "2026-11-29T12:00:00Z";
  const ckpt::Metadata back = ckpt::Metadata::from_text(m.to_text());
  BOOST_TEST(back.to_text() == m.to_text());
  BOOST_TEST(back.deck == m.deck);
  BOOST_TEST(back.model.padded_vocab == 256);
  BOOST_TEST(back.tokens_seen == m.tokens_seen);
}

// The metadata checksum covers every attribute: a changed step, optimizer_updates, layout,
// lineage or deck changes it; and a file's name must agree with its step and kind.
BOOST_AUTO_TEST_CASE(metadata_checksum_covers_every_field) {
  ckpt::Metadata m;
  m.kind = "full";
  m.step = 12;
  m.optimizer_updates = 12;
  m.model = small_model();
  m.run_id = "20261129T120000Z-000000000001";
  m.branch = m.run_id;
  const uint64_t reference = ckpt::metadata_checksum(m);
  BOOST_TEST(ckpt::metadata_checksum(ckpt::Metadata::from_text(m.to_text())) == reference);
  for (int bit = 0; bit < 63; ++bit) {
    ckpt::Metadata step = m, updates = m;
    step.step ^= int64_t(1) << bit;
    updates.optimizer_updates ^= int64_t(1) << bit;
    BOOST_TEST(ckpt::metadata_checksum(step) != reference);
    BOOST_TEST(ckpt::metadata_checksum(updates) != reference);
  }
  ckpt::Metadata other = m;
  other.tensor = 2;
  BOOST_TEST(ckpt::metadata_checksum(other) != reference);
  other = m;
  other.parent = "x/step-00000008.full";
  BOOST_TEST(ckpt::metadata_checksum(other) != reference);
  other = m;
  other.format_version = 1;
  BOOST_TEST(ckpt::metadata_checksum(other) != reference);
}

// The attributes in the order of format version 2, which metadata_checksum covers: the table
// is now the sections' lists, and files already written must still add up.
BOOST_AUTO_TEST_CASE(the_sections_keep_the_attribute_order_of_format_2) {
  const std::vector<std::string> version2 = {
      "kind", "step", "tokens_seen", "optimizer_updates", "bad_steps_in_a_row", "skipped_steps", "seed",
      "precision", "loss_scale", "loss_scale_good_steps", "loss_scale_hysteresis_left",
      "model.layers", "model.heads", "model.hidden", "model.vocab", "model.padded_vocab", "model.seq_len",
      "layout.tensor", "layout.pipeline", "layout.data", "layout.zero", "layout.stage_layers",
      "layout.micro_batch", "layout.replica_shares", "trident_version", "written_at", "deck",
      "lineage.run_id", "lineage.branch", "lineage.parent"};
  auto keys_of = [](int64_t version) {
    ckpt::Metadata m;
    m.format_version = version;
    std::vector<std::string> keys;
    const std::string text = m.to_text();
    for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
      keys.push_back(text.substr(at, text.find('=', at) - at));
    return keys;
  };
  BOOST_TEST(keys_of(2) == version2, boost::test_tools::per_element());
  // Version 3 adds the architecture after the model's shape; the rest keeps its order.
  std::vector<std::string> version3 = version2;
  const auto after_shape = std::find(version3.begin(), version3.end(), "model.seq_len") + 1;
  version3.insert(after_shape, {"model.arch", "model.kv_heads", "model.ffn_hidden", "model.tie_embeddings",
                                "model.rope_theta", "model.norm_eps"});
  BOOST_TEST(keys_of(3) == version3, boost::test_tools::per_element());
  // Version 4 adds Llama 3.1's rotary scaling after them.
  std::vector<std::string> version4 = version3;
  const auto after_norm_eps = std::find(version4.begin(), version4.end(), "model.norm_eps") + 1;
  version4.insert(after_norm_eps, {"model.rope_factor", "model.rope_low_freq_factor", "model.rope_high_freq_factor",
                                   "model.rope_original_context"});
  BOOST_TEST(keys_of(4) == version4, boost::test_tools::per_element());
  // Version 5 adds the interleaved split after the replica shares.
  std::vector<std::string> version5 = version4;
  const auto after_shares = std::find(version5.begin(), version5.end(), "layout.replica_shares") + 1;
  version5.insert(after_shares, "layout.virtual_layers");
  BOOST_TEST(keys_of(5) == version5, boost::test_tools::per_element());
}

// A part saves its own section and nothing else, and takes it back (ckpt/stateful.hpp).
BOOST_AUTO_TEST_CASE(a_part_saves_and_restores_its_own_section) {
  optim::LossScaler scaler(optim::LossScaleSettings{});
  scaler.update(true);  // an overflow: the hysteresis budget shrinks
  for (int i = 0; i < 3; ++i) scaler.update(false);
  ckpt::Metadata m;
  m.step = 7;
  m.stage_layers = "2,2";
  scaler.save(m);
  BOOST_TEST(m.loss_scale == scaler.state().scale);
  BOOST_TEST(m.loss_scale_good_steps == 3);
  BOOST_TEST((m.step == 7 && m.stage_layers == "2,2"));  // the other sections untouched
  const ckpt::Metadata back = ckpt::Metadata::from_text(m.to_text());
  optim::LossScaler resumed(optim::LossScaleSettings{});
  resumed.restore(back, "x.h5");
  BOOST_TEST(resumed.state().scale == scaler.state().scale);
  BOOST_TEST(resumed.state().good_steps == scaler.state().good_steps);
  BOOST_TEST(resumed.state().hysteresis_left == scaler.state().hysteresis_left);
  optim::LossScaler untouched(optim::LossScaleSettings{});
  untouched.restore(ckpt::Metadata{}, "bf16.h5");  // no scaler in it (loss_scale 0): its own state kept
  BOOST_TEST(untouched.state().scale == optim::LossScaleSettings{}.initial_scale);
}

BOOST_AUTO_TEST_CASE(file_name_must_agree_with_step_and_kind) {
  ckpt::Metadata m;
  m.kind = "full";
  m.step = 12;
  BOOST_TEST(ckpt::name_mismatch("d/step-00000012.full.h5", m).empty());
  BOOST_TEST(ckpt::name_mismatch("d/from.h5", m).empty());  // a name of the user's: not judged
  BOOST_TEST(ckpt::name_mismatch("d/.step-00000016.full.h5.tmp", m).empty());
  BOOST_TEST(!ckpt::name_mismatch("d/step-00000016.full.h5", m).empty());
  BOOST_TEST(!ckpt::name_mismatch("d/step-00000012.fast.h5", m).empty());
  BOOST_TEST(m.id() == "/step-00000012.full");
}

BOOST_AUTO_TEST_SUITE_END()
