// The distributed optimizer (optim/adamw.hpp): a 16-bit model's fp32 master weights are the
// optimizer's. Sharded over d replicas by gradient bucket (dp::owned_ranges: each replica's part
// of every bucket, many ranges of the flat buffer) — each updating its part of the master and
// writing its part of the 16-bit parameters — the union is the unsharded update, bit for bit; the 16-bit
// parameters are the master's rounding; an fp32 model's parameters are their own master.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "dp/gpt2_segments.hpp"
#include "dp/segments.hpp"
#include "kernel_check.hpp"
#include "kernels/kernels.hpp"
#include "model/params.hpp"
#include "optim/adamw.hpp"

using namespace trident;
using namespace trident::testing;

BOOST_AUTO_TEST_SUITE(distributed_optimizer)

namespace {

model::GptConfig small_config() {
  model::GptConfig c;
  c.layers = 2, c.heads = 2, c.channels = 8, c.vocab = 30, c.padded_vocab = 32, c.max_seq_len = 6;
  return c;
}

struct Problem {
  model::GptConfig config = small_config();
  int64_t n = model::num_parameters(small_config());
  std::vector<float> initial, grads;
  Problem() : initial(static_cast<size_t>(n)), grads(random_vector(static_cast<size_t>(n), 301)) {
    model::init_params(config, initial.data(), 5);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(shards_update_as_the_whole_in_16_bits) {
  const Problem p;
  kernels::Context ctx;
  for (kernels::Precision precision : {kernels::Precision::bf16, kernels::Precision::fp16}) {
    const DType type = kernels::storage_dtype(precision);
    std::vector<uint16_t> whole_params(static_cast<size_t>(p.n)), sharded_params(whole_params.size(), 0);
    kernels::convert(ctx, as_tensor(whole_params, type, {int64_t(whole_params.size())}), as_tensor(p.initial));
    sharded_params = whole_params;
    optim::AdamW whole(ctx, p.config, {}, {}, {}, precision);
    BOOST_TEST(whole.keeps_master());
    whole.load_master(ctx, p.initial.data());
    const int d = 3;
    // Buckets of about 100 elements: a replica's ranges are many and lie across tensors.
    const auto buckets = dp::plan_buckets(dp::gpt2_gradient_segments(p.config, {}, nullptr), 100 * 4 / 1048576.0);
    BOOST_TEST_REQUIRE(buckets.size() > 2u);
    std::vector<std::unique_ptr<optim::AdamW>> shards;
    for (int r = 0; r < d; ++r) {
      const model::FlatRanges own = dp::owned_ranges(buckets, r, d);
      BOOST_TEST_REQUIRE(own.size() > 1u);
      shards.push_back(std::make_unique<optim::AdamW>(ctx, p.config, optim::AdamWSettings{}, model::Partition{}, own,
                                                      precision));
      shards.back()->load_master(ctx, p.initial.data());
    }
    for (int64_t t = 1; t <= 3; ++t) {
      whole.step(ctx, as_tensor(whole_params, type, {int64_t(whole_params.size())}), p.grads.data(), 1e-2f, t, 0.8f);
      for (auto& shard : shards)
        shard->step(ctx, as_tensor(sharded_params, type, {int64_t(sharded_params.size())}), p.grads.data(), 1e-2f, t,
                    0.8f);
    }
    BOOST_TEST(sharded_params == whole_params, kernels::precision_name(precision));
    for (auto& shard : shards) {
      int64_t at = 0;  // the state holds the ranges one after the other
      for (const model::FlatRange& r : shard->owned())
        for (int64_t i = r.begin; i < r.end; ++i) BOOST_REQUIRE(shard->master()[at++] == whole.master()[i]);
      BOOST_TEST(at == shard->state_size());
    }
    // The 16-bit parameters are the master's rounding, and moved on from the initial values.
    std::vector<uint16_t> rounded(whole_params.size());
    kernels::convert(ctx, as_tensor(rounded, type, {int64_t(rounded.size())}),
                     view(whole.master(), whole_params.size(), Device{}));
    BOOST_TEST(rounded == whole_params, kernels::precision_name(precision));
    std::vector<uint16_t> initial(whole_params.size());
    kernels::convert(ctx, as_tensor(initial, type, {int64_t(initial.size())}), as_tensor(p.initial));
    BOOST_TEST(initial != whole_params);
    // After a restore: each shard writes its part of the parameters from its master.
    std::vector<uint16_t> restored(whole_params.size(), 0);
    for (auto& shard : shards) shard->write_master_into(ctx, as_tensor(restored, type, {int64_t(restored.size())}));
    BOOST_TEST(restored == whole_params, kernels::precision_name(precision));
  }
}

BOOST_AUTO_TEST_CASE(an_fp32_model_is_its_own_master) {
  const Problem p;
  kernels::Context ctx;
  optim::AdamW fp32(ctx, p.config, {});
  BOOST_TEST(!fp32.keeps_master());
  BOOST_TEST(fp32.master() == nullptr);
  std::vector<float> params = p.initial;
  fp32.step(ctx, as_tensor(params), p.grads.data(), 1e-2f, 1, 1.0f);
  BOOST_TEST(params != p.initial);
  // The 16-bit optimizer's master follows the same arithmetic: its first update is this one.
  optim::AdamW bf16(ctx, p.config, {}, {}, {}, kernels::Precision::bf16);
  bf16.load_master(ctx, p.initial.data());
  std::vector<uint16_t> low(params.size());
  bf16.step(ctx, as_tensor(low, DType::bf16, {int64_t(low.size())}), p.grads.data(), 1e-2f, 1, 1.0f);
  BOOST_TEST(std::vector<float>(bf16.master(), bf16.master() + p.n) == params);
}

BOOST_AUTO_TEST_SUITE_END()
