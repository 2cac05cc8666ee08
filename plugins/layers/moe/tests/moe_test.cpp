// The MoE block called directly with hand-made contexts; the expected values are worked out by
// hand beside each (FLOPs: 2 per weight a token uses and token; bytes: what one rank sends).
#include "moe.hpp"

#include <gtest/gtest.h>

#include "block_case.hpp"

namespace mme::plugins {
namespace {

using test::bytes_of;

// DeepSeek-V2-Lite's MoE: h 2048, 64 experts of 1408 (top 6), 2 shared experts (2816).
test::BlockCase lite_moe() {
  test::BlockCase b;
  b.model.hidden_size = 2048;
  b.model.gated_linear_unit = true;
  b.layer.mlp.kind = "moe";
  b.layer.mlp.num_experts = 64;
  b.layer.mlp.top_k = 6;
  b.layer.mlp.expert_ffn_hidden_size = 1408;
  b.layer.mlp.shared_expert_ffn_hidden_size = 2816;
  return b;
}

TEST(MoeBlock, Costs) {
  test::BlockCase b = lite_moe();
  BlockCosts c;
  MoeModel().costs(b.context(1, 1, 8), c);
  // Router 64 x 2048 = 131,072 and shared experts 2048 x 5632 + 2816 x 2048 = 17,301,504:
  // 2 x 17,432,576 x 4096.
  EXPECT_DOUBLE_EQ(c.gemm_flops, 142'807'662'592.0);
  // An expert: 2048 x 2816 + 1408 x 2048 = 8,650,752; six per token: 2 x 51,904,512 x 4096.
  EXPECT_DOUBLE_EQ(c.expert_flops, 425'201'762'304.0);
  // 64 experts x 8,650,752 in bf16, over EP 8.
  EXPECT_DOUBLE_EQ(c.expert_weight_bytes, 138'412'032.0);
  // Each token's six copies of [2048] bf16 (100,663,296 B) dispatched and combined: 7/8 of
  // them leave the rank, twice per pass.
  EXPECT_DOUBLE_EQ(bytes_of(c, CommGroup::kExpert, true), 176'160'768.0);
  EXPECT_DOUBLE_EQ(bytes_of(c, CommGroup::kExpert, false), 176'160'768.0);
  EXPECT_EQ(bytes_of(c, CommGroup::kExpertTensor, true), 0);  // ETP 1
}

TEST(MoeBlock, RecomputeModules) {
  test::BlockCase b = lite_moe();
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeSharedExperts;
  BlockCosts shared;
  MoeModel().costs(b.context(1, 1, 8), shared);
  EXPECT_DOUBLE_EQ(shared.recompute_flops, 141'733'920'768.0);  // 2 x 17,301,504 x 4096
  b.setup.recompute.modules = kRecomputeMoe | kRecomputeSharedExperts;
  BlockCosts whole;
  MoeModel().costs(b.context(1, 1, 8), whole);
  EXPECT_DOUBLE_EQ(whole.recompute_flops, 568'009'424'896.0);  // router, shared and routed experts
}

std::int64_t saved_bytes(const BlockActivations& a, std::string_view name) {
  for (const auto& t : a.saved)
    if (t.name == name) return t.bytes;
  return 0;
}

TEST(MoeBlock, QuickGegluExpertsFuseWithBiasesAndKeepTheirClampedInputsUnfused) {
  // GPT-OSS's experts: a gated quick_gelu clamped at 7 with offset 1, biases on every linear.
  test::BlockCase b = lite_moe();
  b.layer.mlp.shared_expert_ffn_hidden_size = 0;
  b.model.activation = "quick_gelu";
  b.model.add_bias_linear = true;
  b.model.activation_clamp_value = 7;
  b.model.glu_linear_offset = 1;
  BlockActivations fused;
  MoeModel().activations(b.context(1, 1, 8), fused);
  // weighted_bias_quick_geglu_impl keeps fc1's output (with the bias and the probabilities), as
  // the SwiGLU kernel does: nothing of glu()'s own.
  const std::int64_t fc1 = saved_bytes(fused, "moe/expert_fc1_output");  // [N, 2 x 1408] bf16
  ASSERT_GT(fc1, 0);
  EXPECT_EQ(saved_bytes(fused, "moe/expert_activation_unscaled"), 0);
  EXPECT_EQ(saved_bytes(fused, "moe/expert_activation_glu_act"), 0);
  EXPECT_EQ(saved_bytes(fused, "moe/expert_activation_glu_clamped"), 0);
  // --no-bias-gelu-fusion: experts.py bias_act_func runs glu() and the probabilities' product in
  // torch: the unscaled activation and act(x_glu), each [N, 1408] (half of fc1's output), and the
  // clamped x_glu and the offset x_linear.
  b.setup.bias_gelu_fusion = false;
  BlockActivations unfused;
  MoeModel().activations(b.context(1, 1, 8), unfused);
  EXPECT_EQ(saved_bytes(unfused, "moe/expert_activation_unscaled"), fc1 / 2);
  EXPECT_EQ(saved_bytes(unfused, "moe/expert_activation_glu_act"), fc1 / 2);
  EXPECT_EQ(saved_bytes(unfused, "moe/expert_activation_glu_clamped"), fc1);
  // Without biases arguments.py turns the gelu fusion off: the same as unfused.
  b.setup.bias_gelu_fusion = true;
  b.model.add_bias_linear = false;
  BlockActivations no_bias;
  MoeModel().activations(b.context(1, 1, 8), no_bias);
  EXPECT_EQ(saved_bytes(no_bias, "moe/expert_activation_glu_clamped"), fc1);
}

TEST(MoeBlock, SquaredReluExpertsKeepTheUnscaledActivationUnlessFused) {
  // Nemotron 3 Nano's experts: squared ReLU, not gated. 64 experts of 1408, top 6, EP 8: each rank
  // gets N = 4096 x 6 = 24,576 token copies (balanced routing).
  test::BlockCase b = lite_moe();
  b.model.gated_linear_unit = false;
  b.model.activation = "squared_relu";
  BlockActivations torch_ops;
  MoeModel().activations(b.context(1, 1, 8), torch_ops);
  // relu keeps its output, pow the same tensor ([N, 1408] bf16), and the probabilities' product
  // the unscaled activation, as large.
  const std::int64_t relu = 2 * 24'576 * 1408;
  EXPECT_EQ(saved_bytes(torch_ops, "moe/expert_fc1_output"), relu);
  EXPECT_EQ(saved_bytes(torch_ops, "moe/expert_activation_unscaled"), relu);
  // fused_weighted_squared_relu.py WeightedSquaredReLUFunction keeps its input and the weights.
  b.setup.fused_weighted_squared_relu = true;
  BlockActivations fused;
  MoeModel().activations(b.context(1, 1, 8), fused);
  EXPECT_EQ(saved_bytes(fused, "moe/expert_fc1_output"), relu);
  EXPECT_EQ(saved_bytes(fused, "moe/expert_activation_unscaled"), 0);
  EXPECT_EQ(sum_saved(torch_ops) - sum_saved(fused), relu);
  // It asserts the experts have no bias.
  b.model.add_bias_linear = true;
  EXPECT_THROW(MoeModel().validate(b.context(1, 1, 8)), LayoutError);
}

TEST(MoeBlock, ChecksItsExpertCounts) {
  test::BlockCase b = lite_moe();
  EXPECT_EQ(b.spec_error(MoeModel()), "(no error)");
  b.layer.mlp.top_k = 65;
  EXPECT_EQ(b.spec_error(MoeModel()), "block-test: layer 1: moe_router_topk = 65 exceeds num_experts = 64");
  b = lite_moe();
  b.layer.mlp.expert_ffn_hidden_size = 0;
  EXPECT_EQ(b.spec_error(MoeModel()), "block-test: layer 1 moe_ffn_hidden_size must be positive, got 0");
  EXPECT_EQ(MoeModel().megatron_block(), MegatronBlock::kMoeLayer);
}

}  // namespace
}  // namespace mme::plugins
