// Low-precision recipes, each difference checked against bytes worked out by hand from the
// Transformer Engine / Megatron-LM code it models: the saved GEMM inputs with their scale_inv
// (tensor/float8_tensor.py, float8_blockwise_tensor.py, mxfp8_tensor.py, nvfp4_tensor.py
// get_scale_shape; module/linear.py, layernorm_linear.py "Prepare backward state"), the weight
// copies (module/base.py get_weight_workspace; fp8_utils.py post_all_gather_processing), the
// delayed-scaling state (quantization.py DelayedScalingRecipeState) and the bf16 first/last
// layers (fp8_utils.py is_first_last_bf16_layer), with Megatron-LM's refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/sdk/error.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

using ::testing::HasSubstr;

// 4 layers, h 1024, 16 heads, GELU MLP of 4h, no biases: 12 h^2 GEMM weight elements per layer
// (qkv 3h^2, proj h^2, fc1 and fc2 4h^2 each).
constexpr std::int64_t kLayers = 4, kH = 1024, kT = 4096;
constexpr std::int64_t kGemmParams = kLayers * 12 * kH * kH;  // P = 50,331,648

class LowPrecision : public ::testing::Test {
 protected:
  void SetUp() override { test::register_layer_models(registry_); }
  Estimate run(const ModelSpec& m, const TrainingSetup& s, int cc = 90) {
    EstimateOptions o;
    o.compute_capability = cc;
    return Estimator(m, registry_).run(s, o);
  }
  std::int64_t component(const TrainingSetup& s, const std::string& name, int cc = 90) {
    return test::component_sum(run(test::gpt_model(kLayers, kH, 16), s, cc).peak(), name);
  }
  Registry registry_;
};

// One GPU, sequence 4096, micro-batch 1: T = 4096 tokens, no sequence parallelism.
TrainingSetup fp8(Fp8Recipe r) {
  TrainingSetup s;
  s.parallel.world_size = 1;
  s.seq_length = kT;
  s.precision = Precision::kFP8;
  s.low_precision.fp8_recipe = r;
  return s;
}
TrainingSetup nvfp4() {
  TrainingSetup s = fp8(Fp8Recipe::kDelayed);
  s.precision = Precision::kBF16;
  s.low_precision.fp4 = true;
  return s;
}

// get_weight_workspace: bf16 primary weights, the quantized copies cached across micro-batches.
TEST_F(LowPrecision, WeightWorkspaceCachePerRecipe) {
  const std::string cache = "other/te_fp8_weight_cache";
  // Float8 (delayed, tensorwise) on Hopper: row-wise data + its transpose, 1 B each.
  EXPECT_EQ(component(fp8(Fp8Recipe::kDelayed), cache), 2 * kGemmParams);
  EXPECT_EQ(component(fp8(Fp8Recipe::kTensorwise), cache), 2 * kGemmParams);
  // Blackwell (is_non_tn_fp8_gemm_supported): the row-wise data serves both GEMMs.
  EXPECT_EQ(component(fp8(Fp8Recipe::kTensorwise), cache, 100), kGemmParams);
  // Blockwise: two 1-byte copies + fp32 scales of 128x128 blocks in each: 2 x 4 x P / 16384.
  EXPECT_EQ(component(fp8(Fp8Recipe::kBlockwise), cache), 2 * kGemmParams + 8 * (kGemmParams / 16384));
  // MXFP8: two 1-byte copies + one E8M0 byte per 32 elements in each: + 2 x P / 32 = 3,145,728.
  EXPECT_EQ(component(fp8(Fp8Recipe::kMxfp8), cache), 2 * kGemmParams + 3145728);
  // NVFP4: two half-byte copies + one E4M3 byte per 16 elements in each: P + P / 8.
  EXPECT_EQ(component(nvfp4(), cache), kGemmParams + kGemmParams / 8);
  // Without quantized GEMMs: none.
  TrainingSetup bf16 = fp8(Fp8Recipe::kMxfp8);
  bf16.precision = Precision::kBF16;
  EXPECT_EQ(component(bf16, cache), 0);
}

