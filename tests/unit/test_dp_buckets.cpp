// The data-parallel layer's view of the gradients: the GPT-2's segments cover its flat gradient
// buffer exactly once, in backward order, and the buckets close at event boundaries once full.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <vector>

#include "dp/gpt2_segments.hpp"
#include "dp/segments.hpp"

using namespace trident;

namespace {

model::GptConfig small_config() {
  model::GptConfig c;
  c.max_seq_len = 16, c.vocab = 60, c.padded_vocab = 64, c.layers = 4, c.heads = 2, c.channels = 8;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dp_buckets)

BOOST_AUTO_TEST_CASE(gpt2_segments_cover_the_gradient_buffer_once_in_backward_order) {
  const model::GptConfig config = small_config();
  for (const model::Partition& slice : {model::Partition{}, model::stage_partition({1, 3}, 1, 1, 2),
                                        model::stage_partition({2, 2}, 0, 0, 2)}) {
    const int64_t n = model::num_parameters(config, slice);
    std::vector<float> grads(static_cast<size_t>(n));
    std::vector<int> covered(grads.size(), 0);
    int previous_event = slice.layers(config) - 1;
    for (const dp::GradientSegment& s : dp::gpt2_gradient_segments(config, slice, grads.data())) {
      BOOST_TEST(static_cast<float*>(s.data) - grads.data() == s.offset, s.name);
      for (int64_t i = 0; i < s.count; ++i) ++covered[s.offset + i];
      BOOST_TEST(s.ready_event <= previous_event, s.name);  // events only descend
      previous_event = s.ready_event;
    }
    BOOST_TEST(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }));
  }
}

// ZeRO-2 and 3: a bucket per block; the rest (event -1) cut every bucket_mb through its segments,
// each piece at its place in memory and in the flat layout, every element once; the replicas'
// owned ranges partition the buffer.
BOOST_AUTO_TEST_CASE(block_buckets_cut_the_rest_every_bucket_mb) {
  const model::GptConfig config = small_config();
  const int64_t n = model::num_parameters(config);
  std::vector<float> grads(static_cast<size_t>(n));
  const auto segments = dp::gpt2_gradient_segments(config, {}, grads.data());
  const double mb = 100 * 4 / 1048576.0;  // 100 elements
  const auto buckets = dp::plan_block_buckets(segments, mb);
  std::vector<int> covered(grads.size(), 0);
  int blocks = 0;
  for (const dp::Bucket& b : buckets) {
    int64_t elements = 0;
    for (const dp::GradientSegment& s : b.segments) {
      BOOST_TEST(s.ready_event == b.ready_event, s.name);
      BOOST_TEST(static_cast<float*>(s.data) - grads.data() == s.offset, s.name);
      for (int64_t i = 0; i < s.count; ++i) ++covered[static_cast<size_t>(s.offset + i)];
      elements += s.count;
    }
    BOOST_TEST(elements == b.elements);
    if (b.ready_event >= 0) ++blocks;
    else BOOST_TEST(b.elements <= 100);  // wte alone is 64 · 8 = 512 elements: cut
  }
  BOOST_TEST(blocks == config.layers);
  BOOST_TEST(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }));
  std::vector<int> owners(grads.size(), 0);
  for (int r = 0; r < 3; ++r)
    for (const model::FlatRange& range : dp::owned_ranges(buckets, r, 3))
      for (int64_t i = range.begin; i < range.end; ++i) ++owners[static_cast<size_t>(i)];
  BOOST_TEST(std::all_of(owners.begin(), owners.end(), [](int c) { return c == 1; }));
}

BOOST_AUTO_TEST_CASE(buckets_close_at_the_end_of_an_event_once_full) {
  // 1 MiB of f32 = 262144 elements; events 2, 1, 0, -1.
  std::vector<dp::GradientSegment> segments = {
      {"a[2]", nullptr, 0, 200000, DType::f32, 2}, {"b[2]", nullptr, 0, 100000, DType::f32, 2},
      {"a[1]", nullptr, 0, 100000, DType::f32, 1}, {"a[0]", nullptr, 0, 100000, DType::f32, 0},
      {"a[0]'", nullptr, 0, 100000, DType::f32, 0}, {"wte", nullptr, 0, 5, DType::f32, -1}};
  const std::vector<dp::Bucket> buckets = dp::plan_buckets(segments, 1.0);
  BOOST_TEST_REQUIRE(buckets.size() == 3u);
  BOOST_TEST(buckets[0].elements == 300000);  // event 2 alone passes the target
  BOOST_TEST(buckets[0].ready_event == 2);
  BOOST_TEST(buckets[1].elements == 300000);  // events 1 and 0 together
  BOOST_TEST(buckets[1].ready_event == 0);
  BOOST_TEST(buckets[2].elements == 5);  // the rest, at the end
  BOOST_TEST(buckets[2].ready_event == -1);
}

