// Pipeline partition and schedule: values from Megatron-LM's rules, worked out by hand.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/engine/pipeline.hpp>
#include <mme/sdk/error.hpp>

namespace mme {
namespace {

using ::testing::HasSubstr;

ParallelLayout layout(std::int64_t pp, std::int64_t vpp = 1) {
  ParallelLayout p;
  p.pp = pp;
  p.vpp = vpp;
  return p;
}

TEST(Pipeline, EvenSplit) {
  auto part = partition_pipeline(32, 0, layout(4), {});
  ASSERT_EQ(part.chunks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(part.at(r, 0).num_layers, 8);
    EXPECT_EQ(part.at(r, 0).first_layer, 8 * r);
  }
  EXPECT_TRUE(part.at(0, 0).embedding);
  EXPECT_TRUE(part.at(3, 0).loss);
  EXPECT_FALSE(part.at(1, 0).embedding);
}

TEST(Pipeline, SeedDeepSeekExampleLastStageSixteen) {
  PipelineSplit split;
  split.last_stage_layers = 16;
  auto part = partition_pipeline(61, 1, layout(4), split);
  EXPECT_EQ(part.at(0, 0).num_layers, 15);
  EXPECT_EQ(part.at(1, 0).num_layers, 15);
  EXPECT_EQ(part.at(2, 0).num_layers, 15);
  EXPECT_EQ(part.at(3, 0).num_layers, 16);
  EXPECT_EQ(part.at(3, 0).mtp_layers, 1);
  EXPECT_TRUE(part.at(3, 0).embedding);  // the MTP stage holds a copy of the embedding
}

TEST(Pipeline, UnevenWithoutFlagsNamesTheFlags) {
  try {
    partition_pipeline(61, 0, layout(4), {});
    FAIL() << "expected a LayoutError";
  } catch (const LayoutError& e) {
    EXPECT_NE(std::string(e.what()).find("--num-layers-in-last-pipeline-stage"), std::string::npos) << e.what();
  }
}

TEST(Pipeline, InterleavedOrderFollowsVirtualStages) {
  // 8 layers, PP 2, VPP 2: virtual stage i = vpp_rank * 2 + pp_rank gets layers 2i, 2i+1.
  auto part = partition_pipeline(8, 0, layout(2, 2), {});
  EXPECT_EQ(part.at(0, 0).first_layer, 0);
  EXPECT_EQ(part.at(1, 0).first_layer, 2);
  EXPECT_EQ(part.at(0, 1).first_layer, 4);
  EXPECT_EQ(part.at(1, 1).first_layer, 6);
  EXPECT_TRUE(part.at(1, 1).loss);
}

TEST(Pipeline, AccountForEmbeddingAndLoss) {
  PipelineSplit split;
  split.account_for_embedding = true;
  split.account_for_loss = true;
  auto part = partition_pipeline(14, 0, layout(4), split);  // 16 slots, 4 per stage
  EXPECT_EQ(part.at(0, 0).num_layers, 3);
  EXPECT_EQ(part.at(1, 0).num_layers, 4);
  EXPECT_EQ(part.at(2, 0).num_layers, 4);
  EXPECT_EQ(part.at(3, 0).num_layers, 3);
}

TEST(Pipeline, LayoutString) {
  // The ground-truth MoE layout: 3 decoder layers on the first virtual stage, then six
  // stages of two, the MTP layer and the loss on the last one.
  auto stages = parse_pipeline_layout("Et*3|(tt|)*6mL");
  ASSERT_EQ(stages.size(), 8u);
  EXPECT_EQ(stages[0].decoder, 3);
  EXPECT_TRUE(stages[0].embedding);
  EXPECT_EQ(stages[7].decoder, 0);
  EXPECT_EQ(stages[7].mtp, 1);
  EXPECT_TRUE(stages[7].loss);
  PipelineSplit split;
  split.layout = "Et*3|(tt|)*6mL";
  auto part = partition_pipeline(15, 1, layout(2), split);
  EXPECT_EQ(part.vpp, 4);
  EXPECT_EQ(part.at(0, 0).num_layers, 3);  // stage 0
  EXPECT_EQ(part.at(1, 0).num_layers, 2);  // stage 1
  EXPECT_EQ(part.at(1, 3).mtp_layers, 1);  // stage 7 = vpp 3, pp 1
}

// The layout grammar (pipeline_parallel_layer_layout.py): a group is expanded and then repeated
// as a whole, inside another group too; commas and spaces separate nothing.
TEST(Pipeline, LayoutStringNestedRepeats) {
  // "(t|)*2" is "t|t|"; the group "t*2|t|t|" twice, between E and L.
  const auto stages = parse_pipeline_layout("E(t*2|(t|)*2)*2, L");
  ASSERT_EQ(stages.size(), 7u);
  const int decoders[] = {2, 1, 1, 2, 1, 1, 0};
  for (std::size_t i = 0; i < stages.size(); ++i) {
    EXPECT_EQ(stages[i].decoder, decoders[i]) << "stage " << i;
    EXPECT_EQ(stages[i].embedding, i == 0) << "stage " << i;
    EXPECT_EQ(stages[i].loss, i == 6) << "stage " << i;
  }
  for (const char* bad : {"Et*|L", "Et*0|L", "(Et|L", "Et)|L", "Et*1234567|L", "E(t*999999|)*2L", "Ex|L"})
    EXPECT_THROW((void)parse_pipeline_layout(bad), LayoutError) << bad;
}

// pipeline_parallel_layer_layout.py validate_layer_layout, beyond the counts: the layout's first
// layer is the embedding and its last the loss, no decoder layer follows an MTP layer (inside a
// stage too), and the MTP layers sit together in the last virtual stage of a rank.
TEST(Pipeline, LayoutStringsMegatronRefusesAreRefused) {
  auto error_of = [](const std::string& text, std::int64_t layers, std::int64_t mtp) -> std::string {
    PipelineSplit split;
    split.layout = text;
    try {
      (void)partition_pipeline(layers, mtp, layout(2), split);
    } catch (const LayoutError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_THAT(error_of("ttttE|ttttL", 8, 0), HasSubstr("the first layer must be the embedding 'E', not 't'"));
  EXPECT_THAT(error_of("Etttt|tttLt", 8, 0), HasSubstr("the last layer must be the loss 'L', not 't'"));
  EXPECT_THAT(error_of("Etttt|tttmtL", 8, 1), HasSubstr("a decoder layer 't' comes after an MTP layer 'm'"));
  // Four stages over PP 2: stage 1 is rank 1's first virtual stage.
  EXPECT_THAT(error_of("Etttt|ttttm||L", 8, 1), HasSubstr("MTP layers in virtual stage 0 of pipeline rank 1"));
  EXPECT_THAT(error_of("Etttt|tttt|m|mL", 8, 2), HasSubstr("1 of the 2 MTP layers in one stage"));
  EXPECT_EQ(error_of("Etttt|ttttmL", 8, 1), "(no error)");
  EXPECT_EQ(error_of("Ett|tt||ttmmL", 6, 2), "(no error)");  // rank 1's last virtual stage
}

// The engine's cached partition: the same arguments share one partition, any other argument
// gets its own, and arguments that do not partition throw every time and leave nothing behind.
TEST(Pipeline, CachedPartitionIsThePartitionOfItsArguments) {
  PipelineSplit uneven;
  uneven.first_stage_layers = 5;  // 32 = 5 + 3 x 9
  const auto even = partition_pipeline_cached(32, 0, layout(4), {});
  EXPECT_EQ(even, partition_pipeline_cached(32, 0, layout(4), {}));
  EXPECT_EQ(even->at(1, 0).num_layers, 8);
  const auto first5 = partition_pipeline_cached(32, 0, layout(4), uneven);
  EXPECT_NE(first5, even);
  EXPECT_EQ(first5->at(0, 0).num_layers, 5);
  EXPECT_EQ(first5->at(1, 0).num_layers, 9);
  EXPECT_EQ(partition_pipeline_cached(32, 1, layout(4), uneven)->at(3, 0).mtp_layers, 1);   // another MTP count
  EXPECT_EQ(partition_pipeline_cached(32, 0, layout(2), uneven)->at(1, 0).num_layers, 27);  // another PP size
  // 30 layers do not split over 4 stages: an error each time, and nothing kept.
  EXPECT_THROW((void)partition_pipeline_cached(30, 0, layout(4), {}), LayoutError);
  EXPECT_THROW((void)partition_pipeline_cached(30, 0, layout(4), {}), LayoutError);
  EXPECT_EQ(partition_pipeline_cached(32, 0, layout(4), {})->at(3, 0).num_layers, 8);
  EXPECT_EQ(even->at(1, 0).num_layers, 8);  // a partition handed out stays as it was
}

// An earlier pipeline stage holds, on every chunk, at least as many micro-batches in flight as a
// later one: 1F1B's p - r, and the interleaved warm-up of 2 (p - r - 1) + (v - 1) G passes
// spread over the chunks, for any micro-batch count, group size and extra warm-up pass. The
// planner's engine call skips a middle stage on this (estimator_pass.cpp, PeakCandidates).
TEST(Schedule, AnEarlierStageHoldsAtLeastAsManyMicroBatchesOnEveryChunk) {
  std::size_t pairs = 0;
  for (std::int64_t p = 2; p <= 16; ++p)
    for (std::int64_t v = 1; v <= 8; ++v)
      for (std::int64_t m : {0, 1, 2, 3, 5, 8, 16, 17, 64})
        for (std::int64_t g : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, p})
          for (std::int64_t extra : {0, 1}) {
            std::vector<std::int64_t> earlier = inflight_microbatches(p, v, 0, m, g, extra);
            for (std::int64_t r = 1; r < p; ++r) {
              const std::vector<std::int64_t> later = inflight_microbatches(p, v, r, m, g, extra);
              ASSERT_EQ(later.size(), static_cast<std::size_t>(v));
              for (std::size_t c = 0; c < later.size(); ++c)
                ASSERT_GE(earlier[c], later[c]) << "p " << p << " v " << v << " m " << m << " G " << g << " extra "
                                                << extra << " stage " << r << " chunk " << c;
              earlier = later;
              ++pairs;
            }
          }
  EXPECT_EQ(pairs, 86400u);
}

TEST(Schedule, OneFOneB) {
  EXPECT_EQ(inflight_microbatches(4, 1, 0, 0)[0], 4);
  EXPECT_EQ(inflight_microbatches(4, 1, 3, 0)[0], 1);
  EXPECT_EQ(inflight_microbatches(4, 1, 0, 2)[0], 2);  // fewer micro-batches than stages
  EXPECT_EQ(inflight_microbatches(1, 1, 0, 64)[0], 1);
}

TEST(Schedule, InterleavedMatchesKorthikantiFactor) {
  // PP 8, VPP 3, rank 0: 2*7 + 2*8 + 1 = 31 chunk micro-batches = 96 (1 + 7/24) / 4 layers.
  auto v = inflight_microbatches(8, 3, 0, 0);
  EXPECT_EQ(v[0], 15);
  EXPECT_EQ(v[1], 8);
  EXPECT_EQ(v[2], 8);
  // Last rank: (v - 1) p + 1 forward passes before the first backward.
  auto last = inflight_microbatches(8, 3, 7, 0);
  EXPECT_EQ(last[0], 8);
  EXPECT_EQ(last[1], 8);
  EXPECT_EQ(last[2], 1);
}

}  // namespace
}  // namespace mme