// --fp8-param-gather: the row-wise data is the 1-byte parameter, the column-wise copy is kept
// beside it (post_all_gather_processing), no workspace cache.
TEST_F(LowPrecision, PrimaryFp8WeightsKeepTheirColumnwiseCopy) {
  const std::string col = "other/fp8_primary_weight_columnwise";
  TrainingSetup s = fp8(Fp8Recipe::kTensorwise);
  s.fp8_param_gather = true;
  EXPECT_EQ(component(s, col), kGemmParams);  // the transpose (Hopper)
  EXPECT_EQ(component(s, col, 100), 0);       // Blackwell: no transpose
  EXPECT_EQ(component(s, "other/te_fp8_weight_cache"), 0);
  s.low_precision.fp8_recipe = Fp8Recipe::kMxfp8;
  // Column-wise data (P) + the scale_inv of both copies (2 x P / 32).
  EXPECT_EQ(component(s, col), kGemmParams + 3145728);
  // The parameters: 1 B for the GEMM weights instead of 2 B, the rest (norms, embedding) in bf16.
  const Estimate plain = run(test::gpt_model(kLayers, kH, 16), fp8(Fp8Recipe::kMxfp8));
  const Estimate primary = run(test::gpt_model(kLayers, kH, 16), s);
  EXPECT_EQ(plain.peak().weight_bytes - primary.peak().weight_bytes, kGemmParams);
  // The report's weight terms say the same: the uint8 buffer (1 B per GEMM weight) as its own
  // term, the 16-bit one for the rest, adding up to weight_bytes.
  EXPECT_EQ(test::component_sum(primary.peak(), "weights/quantized_gemm_weights"), kGemmParams);
  EXPECT_EQ(test::component_sum(primary.peak(), "weights/"), primary.peak().weight_bytes);
  EXPECT_EQ(test::component_sum(plain.peak(), "weights/"), plain.peak().weight_bytes);
  EXPECT_EQ(test::component_sum(plain.peak(), "weights/quantized_gemm_weights"), 0);
  // --fp4-param-gather: NVFP4 params packed two per byte (1.5 B less per GEMM weight than bf16).
  TrainingSetup f = nvfp4();
  f.low_precision.fp4_param_gather = true;
  f.optimizer.distributed = true;
  const Estimate fp4_primary = run(test::gpt_model(kLayers, kH, 16), f);
  EXPECT_EQ(run(test::gpt_model(kLayers, kH, 16), nvfp4()).peak().weight_bytes - fp4_primary.peak().weight_bytes,
            3 * kGemmParams / 2);
  // Column-wise half-byte data + both copies' E4M3 scales: P / 2 + P / 8.
  EXPECT_EQ(test::component_sum(fp4_primary.peak(), col), kGemmParams / 2 + kGemmParams / 8);
}

// DelayedScalingRecipeState: per GEMM 3 forward + 2 backward quantizers, each an fp32 scale and
// an fp32 amax history of --fp8-amax-history-len entries. Current scaling keeps no state.
TEST_F(LowPrecision, DelayedScalingKeepsAnAmaxHistoryPerGemm) {
  const std::string state = "other/fp8_scaling_state";
  TrainingSetup s = fp8(Fp8Recipe::kDelayed);
  // 4 GEMMs per layer (qkv, proj, fc1, fc2), 4 layers: 16 x 5 x 4 B x (1 + 1).
  EXPECT_EQ(component(s, state), 16 * 5 * 4 * 2);
  s.low_precision.amax_history_len = 1024;
  EXPECT_EQ(component(s, state), 16 * 5 * 4 * 1025);
  s.low_precision.fp8_recipe = Fp8Recipe::kTensorwise;
  EXPECT_EQ(component(s, state), 0);
  // MoE layers: fc1 and fc2 GroupedLinear hold one GEMM per local expert (8 experts / EP 2 = 4
  // each), the router is not quantized: 2 + 2 x 4 = 10 GEMMs per layer.
  ModelSpec moe = test::gpt_model(kLayers, kH, 16);
  for (auto& l : moe.layers) {
    l.mlp.kind = "moe";
    l.mlp.num_experts = 8;
    l.mlp.top_k = 2;
    l.mlp.expert_ffn_hidden_size = kH;
  }
  TrainingSetup e = fp8(Fp8Recipe::kDelayed);
  e.parallel.world_size = 2;
  e.parallel.ep = 2;
  e.low_precision.amax_history_len = 16;
  EXPECT_EQ(test::component_sum(run(moe, e).peak(), state), kLayers * 10 * 5 * 4 * 17);
}

