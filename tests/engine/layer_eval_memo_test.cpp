// The engine evaluates a layout's layer kinds once and reuses them for every pipeline partition
// of that layout (estimator_stages.cpp, LayerEvalMemo): the block models see the layout without
// its partition, a hit needs the whole key to match, and one Estimator's evaluations never serve
// another's.
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include <mme/sdk/registrar.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

// What the probe attention saw, over every call since the last reset.
struct Seen {
  int evaluations = 0;         // activations() calls
  bool any_partition = false;  // a call saw VPP > 1 or a pipeline split field set
};
Seen& seen() {
  static Seen s;
  return s;
}

// An attention block of fixed sizes that records what its context says of the pipeline partition.
class ProbeAttention final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "probe_attention"; }
  BlockRole role() const override { return BlockRole::kAttention; }
  std::string_view description() const override { return "test attention"; }
  void validate_spec(const ModelSpec&, const LayerSpec&, std::size_t) const override {}
  void validate(const BlockContext&) const override {}
  void parameters(const BlockContext& ctx, BlockParams& out) const override {
    const std::int64_t h = ctx.model.hidden_size;
    out.terms.push(
        {"probe_qkvo", ParamGroup::kAttention, ShardClass::kTensorParallel, 4 * h * h, 4 * h * h / ctx.tp, 4 * h * h});
  }
  void activations(const BlockContext& ctx, BlockActivations& out) const override {
    ++seen().evaluations;
    const PipelineSplit& p = ctx.setup.pipeline;
    if (ctx.setup.parallel.vpp != 1 || p.first_stage_layers || p.last_stage_layers || p.account_for_embedding ||
        p.account_for_loss || !p.layout.empty() || p.layers_per_virtual_stage)
      seen().any_partition = true;
    out.saved.push({"probe/input", ctx.local_tokens * ctx.model.hidden_size * 2});
  }
  void costs(const BlockContext&, BlockCosts&) const override {}
};

const Registry& registry() {
  static const Registry* r = [] {
    auto* out = new Registry;
    test::register_layer_models(*out);
    out->register_plugin("test_probe", "test", "",
                         [](Registrar& reg) { reg.add_layer_model(std::make_shared<ProbeAttention>()); });
    return out;
  }();
  return *r;
}

ModelSpec probe_model() {
  ModelSpec m = test::gpt_model(8, 1024, 16);
  for (auto& l : m.layers) l.attention.kind = "probe_attention";
  return m;
}

// Three partitions of one layout (PP 2; VPP 2; an uneven split; a layout string): the blocks see
// none of them, and only the first estimate evaluates the layer kind.
TEST(LayerEvalMemo, EveryPartitionOfALayoutSharesOneEvaluationWithoutSeeingThePartition) {
  const Estimator est(probe_model(), registry());
  seen() = Seen{};
  const Estimate even = est.run(test::two_stages());
  const int first = seen().evaluations;
  EXPECT_GT(first, 0);
  TrainingSetup interleaved = test::two_stages();
  interleaved.parallel.vpp = 2;
  TrainingSetup uneven = test::two_stages();
  uneven.pipeline.first_stage_layers = 3;
  uneven.pipeline.last_stage_layers = 5;
  TrainingSetup layout = test::two_stages();
  layout.pipeline.layout = "Et*2|t*2|t*2|t*2L";
  layout.parallel.vpp = 2;
  for (const TrainingSetup& s : {interleaved, uneven, layout}) {
    const Estimate e = est.run(s);
    EXPECT_EQ(seen().evaluations, first);
    // The partition still decides the stages: stage 0 of the uneven split holds 3 layers.
    if (&s == &uneven) {
      EXPECT_EQ(e.stages[0].layers, 3);
    }
  }
  EXPECT_FALSE(seen().any_partition);
  EXPECT_EQ(even.stages[0].layers, 4);
}

// A setup that differs from the last one only in a field the memo's quick filter does not read
// (the hidden dropout, which sizes the dropout masks) is evaluated again: its estimate is a fresh
// Estimator's, not the earlier setup's.
TEST(LayerEvalMemo, ASetupDifferingOnlyOutsideTheFilterIsEvaluatedAgain) {
  const ModelSpec m = test::gpt_model(4, 1024, 16);
  const Estimator est(m, registry());
  TrainingSetup with = test::two_stages(), without = test::two_stages();
  with.hidden_dropout = 0.1;
  without.hidden_dropout = 0.0;
  const std::int64_t a = est.run(with).peak().total_bytes;
  const std::int64_t b = est.run(without).peak().total_bytes;
  EXPECT_LT(b, a);  // no dropout masks
  EXPECT_EQ(b, Estimator(m, registry()).run(without).peak().total_bytes);
  EXPECT_EQ(a, est.run(with).peak().total_bytes);
}

// An Estimator built where a destroyed one lived (the allocator may hand out the same address)
// never gets the other's evaluations: its estimate is that of an Estimator built beside it.
TEST(LayerEvalMemo, AnEstimatorNeverGetsAnotherOnesEvaluations) {
  const TrainingSetup s = test::two_stages();
  std::int64_t narrow = 0;
  {
    const Estimator first(test::gpt_model(4, 1024, 16), registry());
    narrow = first.run(s).peak().total_bytes;
  }
  const ModelSpec wide_model = test::gpt_model(4, 2048, 16);
  const Estimator second(wide_model, registry());
  const std::int64_t wide = second.run(s).peak().total_bytes;
  EXPECT_GT(wide, narrow);
  EXPECT_EQ(wide, Estimator(wide_model, registry()).run(s).peak().total_bytes);
}

}  // namespace
}  // namespace mme
