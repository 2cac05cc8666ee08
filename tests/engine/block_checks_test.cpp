// A block's own fields are checked by its layer-memory model (LayerMemoryModel::validate_spec,
// run by validate_model_blocks when a model is loaded and when an Estimator is built), not by
// the SDK's validate_model_spec, which knows no block kind (issue 15: the core names no
// concrete kind). The messages are the ones the core gave before the checks moved.
#include <string>

#include <gtest/gtest.h>

#include <mme/engine/setup_checks.hpp>
#include <mme/sdk/error.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

const Registry& layer_registry() {
  static const Registry* r = [] {
    auto* out = new Registry;
    test::register_layer_models(*out);
    return out;
  }();
  return *r;
}

std::string config_error(const ModelSpec& m) {
  try {
    validate_model_blocks(m, layer_registry());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

ModelSpec mla_moe_model() {
  ModelSpec m = test::gpt_model(2, 1024, 16);
  m.name = "mla-moe";
  for (auto& l : m.layers) {
    l.attention.kind = "mla";
    l.attention.kv_lora_rank = 512;
    l.attention.qk_head_dim = 128;
    l.attention.qk_pos_emb_head_dim = 64;
    l.attention.v_head_dim = 128;
  }
  auto& moe = m.layers[1].mlp;
  moe.kind = "moe";
  moe.num_experts = 8;
  moe.top_k = 2;
  moe.expert_ffn_hidden_size = 512;
  return m;
}

TEST(BlockChecks, AValidModelPasses) {
  EXPECT_EQ(config_error(mla_moe_model()), "(no error)");
  EXPECT_EQ(config_error(test::gpt_model(2, 1024, 16)), "(no error)");
}

// Each block's own checks, with their messages, are tested in its folder
// (plugins/layers/<kind>/tests); here only that the host runs them and the SDK check does not.
TEST(BlockChecks, TheHostRunsEachBlocksChecks) {
  ModelSpec m = mla_moe_model();
  m.layers[1].attention.kv_lora_rank = 0;
  EXPECT_NO_THROW(validate_model_spec(m));  // the SDK check knows no block kind
  EXPECT_EQ(config_error(m), "mla-moe: layer 1 kv_lora_rank must be positive, got 0");
  m = mla_moe_model();
  m.layers[1].mlp.top_k = 9;
  EXPECT_NO_THROW(validate_model_spec(m));
  EXPECT_EQ(config_error(m), "mla-moe: layer 1: moe_router_topk = 9 exceeds num_experts = 8");
}

TEST(BlockChecks, TheEstimatorRunsThemToo) {
  ModelSpec m = mla_moe_model();
  m.layers[0].attention.v_head_dim = 0;
  EXPECT_THROW(Estimator(m, layer_registry()), ConfigError);
}

TEST(BlockChecks, AKindNoModelHandlesIsLeftToTheEstimator) {
  ModelSpec m = test::gpt_model(2, 1024, 16);
  m.layers[0].attention.kind = "unknown_attention";
  EXPECT_EQ(config_error(m), "(no error)");
  EXPECT_THROW(Estimator(m, layer_registry()), PluginError);
}

// --recompute-modules mla_up_proj on a model without MLA: refused by the GQA block now, with the
// message Megatron's TransformerConfig check gives in words.
TEST(BlockChecks, MlaUpProjRecomputeIsRefusedByTheGqaBlock) {
  const ModelSpec m = test::gpt_model(2, 1024, 16);
  TrainingSetup s;
  s.recompute.granularity = RecomputeGranularity::kSelective;
  s.recompute.modules = kRecomputeMlaUpProj;
  Estimator e(m, layer_registry());
  try {
    e.run(s);
    FAIL() << "mla_up_proj on a GQA model was accepted";
  } catch (const LayoutError& err) {
    EXPECT_STREQ(err.what(), "--recompute-modules mla_up_proj needs a model with multi-latent attention");
  }
  ModelSpec mla = mla_moe_model();
  Estimator ok(mla, layer_registry());
  EXPECT_NO_THROW(ok.run(s));
}

}  // namespace
}  // namespace mme