// The saved GEMM inputs: the data and the scale_inv of the copy the recipe keeps for backward.
// qkv's input [T, h] = [4096, 1024], once per layer.
TEST_F(LowPrecision, SavedGemmInputsCarryTheirScales) {
  const std::string qkv = "activations/attention/qkv_input";
  const std::int64_t data = kT * kH;                                          // 4,194,304
  EXPECT_EQ(component(fp8(Fp8Recipe::kDelayed), qkv), kLayers * (data + 4));  // + one fp32 scale_inv
  // Blockwise 1x128, column-wise: fp32 [ceil(4096 / 128), round_up(1024, 4)] = 4 x 32 x 1024.
  EXPECT_EQ(component(fp8(Fp8Recipe::kBlockwise), qkv), kLayers * (data + 4 * 32 * 1024));
  // MXFP8 1x32, column-wise: E8M0 [round_up(4096 / 32, 4), round_up(1024, 128)] = 128 x 1024.
  EXPECT_EQ(component(fp8(Fp8Recipe::kMxfp8), qkv), kLayers * (data + 128 * 1024));
  // NVFP4, one (column-wise) copy without SP: data / 2 + E4M3 [1024, round_up(256, 4)] + fp32 amax.
  EXPECT_EQ(component(nvfp4(), qkv), kLayers * (data / 2 + 1024 * 256 + 4));
  // Under SP (TP 2: 2048 local rows) LayerNormLinear all-gathers its normed input: NVFP4 keeps
  // the row-wise copy too (only MXFP8 and blockwise drop it): 2 x (2048 x 1024 / 2) +
  // column-wise scales [1024, round_up(128, 4)] + row-wise scales [2048, round_up(64, 4)] + 2 amax.
  TrainingSetup sp = nvfp4();
  sp.parallel.world_size = 2;
  sp.parallel.tp = 2;
  EXPECT_EQ(component(sp, qkv), kLayers * (2048 * 1024 + 1024 * 128 + 2048 * 64 + 8));
  // Float8 under SP keeps the local row-wise shard it gathers in backward: 2048 x 1024 + 4.
  TrainingSetup sp8 = fp8(Fp8Recipe::kTensorwise);
  sp8.parallel.world_size = 2;
  sp8.parallel.tp = 2;
  EXPECT_EQ(component(sp8, qkv), kLayers * (2048 * 1024 + 4));
}

