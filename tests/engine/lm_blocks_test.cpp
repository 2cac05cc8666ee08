// The blocks around the decoder layers are layer-memory models named by ModelSpec::lm_blocks: the
// engine finds them by kind and role, places them on the stages that hold them and refuses what
// such a block may not report.
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include <mme/sdk/error.hpp>
#include <mme/sdk/registrar.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

// An embedding of a plugin's own: the built-in terms' sizes, and one extra saved tensor of 1 MiB
// ("scaled embedding": its input scaled by sqrt(h) kept for backward).
class ScaledEmbedding final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "scaled_embedding"; }
  BlockRole role() const override { return BlockRole::kEmbedding; }
  std::string_view description() const override { return "test embedding"; }
  void validate_spec(const ModelSpec&, const LayerSpec&, std::size_t) const override {}
  void validate(const BlockContext&) const override {}
  void parameters(const BlockContext& ctx, BlockParams& out) const override {
    out.terms.push({"word_embeddings", ParamGroup::kEmbedding, ShardClass::kTensorParallel,
                    ctx.model.hidden_size * ctx.model.vocab_size, ctx.vocab_local * ctx.model.hidden_size,
                    ctx.model.hidden_size * ctx.model.vocab_size});
  }
  void activations(const BlockContext&, BlockActivations& out) const override {
    out.saved.push({"scaled_embedding/input", 1 << 20});
  }
  void costs(const BlockContext&, BlockCosts&) const override {}
};

// An output head that claims expert-sharded parameters, which no block around the layers may hold.
class ExpertHead final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "expert_head"; }
  BlockRole role() const override { return BlockRole::kOutputHead; }
  std::string_view description() const override { return "test output head"; }
  void validate_spec(const ModelSpec&, const LayerSpec&, std::size_t) const override {}
  void validate(const BlockContext&) const override {}
  void parameters(const BlockContext&, BlockParams& out) const override {
    out.terms.push({"experts", ParamGroup::kOutputLayer, ShardClass::kExpert, 8, 8, 8});
  }
  void activations(const BlockContext&, BlockActivations&) const override {}
  void costs(const BlockContext&, BlockCosts&) const override {}
};

const Registry& registry() {
  static const Registry* r = [] {
    auto* out = new Registry;
    test::register_layer_models(*out);
    out->register_plugin("test_blocks", "test", "", [](Registrar& reg) {
      reg.add_layer_model(std::make_shared<ScaledEmbedding>());
      reg.add_layer_model(std::make_shared<ExpertHead>());
    });
    return out;
  }();
  return *r;
}

TEST(LmBlocks, AKindNoPluginProvidesIsAPluginError) {
  ModelSpec m = test::gpt_model(4, 1024, 16);
  m.lm_blocks.embedding = "no_such_embedding";
  try {
    Estimator e(m, registry());
    FAIL() << "no error";
  } catch (const PluginError& err) {
    EXPECT_NE(std::string(err.what()).find("embedding kind 'no_such_embedding'"), std::string::npos) << err.what();
  }
  // A kind of the wrong role is no embedding either.
  m.lm_blocks.embedding = "output_head";
  EXPECT_THROW(Estimator(m, registry()), PluginError);
}

TEST(LmBlocks, AFamilysOwnEmbeddingIsUsedOnTheFirstStageOnly) {
  ModelSpec m = test::gpt_model(4, 1024, 16);
  m.lm_blocks.embedding = "scaled_embedding";
  const Estimate est = Estimator(m, registry()).run(test::two_stages());
  // Stage 0 holds the embedding (1 MiB per micro-batch, 2 micro-batches in flight at PP 2);
  // stage 1 holds the output head only.
  EXPECT_EQ(test::component_sum(est.stages[0], "activations/scaled_embedding/input"), 2 << 20);
  EXPECT_EQ(test::component_sum(est.stages[1], "activations/scaled_embedding/input"), 0);
  EXPECT_EQ(test::component_sum(est.stages[0], "activations/embedding/token_ids"), 0);  // not the built-in
}

// The built-in embedding's backward working set, its dense weight gradient, runs last in each
// micro-batch's backward: it meets the other micro-batch in flight (PP 2, stage 0: two), not its
// own chunk's activations, which autograd has freed but the embedding's own (the int64 ids, 8 B
// x 1024 tokens, and the 1-byte mask of embedding dropout, 1024 x 256). With a vocabulary of
// 1,000,064 (a multiple of 128) and h 256 the gradient, 2 B x 1,000,064 x 256 = 512,032,768 B,
// outweighs every layer's working set; the stage's transient is that less what the micro-batch
// freed before it.
TEST(LmBlocks, TheEmbeddingsWeightGradientMeetsOnlyTheOtherMicroBatches) {
  const ModelSpec m = test::gpt_model(2, 256, 4, 1'000'064);
  const Estimate est = Estimator(m, registry()).run(test::two_stages());
  const StageEstimate& st = est.stages.at(0);
  ASSERT_EQ(st.chunks.size(), 1u);
  const std::int64_t per_mb = st.chunks[0].activation_bytes_per_microbatch;
  const std::int64_t own = 8 * 1024 + 1024 * 256;
  EXPECT_EQ(test::component_sum(st, "activations/embedding/token_ids"), 2 * 8 * 1024);  // two in flight
  EXPECT_EQ(test::component_sum(st, "activations/transient_peak"), 512'032'768 - (per_mb - own));
}

TEST(LmBlocks, ExpertParametersOutsideTheMlpAreRefused) {
  ModelSpec m = test::gpt_model(4, 1024, 16);
  m.lm_blocks.output_head = "expert_head";
  const Estimator e(m, registry());
  try {
    e.run(test::two_stages());
    FAIL() << "no error";
  } catch (const PluginError& err) {
    EXPECT_NE(std::string(err.what()).find("expert-sharded parameters ('experts')"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace mme
