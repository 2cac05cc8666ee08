// The caching-allocator model (framework/src/engine/allocator_model.hpp) on allocation sequences
// whose segments are worked out by hand from c10/cuda/CUDACachingAllocator.cpp's rules: requests
// rounded to 512 B; up to 1 MiB from 2 MiB small-pool segments; 1-10 MiB from 20 MiB segments;
// larger ones a segment of their own rounded to 2 MiB; a cached block split only when more than
// 1 MiB remains (small pool: 512 B); best fit among cached blocks; freed neighbours merge within
// a segment, never across; nothing is given back. And the device total's outside-PyTorch terms.
#include "engine/allocator_model.hpp"

#include <gtest/gtest.h>

#include <mme/sdk/error.hpp>

#include "engine/weight_gradients.hpp"
#include "engine_fixture.hpp"

namespace mme {
namespace {

constexpr std::int64_t MiB = 1 << 20;

TEST(AllocatorModel, RoundsRequestsTo512BytesOrPowerOfTwoDivisions) {
  const AllocatorConfig plain;
  EXPECT_EQ(allocator_round_size(1, plain), 512);
  EXPECT_EQ(allocator_round_size(512, plain), 512);
  EXPECT_EQ(allocator_round_size(513, plain), 1024);
  AllocatorConfig four;
  four.roundup_power2_divisions = 4;
  // 5 MiB + 1 lies between 4 and 8 MiB, whose quarter steps are 1 MiB: the next step is 6 MiB.
  EXPECT_EQ(allocator_round_size(5 * MiB + 1, four), 6 * MiB);
  EXPECT_EQ(allocator_round_size(4 * MiB, four), 4 * MiB);  // a power of 2 stays
  // Sizes up to 512 x divisions keep the 512-byte rounding.
  EXPECT_EQ(allocator_round_size(1500, four), 1536);
}

TEST(AllocatorModel, SegmentSizesFollowGetAllocationSize) {
  EXPECT_EQ(allocator_segment_size(MiB), 2 * MiB);         // the small pool's 2 MiB
  EXPECT_EQ(allocator_segment_size(MiB + 512), 20 * MiB);  // 1-10 MiB: kLargeBuffer
  EXPECT_EQ(allocator_segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(allocator_segment_size(10 * MiB), 10 * MiB);  // from kMinLargeAlloc: its own, 2 MiB steps
  EXPECT_EQ(allocator_segment_size(11 * MiB + 512), 12 * MiB);
}

TEST(AllocatorModel, SmallRequestsShareOneTwoMiBSegment) {
  CachingAllocatorModel a;
  // 100 x 1000 B: 1024-byte blocks, 2048 of which fit one 2 MiB segment.
  for (int i = 0; i < 100; ++i) a.malloc(1000);
  EXPECT_EQ(a.reserved(), 2 * MiB);
  EXPECT_EQ(a.allocated(), 100 * 1024);
  EXPECT_EQ(a.requested(), 100 * 1000);
  EXPECT_EQ(a.segments(), 1u);
}

TEST(AllocatorModel, MidSizeRequestsShareTwentyMiBSegments) {
  CachingAllocatorModel a;
  // 3 MiB: a new 20 MiB segment, split (17 MiB remain); the second 3 MiB comes from the remainder.
  a.malloc(3 * MiB);
  a.malloc(3 * MiB);
  EXPECT_EQ(a.reserved(), 20 * MiB);
  EXPECT_EQ(a.allocated(), 6 * MiB);
  EXPECT_EQ(a.segments(), 1u);
}

TEST(AllocatorModel, RemainderOfAtMostOneMiBIsNotSplitOff) {
  CachingAllocatorModel a;
  // 19.5 MiB: its own segment of 20 MiB; 0.5 MiB would remain, which is not split off, so the
  // block (what max_memory_allocated counts) is the whole 20 MiB.
  a.malloc(19 * MiB + MiB / 2);
  EXPECT_EQ(a.reserved(), 20 * MiB);
  EXPECT_EQ(a.peak_allocated(), 20 * MiB);
  EXPECT_EQ(a.peak_requested(), 19 * MiB + MiB / 2);
}

TEST(AllocatorModel, FreedBlocksTooSmallForALaterRequestStayReserved) {
  CachingAllocatorModel a;
  const int x = a.malloc(100 * MiB);
  const int y = a.malloc(100 * MiB);
  a.free(x);
  // 150 MiB: the cached 100 MiB block is too small: a third segment.
  const int z = a.malloc(150 * MiB);
  EXPECT_EQ(a.reserved(), 350 * MiB);
  a.free(y);
  a.free(z);
  // Everything free, but as three segments that never merge: 200 MiB needs a fourth.
  a.malloc(200 * MiB);
  EXPECT_EQ(a.reserved(), 550 * MiB);
  EXPECT_EQ(a.allocated(), 200 * MiB);
  EXPECT_EQ(a.segments(), 4u);
}

TEST(AllocatorModel, BestFitTakesTheSmallestCachedBlock) {
  CachingAllocatorModel a;
  const int big = a.malloc(150 * MiB);
  const int small = a.malloc(100 * MiB);
  a.free(big);
  a.free(small);
  // 90 MiB goes to the 100 MiB block (split: 10 MiB remain), 140 MiB to the 150 MiB one.
  a.malloc(90 * MiB);
  a.malloc(140 * MiB);
  EXPECT_EQ(a.reserved(), 250 * MiB);
  // The 10 MiB left of each serve a 10 MiB request without a new segment.
  a.malloc(10 * MiB);
  a.malloc(10 * MiB);
  EXPECT_EQ(a.reserved(), 250 * MiB);
  EXPECT_EQ(a.allocated(), 250 * MiB);
}

TEST(AllocatorModel, FreedNeighboursMergeWithinTheirSegment) {
  CachingAllocatorModel a;
  // Three 4 MiB blocks out of one 20 MiB segment (8 MiB remain at its end).
  const int first = a.malloc(4 * MiB);
  const int middle = a.malloc(4 * MiB);
  a.malloc(4 * MiB);
  a.free(middle);
  a.free(first);  // merges with the middle: an 8 MiB free block at the segment's start
  a.malloc(8 * MiB);
  a.malloc(8 * MiB);  // and the 8 MiB tail
  EXPECT_EQ(a.reserved(), 20 * MiB);
  EXPECT_EQ(a.allocated(), 20 * MiB);
  EXPECT_EQ(a.segments(), 1u);
}

TEST(AllocatorModel, ExpandableSegmentsGrowTheFreeTail) {
  AllocatorConfig conf;
  conf.expandable_segments = true;
  CachingAllocatorModel grow(conf), native;
  for (CachingAllocatorModel* a : {&grow, &native}) {
    a->malloc(100 * MiB);
    const int b = a->malloc(100 * MiB);
    a->free(b);
    a->malloc(150 * MiB);
  }
  // Expandable: one address range in 20 MiB pages; the freed 100 MiB at its end grows by
  // ceil(50 / 20) = 3 pages. Native: 150 MiB cannot use the 100 MiB segment: a new one.
  EXPECT_EQ(grow.reserved(), 260 * MiB);
  EXPECT_EQ(native.reserved(), 350 * MiB);
}

TEST(AllocatorModel, MaxSplitSizeKeepsOversizedBlocksForLargeRequests) {
  AllocatorConfig conf = parse_alloc_conf("max_split_size_mb:100");
  EXPECT_EQ(conf.max_split_size, 100 * MiB);
  CachingAllocatorModel a(conf);
  const int big = a.malloc(300 * MiB);
  a.free(big);
  // 50 MiB < max_split_size must not take the 300 MiB block: a new 50 MiB segment.
  a.malloc(50 * MiB);
  EXPECT_EQ(a.reserved(), 350 * MiB);
  // 290 MiB may take it (less than 20 MiB beyond the request), whole: no split above the limit.
  a.malloc(290 * MiB);
  EXPECT_EQ(a.reserved(), 350 * MiB);
  EXPECT_EQ(a.allocated(), 350 * MiB);
}

TEST(AllocatorModel, WithoutCachingReservedIsWhatIsAllocated) {
  AllocatorConfig conf;
  conf.caching = false;
  CachingAllocatorModel a(conf);
  const int x = a.malloc(1000);
  a.malloc(3 * MiB);
  a.free(x);
  EXPECT_EQ(a.reserved(), 3 * MiB);
  EXPECT_EQ(a.peak_reserved(), 3 * MiB + 1000);
}

// The replay stops repeating a period when the digest recurs: it names where the blocks lie and
// which are free, whatever the order of the calls that put them there, and nothing else.
TEST(AllocatorModel, DigestNamesTheLayoutOfBlocksNotTheHistory) {
  for (const bool expandable : {false, true}) {
    AllocatorConfig c;
    c.expandable_segments = expandable;
    CachingAllocatorModel a(c), b(c);
    const std::uint64_t empty = a.state_digest();
    EXPECT_EQ(empty, b.state_digest());
    // Three 4 MiB blocks in one 20 MiB segment (expandable: one mapped range), freed in two orders.
    const int a1 = a.malloc(4 * MiB), a2 = a.malloc(4 * MiB), a3 = a.malloc(4 * MiB);
    const int b1 = b.malloc(4 * MiB), b2 = b.malloc(4 * MiB), b3 = b.malloc(4 * MiB);
    EXPECT_EQ(a.state_digest(), b.state_digest());
    EXPECT_NE(a.state_digest(), empty);
    a.free(a1), a.free(a2), a.free(a3);
    b.free(b3), b.free(b1), b.free(b2);
    // All merged back into one free block: the same layout, reached differently.
    EXPECT_EQ(a.state_digest(), b.state_digest());
    // Live or free at the same place differs, as does the same size at another place.
    const int x = a.malloc(4 * MiB);
    const std::uint64_t first_live = a.state_digest();
    a.free(x);
    const int y1 = a.malloc(4 * MiB), y2 = a.malloc(4 * MiB);
    a.free(y1);
    EXPECT_NE(a.state_digest(), first_live);  // the live 4 MiB block is the second one now
    a.free(y2);
    EXPECT_EQ(a.state_digest(), b.state_digest());
  }
  // Without caching a tensor is a segment of its own, given back when freed.
  AllocatorConfig none;
  none.caching = false;
  CachingAllocatorModel n(none);
  const std::uint64_t before = n.state_digest();
  const int h = n.malloc(3 * MiB);
  EXPECT_NE(n.state_digest(), before);
  n.free(h);
  EXPECT_EQ(n.reserved(), 0);
}

TEST(AllocatorModel, ReadsPytorchCudaAllocConfAsPytorchDoes) {
  const AllocatorConfig c = parse_alloc_conf(
      "expandable_segments:True, garbage_collection_threshold:0.6,"
      "roundup_power2_divisions:8,pinned_use_cuda_host_register:True");
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.6);
  EXPECT_EQ(c.roundup_power2_divisions, 8);
  EXPECT_TRUE(parse_alloc_conf("backend:cudaMallocAsync").async_backend);
  EXPECT_TRUE(parse_alloc_conf("").caching);
  for (const char* bad : {"max_split_size_mb:20", "expandable_segments:true", "roundup_power2_divisions:3",
                          "roundup_power2_divisions:[256:1,>:4]", "garbage_collection_threshold:1", "unknown_option:1",
                          "max_split_size_mb"})
    EXPECT_THROW(parse_alloc_conf(bad), UsageError) << bad;
}

// empty_cache (release_cached_blocks): a cached block that is its whole segment goes back; a
// segment split between a live and a cached block stays whole; expandable segments stay.
TEST(AllocatorModel, EmptyCacheReleasesOnlyWholeFreeSegments) {
  CachingAllocatorModel a;
  const int x = a.malloc(100 * MiB);
  const int y = a.malloc(60 * MiB);
  a.free(x);  // a whole 100 MiB segment, cached
  a.free(y);
  const int part = a.malloc(30 * MiB);  // best fit: the 60 MiB segment, split 30 + 30
  EXPECT_EQ(a.reserved(), 160 * MiB);
  a.empty_cache();
  EXPECT_EQ(a.reserved(), 60 * MiB);  // the 100 MiB segment went back; the split one stays
  EXPECT_EQ(a.segments(), 1u);
  EXPECT_EQ(a.peak_reserved(), 160 * MiB);
  // The freed space is gone: a 100 MiB request takes a new segment, and the allocator goes on.
  const int again = a.malloc(100 * MiB);
  EXPECT_EQ(a.reserved(), 160 * MiB);
  a.free(part);  // merges with its free 30 MiB neighbour: the 60 MiB segment is whole again
  a.empty_cache();
  EXPECT_EQ(a.reserved(), 100 * MiB);
  a.free(again);
  a.empty_cache();
  EXPECT_EQ(a.reserved(), 0);
  EXPECT_EQ(a.segments(), 0u);
  // Expandable segments unmap pages instead (not modelled): nothing changes.
  AllocatorConfig c;
  c.expandable_segments = true;
  CachingAllocatorModel e(c);
  e.free(e.malloc(100 * MiB));
  const std::int64_t mapped = e.reserved();
  e.empty_cache();
  EXPECT_EQ(e.reserved(), mapped);
}

// --empty-unused-memory-level (training.py train_step): the cache emptied after the forward and
// backward passes (1), and after the optimizer step too (2), moves reserved memory only. On this
// model level 1 ends with less reserved than level 0 (whole segments the last step left cached go
// back); in general emptying can also cost segments later, so only this model's direction is
// asserted.
TEST(DeviceMemory, EmptyUnusedMemoryLevelMovesReservedOnly) {
  Registry reg;
  test::register_layer_models(reg);
  const Estimator est(test::gpt_model(4, 2048, 16), reg);
  TrainingSetup s;
  s.parallel.world_size = 1;
  s.seq_length = 4096;
  s.micro_batch_size = 2;
  std::vector<StageEstimate> at;
  for (std::int64_t level : {0, 1, 2}) {
    s.empty_unused_memory_level = level;
    at.push_back(est.run(s).peak());
    EXPECT_GE(at.back().reserved_bytes, at.back().total_bytes) << level;
    EXPECT_EQ(at.back().total_bytes, at.front().total_bytes) << level;
  }
  EXPECT_LT(at[1].reserved_bytes, at[0].reserved_bytes);
  EXPECT_LE(at[2].reserved_bytes, at[1].reserved_bytes);
}

// The device total's terms outside PyTorch on 8 GPUs at TP 8 (DP 1, PP 1): the CUDA context
// (512 MiB, an assumption) and one NCCL communicator per process group a step uses with more
// than one rank: world, tensor parallel and model parallel (TP x PP = 8), each 16 channels x
// (4 MiB Simple + 120 x 640 x 8 x 8 B LL128 + 8 x 512 x 8 x 16 B LL) = 16 x 9633792 B.
TEST(DeviceMemory, OutsidePytorchCountsContextAndCommunicators) {
  Registry reg;
  test::register_layer_models(reg);
  const Estimator est(test::gpt_model(2, 1024, 16), reg);
  TrainingSetup s;
  s.parallel.world_size = 8;
  s.parallel.tp = 8;
  s.seq_length = 1024;
  const Estimate e = est.run(s);
  const StageEstimate& st = e.peak();
  EXPECT_EQ(st.outside_pytorch_bytes, 512 * MiB + 3 * 16 * 9633792LL);
  EXPECT_EQ(st.device_bytes, st.reserved_bytes + st.outside_pytorch_bytes);
  EXPECT_GE(st.reserved_bytes, st.total_bytes);  // the segments hold every block handed out
}

// What the first backward through a block creates (the replay places each then): the shapes not
// seen before, in the block's order, and nothing the second time. linear_qkv [3072, 1024] and
// linear_proj [1024, 1024] of gpt_model(4, 1024, 16); then a block of the same shapes adds none.
TEST(DeviceMemory, PlaceholderCacheReportsTheTensorsEachBlockCreates) {
  BlockParams attn;
  attn.gemm_weights.push({ParamGroup::kAttention, 3072, 1024});
  attn.gemm_weights.push({ParamGroup::kAttention, 1024, 1024});
  CachedDummyWgrads cache;
  std::vector<std::int64_t> added;
  cache.add(attn, TrainingSetup{}, &added);
  EXPECT_EQ(added, (std::vector<std::int64_t>{3'145'728, 1'048'576}));
  added.clear();
  cache.add(attn, TrainingSetup{}, &added);
  EXPECT_TRUE(added.empty());
  EXPECT_EQ(cache.bytes(2).value(), 8'388'608);  // (3072 + 1024) x 1024 x 2 B
}

// TE's weight-gradient placeholders (module/base.py get_dummy_wgrad) come one by one, each of a
// weight's shape, in the first backward pass, after Megatron's DDP has moved the weights into its
// buffer and left each original tensor's segment cached (build_model): they reuse those
// segments. gpt_model(2, 4096, 32) on one GPU, distributed optimizer: linear_qkv [12288, 4096],
// linear_proj [4096, 4096], linear_fc1 [16384, 4096] and linear_fc2 [4096, 16384] (four shapes):
// the placeholders are (12288 + 4096 + 16384 + 16384) x 4096 x 2 B = 402,653,184 B. Two layers
// left two freed originals of each shape; the 256-token activations (a few MiB a tensor) can
// spoil at most one of each pair before the backward, so at least half of the placeholders'
// bytes come from cached segments: against the run without gradient accumulation fusion (no
// placeholders) reserved memory grows by less than half their bytes. (One block of all of them,
// allocated before the first pass, needed a new segment: it grew by 249,561,088 B here.)
TEST(DeviceMemory, WeightGradientPlaceholdersReuseTheWeightsFreedSegments) {
  Registry reg;
  test::register_layer_models(reg);
  const Estimator est(test::gpt_model(2, 4096, 32), reg);
  TrainingSetup s;
  s.parallel.world_size = 1;
  s.optimizer.distributed = true;
  s.seq_length = 256;
  const StageEstimate with = est.run(s).peak();
  s.gradient_accumulation_fusion = false;
  const StageEstimate without = est.run(s).peak();
  const std::int64_t placeholders = test::component_sum(with, "other/te_dummy_wgrads");
  ASSERT_EQ(placeholders, 402'653'184);
  EXPECT_EQ(test::component_sum(without, "other/te_dummy_wgrads"), 0);
  EXPECT_LT(with.reserved_bytes - without.reserved_bytes, placeholders / 2);
  EXPECT_GE(with.reserved_bytes, with.total_bytes);
}

}  // namespace
}  // namespace mme