// --first-last-layers-bf16: layers 0 and 3 of 4 run without FP8: 2-byte inputs, no weight copies.
TEST_F(LowPrecision, FirstAndLastLayersStayInBf16) {
  TrainingSetup s = fp8(Fp8Recipe::kBlockwise);
  s.low_precision.first_last_layers_bf16 = true;
  const std::int64_t fp8_params = 2 * 12 * kH * kH;  // the two middle layers
  EXPECT_EQ(component(s, "other/te_fp8_weight_cache"), 2 * fp8_params + 8 * (fp8_params / 16384));
  const std::int64_t bf16_input = 2 * kT * kH, fp8_input = kT * kH + 4 * 32 * 1024;
  EXPECT_EQ(component(s, "activations/attention/qkv_input"), 2 * bf16_input + 2 * fp8_input);
  // Three layers at the start and one at the end: all four in bf16.
  s.low_precision.layers_at_start_in_bf16 = 3;
  EXPECT_EQ(component(s, "other/te_fp8_weight_cache"), 0);
  EXPECT_EQ(component(s, "activations/attention/qkv_input"), 4 * bf16_input);
  // Two pipeline stages: the bf16 layers are global (layer 0 on the first stage, layer 3 on the
  // last); each stage keeps one FP8 layer's weight copies.
  TrainingSetup pp = fp8(Fp8Recipe::kMxfp8);
  pp.low_precision.first_last_layers_bf16 = true;
  pp.parallel.world_size = 2;
  pp.parallel.pp = 2;
  pp.global_batch_size = 8;
  const Estimate est = run(test::gpt_model(kLayers, kH, 16), pp);
  ASSERT_EQ(est.stages.size(), 2u);
  for (const auto& st : est.stages)
    EXPECT_EQ(test::component_sum(st, "other/te_fp8_weight_cache"), 2 * 12 * kH * kH + 2 * (12 * kH * kH / 32));
}

// What Megatron-LM refuses (transformer_config.py __post_init__, arguments.py validate_args).
TEST_F(LowPrecision, MegatronRefusals) {
  const ModelSpec m = test::gpt_model(kLayers, kH, 16);
  auto refused = [&](const TrainingSetup& s, const std::string& message) {
    try {
      (void)run(m, s);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const LayoutError& e) {
      EXPECT_THAT(e.what(), HasSubstr(message));
    }
  };
  TrainingSetup s = fp8(Fp8Recipe::kDelayed);
  s.low_precision.first_last_layers_bf16 = true;
  refused(s, "Delayed scaling does not support first / last layer in BF16.");
  s.low_precision.fp8_recipe = Fp8Recipe::kTensorwise;
  s.low_precision.layers_at_end_in_bf16 = 5;
  refused(s, "num_layers_at_end_in_bf16 (5) must be between 0 and number of layers per pipeline stage (4).");
  TrainingSetup both = fp8(Fp8Recipe::kTensorwise);
  both.low_precision.fp4 = true;
  refused(both, "--fp4-format and --fp8-format cannot be used simultaneously");
  TrainingSetup gather = fp8(Fp8Recipe::kTensorwise);
  gather.low_precision.fp4_param_gather = true;
  refused(gather, "--fp4-param-gather must be used together with --fp4-format.");
  TrainingSetup rec = fp8(Fp8Recipe::kDelayed);
  rec.recompute.granularity = RecomputeGranularity::kSelective;
  rec.recompute.modules = kRecomputeLayernorm;
  refused(rec, "Delayed scaling does not support moe_act and layernorm recompute for fp8.");
  rec.low_precision.fp8_recipe = Fp8Recipe::kBlockwise;
  EXPECT_NO_THROW((void)run(m, rec));
}

// Where the GPU decides (TE refuses MXFP8 before Blackwell when training starts): an assumption.
TEST_F(LowPrecision, GpuRequirementsAreAssumptions) {
  const ModelSpec m = test::gpt_model(kLayers, kH, 16);
  auto said = [](const Estimate& e, const std::string& text) {
    for (const auto& a : e.assumptions)
      if (a.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(said(run(m, fp8(Fp8Recipe::kMxfp8), 90), "MXFP8 needs compute capability 10.x"));
  EXPECT_FALSE(said(run(m, fp8(Fp8Recipe::kMxfp8), 100), "MXFP8 needs"));
  EXPECT_TRUE(said(run(m, nvfp4(), 90), "NVFP4 needs compute capability 10.0"));
  TrainingSetup off = fp8(Fp8Recipe::kMxfp8);
  off.precision = Precision::kBF16;
  EXPECT_TRUE(said(run(m, off), "--fp8-recipe mxfp8 has no effect without --fp8-format"));
}

}  // namespace
}  // namespace mme