// ZeRO: each bucket padded to d·⌈E/d⌉ and split in d equal parts; the replicas' ranges partition
// the buffer, each replica's part of a bucket is ⌈E/d⌉ elements or what is left, and the ranges
// come ascending and merged.
BOOST_AUTO_TEST_CASE(owned_ranges_partition_the_buffer_bucket_by_bucket) {
  const model::GptConfig config = small_config();
  for (const model::Partition& slice : {model::Partition{}, model::stage_partition({1, 3}, 1, 1, 2)})
    for (double bucket_mb : {0.0, 0.002, 100.0})
      for (int d : {1, 2, 3, 4, 8}) {
        const int64_t n = model::num_parameters(config, slice);
        const auto buckets = dp::plan_buckets(dp::gpt2_gradient_segments(config, slice, nullptr), bucket_mb);
        std::vector<int> owners(static_cast<size_t>(n), 0);
        int64_t largest_part = 0;
        for (const dp::Bucket& b : buckets) largest_part = std::max(largest_part, dp::shard_part(b, d));
        for (int r = 0; r < d; ++r) {
          const model::FlatRanges own = dp::owned_ranges(buckets, r, d);
          for (size_t k = 0; k < own.size(); ++k) {
            BOOST_TEST_REQUIRE(own[k].count() > 0);
            if (k > 0) BOOST_TEST_REQUIRE(own[k].begin > own[k - 1].end);  // ascending, merged
            for (int64_t i = own[k].begin; i < own[k].end; ++i) ++owners[static_cast<size_t>(i)];
          }
          int64_t expected = 0;
          for (const dp::Bucket& b : buckets)
            expected += std::max<int64_t>(0, std::min(dp::shard_part(b, d), b.elements - r * dp::shard_part(b, d)));
          BOOST_TEST(model::total_count(own) == expected);
        }
        BOOST_TEST(std::all_of(owners.begin(), owners.end(), [](int c) { return c == 1; }), "d " << d);
        if (d == 1) BOOST_TEST(dp::owned_ranges(buckets, 0, 1).size() == 1u);  // everything, one range
      }
}

// The tied embedding over two stages: wte (the first stage's embedding, the last stage's
// classifier) is marked on both and is a bucket of its own (with ZeRO-2 and 3, buckets of their
// own), so that each replica owns the same elements of it on both stages — what lets the
// reducer sum the copies after the data-parallel reduction (GradientReducer::sum_tied). One
// stage holds the only copy: nothing marked.
BOOST_AUTO_TEST_CASE(the_tied_embedding_is_owned_alike_on_the_first_and_last_stage) {
  const model::GptConfig config = small_config();
  for (const auto& s : dp::gpt2_gradient_segments(config, {}, nullptr)) BOOST_TEST(!s.tied, s.name);
  const model::Partition first = model::stage_partition({2, 2}, 0, 0, 1), last = model::stage_partition({2, 2}, 1, 0, 1);
  using Plan = std::vector<dp::Bucket> (*)(const std::vector<dp::GradientSegment>&, double);
  for (Plan plan : {Plan(dp::plan_buckets), Plan(dp::plan_block_buckets)})
    for (double bucket_mb : {0.0, 0.002, 100.0}) {
      // Per stage: the wte-relative ranges each replica owns, for d = 2, 3, 4, 8.
      std::vector<std::vector<model::FlatRanges>> owned_wte(2);
      for (int stage = 0; stage < 2; ++stage) {
        const auto segments = dp::gpt2_gradient_segments(config, stage == 0 ? first : last, nullptr);
        const auto tied = std::find_if(segments.begin(), segments.end(), [](const auto& s) { return s.tied; });
        BOOST_TEST_REQUIRE((tied != segments.end() && tied->name == "wte"));
        const int64_t begin = tied->offset, end = tied->offset + tied->count;
        const auto buckets = plan(segments, bucket_mb);
        for (const dp::Bucket& b : buckets)
          for (const dp::GradientSegment& s : b.segments) BOOST_TEST(s.tied == b.segments.front().tied, s.name);
        for (int d : {2, 3, 4, 8})
          for (int r = 0; r < d; ++r) {
            model::FlatRanges in_wte;
            for (const model::FlatRange& own : dp::owned_ranges(buckets, r, d))
              if (std::max(own.begin, begin) < std::min(own.end, end))
                in_wte.push_back({std::max(own.begin, begin) - begin, std::min(own.end, end) - begin});
            owned_wte[stage].push_back(in_wte);
          }
      }
      BOOST_TEST_REQUIRE(owned_wte[0].size() == owned_wte[1].size());
      for (size_t k = 0; k < owned_wte[0].size(); ++k) {
        BOOST_TEST_REQUIRE(owned_wte[0][k].size() == owned_wte[1][k].size(), "bucket_mb " << bucket_mb << " case " << k);
        for (size_t j = 0; j < owned_wte[0][k].size(); ++j) {
          BOOST_TEST(owned_wte[0][k][j].begin == owned_wte[1][k][j].begin);
          BOOST_TEST(owned_wte[0][k][j].end == owned_wte[1][k][j].end);
        }
      }
    }
}

BOOST_AUTO_TEST_SUITE_END()
