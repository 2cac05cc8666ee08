// The memory-for-time knobs of `mme plan` (docs/planner.md, "The knobs"): data-parallel sharding
// (the distributed optimizer or Megatron-FSDP), optimizer CPU offload and per-layer CUDA graphs.
// Their cost terms against values worked out by hand from the code they model, the ranking they
// give, the combinations Megatron-LM refuses (counted invalid, never a crash), and the search's
// shortcuts, which must change no result with the knobs searched.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/planner/planner.hpp>
#include <mme/sdk/error.hpp>

#include "planner_zoo.hpp"

namespace mme {
namespace {

using namespace test::planner_zoo;  // registry(), bundled(), h100(), options_for(), hopper()

// Qwen3-0.6B on 8 GPUs with TP 1, PP 1, DP 8 and micro-batch 1.
PlanLayout dp8() {
  PlanLayout l;
  l.dp = 8;
  l.first_stage_layers = l.middle_stage_layers = l.last_stage_layers = 28;
  return l;
}

// The rank's parameters, as the engine counts them: its 16-bit weight bytes / 2.
double rank_params(const Planner& planner, const PlanLayout& l, const PlanOptions& o) {
  const Estimate e = planner.estimator().run(planner.setup_for(l, o), hopper());
  return static_cast<double>(e.stages.front().weight_bytes) / 2;
}

TEST(planner_knobs, ParsingAndNames) {
  EXPECT_EQ(parse_dp_sharding("dist_opt"), DpSharding::kDistributedOptimizer);
  EXPECT_EQ(parse_dp_sharding("optim_grads_params"), DpSharding::kOptimGradsParams);
  EXPECT_STREQ(to_string(DpSharding::kOptimGrads), "optim_grads");
  EXPECT_THROW((void)parse_dp_sharding("zero3"), UsageError);
  EXPECT_FALSE(parse_cuda_graph_choice("off").on);
  const CudaGraphChoice full = parse_cuda_graph_choice("full");
  EXPECT_TRUE(full.on);
  EXPECT_EQ(full.modules, 0u);
  const CudaGraphChoice attn_router = parse_cuda_graph_choice("attn+moe_router");
  EXPECT_EQ(attn_router.modules, kGraphAttn | kGraphMoeRouter);
  EXPECT_EQ(to_string(attn_router), "attn+moe_router");
  EXPECT_EQ(to_string(full), "full");
  EXPECT_THROW((void)parse_cuda_graph_choice("attn mlp"), UsageError);
  EXPECT_THROW((void)parse_cuda_graph_choice("everything"), UsageError);
  EXPECT_THROW((void)parse_cuda_graph_choice(""), UsageError);
}

TEST(planner_knobs, TheSearchHasOneCandidatePerCombination) {
  const Planner planner(bundled("Qwen/Qwen3-0.6B"), registry());
  PlanOptions o = options_for(8);
  const std::uint64_t plain = planner.count_candidates(o);
  o.dp_sharding = {DpSharding::kDistributedOptimizer, DpSharding::kOptimGradsParams};
  o.optimizer_offload_fractions = {0, 0.5, 1};
  o.cuda_graphs = {CudaGraphChoice{}, CudaGraphChoice{true, 0}};
  EXPECT_EQ(planner.count_candidates(o), 12 * plain);
  ASSERT_EQ(plan_knob_combinations(o).size(), 12u);
  // The knobs vary inside a layout, before its micro-batch and recompute variants.
  std::vector<PlanLayout> first;
  planner.enumerate(o, [&first](const PlanLayout& l) {
    if (first.size() < 9 * 12) first.push_back(l);
  });
  EXPECT_EQ(first[0].knobs, (PlanKnobs{DpSharding::kDistributedOptimizer, 0.0, CudaGraphChoice{}}));
  EXPECT_EQ(first[9].knobs, (PlanKnobs{DpSharding::kDistributedOptimizer, 0.0, CudaGraphChoice{true, 0}}));
  EXPECT_EQ(first[18].knobs.optimizer_offload_fraction, 0.5);
  EXPECT_EQ(first[0].tp, first[9 * 12 - 1].tp);
  EXPECT_EQ(first[0].pp, first[9 * 12 - 1].pp);
  // The setup of a candidate carries its knobs.
  PlanLayout l = first[9 * 12 - 1];
  const TrainingSetup s = planner.setup_for(l, o);
  EXPECT_EQ(s.fsdp.kind, FsdpKind::kMegatron);
  EXPECT_EQ(s.fsdp.strategy, FsdpSharding::kOptimGradsParams);
  EXPECT_EQ(s.optimizer.cpu_offload_fraction, 1.0);
  EXPECT_TRUE(s.cuda_graph.on());
  EXPECT_EQ(s.cuda_graph.impl, CudaGraphImpl::kTransformerEngine);
}

// With the recipes' --overlap-grad-reduce and --overlap-param-gather and no pipeline, the
// buckets' reduce-scatters run under the last micro-batch's backward and their all-gathers under
// the first forward, all but the embedding's: its weight gradient is computed last and its
// weight is needed first (Qwen3-0.6B ties it to the output layer; on one stage it is one
// parameter). On 8 GPUs in a node its 7/8 share of 151936 x 1024 parameters goes over NVLink in
// fp32 gradients and bf16 weights; the rest of the 0.6B parameters' traffic is shorter than a
// micro-batch's backward and forward at 4096 tokens, and hides.
TEST(planner_knobs, TheEmbeddingsTrafficShowsWhereTheRestHides) {
  const Planner planner(bundled("Qwen/Qwen3-0.6B"), registry());
  const PlanOptions o = options_for(8);
  ASSERT_TRUE(o.recipe_overlaps);
  PlanLayout l = dp8();
  l.knobs.dp_sharding = DpSharding::kDistributedOptimizer;
  const double link = 0.4 * h100().link_bandwidth_gbps * 1e9;
  const double embedding = 151936.0 * 1024;
  const PlanScore s = planner.score(l, o);
  EXPECT_NEAR(s.dp_seconds, 7.0 / 8.0 * embedding * (4 + 2) / link, 1e-9 * s.dp_seconds);
  // Without the overlaps the whole rank's traffic shows.
  PlanOptions plain = o;
  plain.recipe_overlaps = false;
  EXPECT_NEAR(planner.score(l, plain).dp_seconds, 7.0 / 8.0 * rank_params(planner, l, o) * (4 + 2) / link,
              1e-9 * s.dp_seconds);
}

// megatron_fsdp.py: optim_grads_params gathers the weights before each forward and backward and
// reduce-scatters the gradients after each backward, where the distributed optimizer does one
// reduce-scatter and one all-gather a step. Without the recipes' overlaps the distributed
// optimizer's traffic shows in full; Megatron-FSDP's per-micro-batch traffic hides under the
// compute of the other micro-batches (its prefetch), so only what outlasts them shows.
TEST(planner_knobs, FsdpTrafficIsPerMicroBatch) {
  const Planner planner(bundled("Qwen/Qwen3-0.6B"), registry());
  PlanOptions o = options_for(8);
  o.recipe_overlaps = false;
  o.base.global_batch_size = 64;  // m = 64 / (1 x 8) = 8 micro-batches
  o.dp_sharding = {DpSharding::kDistributedOptimizer, DpSharding::kOptim, DpSharding::kOptimGrads,
                   DpSharding::kOptimGradsParams};
  PlanLayout l = dp8();
  l.knobs.dp_sharding = DpSharding::kDistributedOptimizer;
  const double params = rank_params(planner, l, o);
  const double shared = 7.0 / 8.0 * params;  // sent over the 8 data-parallel ranks
  // NCCL's ring collectives reach 80 % of one direction of NVLink (cost_model.cpp).
  const double link = 0.4 * h100().link_bandwidth_gbps * 1e9;
  // Megatron-FSDP's extra bytes, less the 7 other micro-batches' compute they hide under.
  auto exposed = [&](double bytes, const PlanScore& s) {
    return std::max(0.0, shared * bytes / link - 7 * s.stage_seconds);
  };
  const PlanScore dist = planner.score(l, o);
  EXPECT_NEAR(dist.dp_seconds, shared * (4 + 2) / link, 1e-9 * dist.dp_seconds);  // fp32 grads, bf16 weights
  EXPECT_EQ(dist.fsdp_seconds, 0.0);
  // Megatron-FSDP reduces its gradients in their dtype, the param dtype by default (bf16).
  l.knobs.dp_sharding = DpSharding::kOptim;
  const PlanScore optim = planner.score(l, o);
  EXPECT_EQ(optim.fsdp_seconds, 0.0);  // once a step, as the distributed optimizer
  EXPECT_NEAR(optim.dp_seconds, shared * (2 + 2) / link, 1e-9 * optim.dp_seconds);
  l.knobs.dp_sharding = DpSharding::kOptimGrads;
  const PlanScore zero2 = planner.score(l, o);
  EXPECT_NEAR(zero2.fsdp_seconds, exposed(7 * 2, zero2), 1e-9 * zero2.step_seconds);
  l.knobs.dp_sharding = DpSharding::kOptimGradsParams;
  const PlanScore zero3 = planner.score(l, o);
  // (m - 1) more gradient reduce-scatters and (2m - 1) more weight all-gathers than one each.
  EXPECT_NEAR(zero3.fsdp_seconds, exposed(7 * 2 + 15 * 2, zero3), 1e-9 * zero3.step_seconds);
  EXPECT_NEAR(zero3.step_seconds - optim.step_seconds, zero3.fsdp_seconds, 1e-9 * zero3.step_seconds);
  // With fp32 gradients as the distributed optimizer's, the extra traffic is (7 x 4 + 15 x 2).
  o.base.fsdp.grad_comm = DType::kFP32;
  EXPECT_NEAR(planner.score(l, o).fsdp_seconds, exposed(7 * 4 + 15 * 2, zero3), 1e-9 * zero3.step_seconds);
  o.base.fsdp.grad_comm.reset();
  // On a slow network (2 GB/s between nodes, 2 GPUs per node) the traffic outlasts the compute.
  PlanOptions slow = o;
  slow.gpus_per_node = 2;
  slow.inter_node_bandwidth_gbps = 2;
  const PlanScore zero3_slow = planner.score(l, slow);
  EXPECT_GT(zero3_slow.fsdp_seconds, 0.0);
  EXPECT_LE(zero3.score, zero2.score);
  EXPECT_LE(zero2.score, optim.score);
  // On NVLink the other micro-batches' compute outlasts ZeRO-3's extra traffic (44 B a shared
  // parameter), so none of it shows and ZeRO-3's step is optim's: it reduce-scatters bf16
  // gradients where the distributed optimizer reduce-scatters its fp32 main_grad buffer, 2 B a
  // shared parameter less. With traffic to spare, ZeRO-3 ranks above the distributed optimizer.
  ASSERT_LT(shared * (7 * 2 + 15 * 2) / link, 7 * zero3.stage_seconds);
  EXPECT_NEAR(dist.step_seconds - zero3.step_seconds, shared * (4 - 2) / link, 1e-9 * dist.step_seconds);
  EXPECT_GT(zero3.score, dist.score);
  // On the slow network its per-micro-batch traffic shows: it ranks below the distributed optimizer.
  PlanLayout d = l;
  d.knobs.dp_sharding = DpSharding::kDistributedOptimizer;
  EXPECT_LT(zero3_slow.score, planner.score(d, slow).score);
}

// hybrid_optimizer.py: the offloaded share of the rank's optimizer shard sends its fp32 main
// gradients to the host, is stepped there and sends its fp32 parameters back.
TEST(planner_knobs, OffloadCostsCopiesAndTheHostStep) {
  const Planner planner(bundled("Qwen/Qwen3-0.6B"), registry());
  PlanOptions o = options_for(8);
  o.optimizer_offload_fractions = {0, 0.5};
  PlanLayout l = dp8();
  l.knobs.optimizer_offload_fraction = 0.0;
  const double shard = rank_params(planner, l, o) / 8;  // the distributed optimizer's shard
  const PlanScore none = planner.score(l, o);
  EXPECT_EQ(none.offload_seconds, 0.0);
  l.knobs.optimizer_offload_fraction = 0.5;
  const PlanScore half = planner.score(l, o);
  const double expected = 0.5 * shard * (4 + 4) / 50e9 + 0.5 * shard / 5e8;
  EXPECT_NEAR(half.offload_seconds, expected, 1e-9 * expected);
  // The GPU's optimizer updates the other half only.
  EXPECT_NEAR(half.optimizer_seconds, 0.5 * none.optimizer_seconds, 1e-9 * none.optimizer_seconds);
  EXPECT_NEAR(half.step_seconds - none.step_seconds, expected - 0.5 * none.optimizer_seconds, 1e-9 * half.step_seconds);
  // With the copies on their own streams the longer of copies and host step counts.
  o.base.optimizer.overlap_cpu_d2h_h2d = true;
  EXPECT_NEAR(planner.score(l, o).offload_seconds, 0.5 * shard / 5e8, 1e-9 * expected);
  o.base.optimizer.overlap_cpu_d2h_h2d = false;
  o.cpu_optimizer_params_per_second = 1e9;
  o.host_link_bandwidth_gbps = 25;
  EXPECT_NEAR(planner.score(l, o).offload_seconds, 0.5 * shard * 8 / 25e9 + 0.5 * shard / 1e9, 1e-9 * expected);
}

// A small layer per GPU (TP 8, a 64-token sequence) is launch-bound: launching its kernels
// takes longer than running them. Graphs replace a scope's launches by one graph launch a pass.
TEST(planner_knobs, CudaGraphsSaveTheLaunchesOfGraphedLayers) {
  const Planner planner(bundled("Qwen/Qwen3-0.6B"), registry());
  PlanOptions o = options_for(8);
  o.base.seq_length = 64;
  o.cuda_graphs = {CudaGraphChoice{}, CudaGraphChoice{true, 0}, CudaGraphChoice{true, kGraphAttn}};
  PlanLayout l = dp8();
  l.tp = 8;
  l.dp = 1;
  l.knobs.cuda_graphs = CudaGraphChoice{};
  const PlanScore off = planner.score(l, o);
  l.knobs.cuda_graphs = CudaGraphChoice{true, 0};
  const PlanScore full = planner.score(l, o);
  l.knobs.cuda_graphs = CudaGraphChoice{true, kGraphAttn};
  const PlanScore attn = planner.score(l, o);
  const double layers = 28, us = 1e-6;
  // The GPU time of a layer is below the 20 us of two graph launches: every case is launch-bound.
  const double gpu_per_layer = (full.compute_seconds + full.tp_seconds) / layers;
  ASSERT_LT(gpu_per_layer, 20 * us);
  ASSERT_GT(full.launch_seconds, 0.0);
  // (The embedding and the output head launch nothing in the model: all of it is the layers'.)
  // Eager: 3 passes x (16 attention + 8 MLP kernels) x 5 us; whole-layer graphs: 2 x 10 us;
  // attention graphs: 3 x 8 x 5 us + 2 x 10 us.
  EXPECT_NEAR(off.launch_seconds - full.launch_seconds, layers * (360 - 20) * us, 1e-9);
  EXPECT_NEAR(off.launch_seconds - attn.launch_seconds, layers * (360 - 140) * us, 1e-9);
  EXPECT_GT(full.score, attn.score);
  EXPECT_GT(attn.score, off.score);
  // Without graphs in the search launches count as well: the eager layer's.
  PlanOptions plain = o;
  plain.cuda_graphs.clear();
  PlanLayout p = l;
  p.knobs = {};
  EXPECT_NEAR(planner.score(p, plain).launch_seconds, off.launch_seconds, 1e-12);
  // A large layer hides its launches: graphs change nothing in the score.
  PlanOptions big = options_for(8);
  big.cuda_graphs = o.cuda_graphs;
  big.base.seq_length = 8192;
  PlanLayout b = dp8();
  b.micro_batch_size = 4;
  b.knobs.cuda_graphs = CudaGraphChoice{};
  const PlanScore big_off = planner.score(b, big);
  b.knobs.cuda_graphs = CudaGraphChoice{true, 0};
  EXPECT_EQ(big_off.launch_seconds, 0.0);
  EXPECT_EQ(planner.score(b, big).score, big_off.score);
}

// Megatron-LM refuses CUDA graphs with full recompute (transformer_config.py) and the engine does
// not model optimizer offload with Megatron-FSDP: such candidates are invalid, not errors.
TEST(planner_knobs, RefusedCombinationsAreInvalidCandidates) {
  const Planner planner(bundled("Qwen/Qwen3-0.6B"), registry());
  PlanOptions o = options_for(8);
  o.micro_batch_sizes = {1, 2};
  o.cuda_graphs = {CudaGraphChoice{}, CudaGraphChoice{true, 0}};
  o.dp_sharding = {DpSharding::kDistributedOptimizer, DpSharding::kOptimGradsParams};
  o.optimizer_offload_fractions = {0, 1};
  const PlanResult r = planner.run(o);
  // Invalid: graphs with full recompute (a third of the graphed half), FSDP with offload (a quarter).
  const std::uint64_t per = r.evaluated / 24;  // knob combinations x recompute variants
  ASSERT_EQ(per * 24, r.evaluated);
  const std::uint64_t invalid_pairs = 4 /* graphs x full */ + 6 /* fsdp x offload 1 */ - 1 /* both */;
  EXPECT_EQ(r.valid, r.evaluated - invalid_pairs * per);
  EXPECT_FALSE(r.first_error.empty());
  for (const Plan& p : r.plans) {
    EXPECT_FALSE(p.layout.knobs.cuda_graphs->on && p.layout.recompute == RecomputeVariant::kFull);
    EXPECT_FALSE(*p.layout.knobs.dp_sharding != DpSharding::kDistributedOptimizer &&
                 *p.layout.knobs.optimizer_offload_fraction > 0);
  }
  // Only refused pairs: the search has no valid layout and says why.
  o.cuda_graphs = {CudaGraphChoice{true, 0}};
  o.dp_sharding.clear();
  o.optimizer_offload_fractions.clear();
  o.recompute = {RecomputeVariant::kFull};
  try {
    (void)planner.run(o);
    ADD_FAILURE() << "expected a LayoutError";
  } catch (const LayoutError& e) {
    EXPECT_NE(std::string(e.what()).find("full recompute"), std::string::npos) << e.what();
  }
}

// With memory to spare, offloading the optimizer only costs time. Megatron-FSDP's per-micro-batch
// traffic hides under the other micro-batches' compute as the distributed optimizer's hides
// under the last backward and the first forward (the recipes' overlaps): sharding costs nothing
// there, never less than nothing, and on a tie the plan with more memory free comes first. Both
// reduce bf16 gradients here (--main-grads-dtype bf16): Megatron-FSDP reduces them in bf16 by
// default, half the bytes of the distributed optimizer's default fp32 ones, and the embedding's,
// reduced last, shows.
TEST(planner_knobs, WithMemoryToSpareOffloadRanksLowerAndShardingIsNoFaster) {
  const Planner planner(bundled("Qwen/Qwen3-0.6B"), registry());
  PlanOptions o = options_for(8);
  o.base.optimizer.main_grads = DType::kBF16;
  o.base.seq_length = 1024;  // every layout fits with either knob
  o.base.global_batch_size = 128;
  o.micro_batch_sizes = {1, 2};
  o.optimizer_offload_fractions = {0, 1};
  o.dp_sharding = {DpSharding::kDistributedOptimizer, DpSharding::kOptimGradsParams};
  o.top_k = 5;
  const PlanResult r = planner.run(o);
  ASSERT_FALSE(r.plans.empty());
  EXPECT_EQ(r.fitting, r.valid);
  for (const Plan& p : r.plans) {
    EXPECT_EQ(*p.layout.knobs.optimizer_offload_fraction, 0.0);
    PlanLayout d = p.layout;
    d.knobs.dp_sharding = DpSharding::kDistributedOptimizer;
    EXPECT_LE(p.score.score, planner.score(d, o).score);
  }
  PlanLayout l = r.plans.front().layout;
  l.knobs.optimizer_offload_fraction = 1.0;
  EXPECT_LT(planner.score(l, o).score, r.plans.front().score.score);
}

// Qwen3-8B without TP or PP on 8 GPUs of 58 GiB: the distributed optimizer's weights, gradients
// and a DP share of the optimizer states fit no layout (its smallest peak is about 58 GiB);
// ZeRO-3 sharding (about 22 GiB) and offloading the optimizer (about 50 GiB) bring plans.
TEST(planner_knobs, ShardingAndOffloadMakePlansAppear) {
  const Planner planner(bundled("Qwen/Qwen3-8B"), registry());
  PlanOptions o = options_for(8);
  HardwareProfile small = h100();
  small.memory_bytes = std::int64_t{58} << 30;
  o.gpu = &small;
  o.tp = 1;
  o.pp = 1;
  o.micro_batch_sizes = {1};
  o.recompute = {RecomputeVariant::kFull};
  const PlanResult plain = planner.run(o);
  EXPECT_EQ(plain.fitting, 0u);
  PlanOptions sharded = o;
  sharded.dp_sharding = {DpSharding::kDistributedOptimizer, DpSharding::kOptimGradsParams};
  const PlanResult s = planner.run(sharded);
  ASSERT_GT(s.fitting, 0u);
  for (const Plan& p : s.plans) EXPECT_EQ(*p.layout.knobs.dp_sharding, DpSharding::kOptimGradsParams);
  PlanOptions offloaded = o;
  offloaded.optimizer_offload_fractions = {0, 1};
  const PlanResult f = planner.run(offloaded);
  ASSERT_GT(f.fitting, 0u);
  for (const Plan& p : f.plans) EXPECT_EQ(*p.layout.knobs.optimizer_offload_fraction, 1.0);
  const Estimate est = planner.estimator().run(planner.setup_for(f.plans.front().layout, offloaded), hopper());
  EXPECT_EQ(est.peak().total_bytes, f.plans.front().peak_bytes);
}

// The shortcuts (a layout whose static bytes exceed the GPU, fits inferred from a larger
// micro-batch) change no count and no plan with the knobs searched, the refused pairs included.
TEST(planner_knobs, SkippingHopelessVariantsChangesNoResult) {
  const Planner planner(bundled("deepseek-ai/DeepSeek-V2-Lite"), registry());
  PlanOptions o = options_for(8);
  HardwareProfile small = h100();
  small.memory_bytes = std::int64_t{24} << 30;
  o.gpu = &small;
  o.top_k = 20;
  o.micro_batch_sizes = {1, 2};
  o.dp_sharding = {DpSharding::kDistributedOptimizer, DpSharding::kOptimGradsParams};
  o.optimizer_offload_fractions = {0, 1};
  o.cuda_graphs = {CudaGraphChoice{}, CudaGraphChoice{true, kGraphAttn}};
  const PlanResult quick = planner.run(o);
  std::uint64_t rows = 0;
  o.on_valid = [&rows](const Plan&) { ++rows; };
  const PlanResult full = planner.run(o);
  EXPECT_EQ(full.estimated, full.evaluated);
  EXPECT_LT(quick.estimated, full.estimated);
  EXPECT_EQ(quick.evaluated, full.evaluated);
  EXPECT_EQ(quick.valid, full.valid);
  EXPECT_LT(full.valid, full.evaluated);
  EXPECT_EQ(rows, full.valid);
  EXPECT_EQ(quick.fitting, full.fitting);
  EXPECT_GT(quick.fitting, 20u);
  EXPECT_LT(quick.fitting, quick.valid);
  ASSERT_EQ(quick.plans.size(), full.plans.size());
  for (std::size_t i = 0; i < quick.plans.size(); ++i) {
    EXPECT_EQ(quick.plans[i].ordinal, full.plans[i].ordinal);
    EXPECT_EQ(quick.plans[i].layout, full.plans[i].layout);
    EXPECT_EQ(quick.plans[i].peak_bytes, full.plans[i].peak_bytes);
  }
}

TEST(planner_knobs, InferredFitsChangeNoResult) {
  const Planner planner(bundled("Qwen/Qwen3-8B"), registry());
  for (PlanSortKey key : {PlanSortKey::kScore, PlanSortKey::kCommunication}) {
    SCOPED_TRACE(to_string(key));
    PlanOptions o = options_for(8);
    o.sort = key;
    o.top_k = 3;
    o.dp_sharding = {DpSharding::kDistributedOptimizer, DpSharding::kOptimGrads};
    o.optimizer_offload_fractions = {0, 0.5};
    o.cuda_graphs = {CudaGraphChoice{}, CudaGraphChoice{true, 0}};
    const PlanResult quick = planner.run(o);
    o.on_valid = [](const Plan&) {};
    const PlanResult full = planner.run(o);
    EXPECT_LT(quick.estimated, full.estimated);
    EXPECT_EQ(quick.fitting, full.fitting);
    EXPECT_EQ(quick.valid, full.valid);
    ASSERT_EQ(quick.plans.size(), 3u);
    ASSERT_EQ(full.plans.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(quick.plans[i].ordinal, full.plans[i].ordinal);
      EXPECT_EQ(quick.plans[i].peak_bytes, full.plans[i].peak_bytes);
    }
  }
}

TEST(planner_knobs, ArgsCarryTheKnobs) {
  const Planner planner(bundled("Qwen/Qwen3-0.6B"), registry());
  PlanOptions o = options_for(8);
  PlanLayout l = dp8();
  l.knobs = {DpSharding::kOptimGrads, std::nullopt, CudaGraphChoice{true, kGraphAttn}};
  std::string joined;
  for (const auto& a : planner.args_for(l, o)) joined += a + " ";
  for (const char* part : {"--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads",
                           "--cuda-graph-impl transformer_engine", "--cuda-graph-modules attn"})
    EXPECT_NE(joined.find(part), std::string::npos) << part << " not in " << joined;
  l.knobs = {DpSharding::kDistributedOptimizer, 0.25, CudaGraphChoice{}};
  joined.clear();
  for (const auto& a : planner.args_for(l, o)) joined += a + " ";
  EXPECT_NE(joined.find("--optimizer-cpu-offload-fraction 0.25"), std::string::npos) << joined;
  EXPECT_EQ(joined.find("fsdp"), std::string::npos) << joined;
  EXPECT_EQ(joined.find("cuda-graph"), std::string::npos) << joined;
}

}  // namespace
}  // namespace mme
