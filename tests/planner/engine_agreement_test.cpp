// The planner and `mme estimate` are one model: for every layout the planner judges, its peak,
// bound, headroom and fit are what Estimator::run and judge_fit give for Planner::setup_for of
// that layout, to the byte, and Planner::score gives the score the search ranked it by. Checked
// on a dense model (Llama 3 8B), DeepSeek-V3 (MoE, MLA, MTP) and Moonlight (MoE, MLA) over
// searches with different GPUs, precisions, sequence lengths and fixed sizes; and the planner
// enumerates no layout whose blocks the engine rejects (its block checks are the engine's).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>
#include <mme/planner/planner.hpp>

#include "agreement_registry.hpp"

namespace mme {
namespace {

const Registry& registry() { return test::agreement_registry(); }

ModelSpec bundled(const std::string& id) { return test::bundled_model(id, registry()); }

struct Case {
  std::string name;
  PlanOptions options;
  std::size_t stride = 1;  // every stride-th streamed layout is re-estimated
};

PlanOptions options(std::int64_t gpus, const char* gpu) {
  PlanOptions o;
  o.num_gpus = gpus;
  o.gpu = registry().find_hardware(gpu);
  o.threads = 2;
  return o;
}

std::string describe(const PlanLayout& l) {
  const PlanKnobs& k = l.knobs;
  return fmt::format(
      "tp {} pp {} vpp {} ep {} etp {} cp {} dp {} split {}/{}/{} mbs {} recompute {} sharding {} offload {} graphs {}",
      l.tp, l.pp, l.vpp, l.ep, l.etp, l.cp, l.dp, l.first_stage_layers, l.middle_stage_layers, l.last_stage_layers,
      l.micro_batch_size, to_string(l.recompute), k.dp_sharding ? to_string(*k.dp_sharding) : "-",
      k.optimizer_offload_fraction.value_or(-1), k.cuda_graphs ? to_string(*k.cuda_graphs) : "-");
}

// The memory-for-time knobs, searched: sharding, optimizer offload and CUDA graphs.
void search_knobs(PlanOptions& o, std::vector<CudaGraphChoice> graphs) {
  o.dp_sharding = {DpSharding::kDistributedOptimizer, DpSharding::kOptim, DpSharding::kOptimGradsParams};
  o.optimizer_offload_fractions = {0, 0.5};
  o.cuda_graphs = std::move(graphs);
}

void expect_same_score(const PlanScore& a, const PlanScore& b) {
  EXPECT_EQ(a.score, b.score);
  EXPECT_EQ(a.step_seconds, b.step_seconds);
  EXPECT_EQ(a.ideal_seconds, b.ideal_seconds);
  EXPECT_EQ(a.bubble, b.bubble);
  EXPECT_EQ(a.stage_seconds, b.stage_seconds);
  EXPECT_EQ(a.compute_seconds, b.compute_seconds);
  EXPECT_EQ(a.recompute_seconds, b.recompute_seconds);
  EXPECT_EQ(a.tp_seconds, b.tp_seconds);
  EXPECT_EQ(a.ep_seconds, b.ep_seconds);
  EXPECT_EQ(a.cp_seconds, b.cp_seconds);
  EXPECT_EQ(a.pp_seconds, b.pp_seconds);
  EXPECT_EQ(a.dp_seconds, b.dp_seconds);
  EXPECT_EQ(a.communication_seconds, b.communication_seconds);
  EXPECT_EQ(a.fsdp_seconds, b.fsdp_seconds);
  EXPECT_EQ(a.offload_seconds, b.offload_seconds);
  EXPECT_EQ(a.launch_seconds, b.launch_seconds);
}

// One plan against the engine run on its setup, as `mme estimate <args>` would run it.
void expect_engine_agrees(const Planner& planner, const PlanOptions& o, const Plan& plan, std::int64_t usable) {
  SCOPED_TRACE(describe(plan.layout));
  EstimateOptions eo;
  eo.compute_capability = o.gpu->compute_capability;
  eo.components = false;
  eo.device_memory = false;  // the planner judges by the fixed rule, without the allocator replay
  const Estimate est = planner.estimator().run(planner.setup_for(plan.layout, o), eo);
  const FitVerdict v = judge_fit(est, *o.gpu, o.headroom_fraction);
  EXPECT_EQ(v.usable_bytes, usable);
  EXPECT_EQ(plan.peak_bytes, est.peak().total_bytes);
  if (est.peak().total_bytes <= usable) {
    // At or below the usable memory the planner's engine call evaluates the bound in full.
    EXPECT_EQ(plan.upper_bytes, v.needed_bytes);
    EXPECT_EQ(plan.headroom_bytes, v.headroom_bytes);
    EXPECT_EQ(plan.fits, v.fits);
  } else {
    EXPECT_GE(plan.upper_bytes, plan.peak_bytes);
    EXPECT_FALSE(plan.fits);
    EXPECT_FALSE(v.fits);
  }
  if (plan.score.step_seconds > 0) expect_same_score(planner.score(plan.layout, o), plan.score);
}

TEST(PlannerEngineAgreement, EveryJudgedLayoutIsTheEnginesEstimateToTheByte) {
  std::vector<std::pair<std::string, std::vector<Case>>> models;
  {
    std::vector<Case> cases;
    cases.push_back({"8 x H100", options(8, "H100"), 1});
    Case fp8{"32 x H100, fp8, global batch 256", options(32, "H100"), 3};
    fp8.options.base.precision = Precision::kFP8;
    fp8.options.base.global_batch_size = 256;
    cases.push_back(fp8);
    Case knobs{"16 x H100, sharding, offload and CUDA graphs searched", options(16, "H100"), 11};
    knobs.options.micro_batch_sizes = {1, 2};
    search_knobs(knobs.options, {CudaGraphChoice{}, CudaGraphChoice{true, 0}, CudaGraphChoice{true, kGraphAttn}});
    cases.push_back(knobs);
    models.emplace_back("meta-llama/Meta-Llama-3-8B", cases);
  }
  {
    std::vector<Case> cases;
    Case full{"512 x H100, TP 4, full recompute", options(512, "H100"), 5};
    full.options.tp = 4;
    full.options.micro_batch_sizes = {1};
    full.options.recompute = {RecomputeVariant::kFull};
    cases.push_back(full);
    Case pp16{"128 x H200, PP 16", options(128, "H200"), 1};
    pp16.options.pp = 16;
    pp16.options.micro_batch_sizes = {1};
    cases.push_back(pp16);
    Case fp8{"128 x H200, PP 8, fp8", options(128, "H200"), 2};
    fp8.options.pp = 8;
    fp8.options.micro_batch_sizes = {1};
    fp8.options.base.precision = Precision::kFP8;
    cases.push_back(fp8);
    models.emplace_back("deepseek-ai/DeepSeek-V3", cases);
  }
  {
    std::vector<Case> cases;
    cases.push_back({"16 x H100", options(16, "H100"), 7});
    Case longer{"64 x H100, 8k sequence", options(64, "H100"), 25};
    longer.options.base.seq_length = 8192;
    longer.options.micro_batch_sizes = {1, 2};
    longer.options.recompute = {RecomputeVariant::kNone, RecomputeVariant::kSelective};
    cases.push_back(longer);
    Case knobs{"32 x H100, sharding, offload and CUDA graphs searched", options(32, "H100"), 17};
    knobs.options.micro_batch_sizes = {1};
    knobs.options.recompute = {RecomputeVariant::kNone, RecomputeVariant::kFull};
    search_knobs(knobs.options, {CudaGraphChoice{}, CudaGraphChoice{true, kGraphAttn | kGraphMoeRouter}});
    cases.push_back(knobs);
    models.emplace_back("moonshotai/Moonlight-16B-A3B", cases);
  }

  for (const auto& [id, cases] : models) {
    SCOPED_TRACE(id);
    const Planner planner(bundled(id), registry());
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      // Every valid layout, as the search judged it (all estimated: the --csv path).
      PlanOptions streamed = c.options;
      std::vector<Plan> rows;
      streamed.on_valid = [&rows](const Plan& p) { rows.push_back(p); };
      const PlanResult all = planner.run(streamed);
      ASSERT_EQ(rows.size(), all.valid);
      ASSERT_GT(rows.size(), 500u);
      EXPECT_EQ(all.usable_bytes, usable_memory_bytes(*c.options.gpu, c.options.headroom_fraction));
      std::size_t checked = 0, fitting = 0, over = 0;
      for (std::size_t i = 0; i < rows.size(); i += c.stride) {
        expect_engine_agrees(planner, c.options, rows[i], all.usable_bytes);
        ++checked;
        (rows[i].fits ? fitting : over) += 1;
      }
      EXPECT_GT(checked, 300u);
      EXPECT_GT(fitting, 0u);  // both sides of the fit are compared
      EXPECT_GT(over, 0u);
      // The search as `mme plan` runs it (variants judged without the engine where they cannot
      // change the result): its top plans and its smallest layout.
      const PlanResult top = planner.run(c.options);
      ASSERT_FALSE(top.plans.empty());
      EXPECT_EQ(top.fitting, all.fitting);
      for (const Plan& p : top.plans) expect_engine_agrees(planner, c.options, p, top.usable_bytes);
      ASSERT_TRUE(top.smallest);
      expect_engine_agrees(planner, c.options, *top.smallest, top.usable_bytes);
    }
  }
}

// The planner checks each TP/CP/EP/ETP combination with the block contexts the engine builds,
// under the attention backend the engine resolves: with Megatron's local transformer (unfused
// attention, which cannot split the sequence) it enumerates no CP > 1 layout for the engine to
// reject, and every enumerated layout is valid.
TEST(PlannerEngineAgreement, TheBlockChecksAreTheEnginesUnderItsAttentionBackend) {
  for (const char* id : {"meta-llama/Meta-Llama-3-8B", "moonshotai/Moonlight-16B-A3B"}) {
    SCOPED_TRACE(id);
    const Planner planner(bundled(id), registry());
    PlanOptions o = options(16, "H100");
    o.base.transformer_engine = false;
    const PlanResult r = planner.run(o);
    EXPECT_GT(r.valid, 100u);
    EXPECT_EQ(r.valid, r.evaluated) << r.first_error;
    std::uint64_t n = 0;
    planner.enumerate(o, [&n](const PlanLayout& l) {
      ++n;
      EXPECT_EQ(l.cp, 1) << describe(l);
    });
    EXPECT_EQ(n, r.evaluated);
    // With Transformer Engine the same search does split the sequence.
    o.base.transformer_engine = true;
    bool any_cp = false;
    planner.enumerate(o, [&any_cp](const PlanLayout& l) { any_cp = any_cp || l.cp > 1; });
    EXPECT_TRUE(any_cp);
  }
}

}  // namespace
}  // namespace mme
