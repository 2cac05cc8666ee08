// The dense MLP block called directly with hand-made contexts; the expected values are worked
// out by hand beside each (FLOPs: 2 per weight and token of the rank's share).
#include "dense_mlp.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "block_case.hpp"

namespace mme::plugins {
namespace {

TEST(DenseMlpBlock, CostsAndTheirRecompute) {
  test::BlockCase b;
  b.model.gated_linear_unit = true;
  b.layer.mlp.kind = "dense";
  b.layer.mlp.ffn_hidden_size = 14336;
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeMlp;
  BlockCosts c;
  DenseMlpModel().costs(b.context(2), c);
  // fc1 4096 x 28672 (gated) = 117,440,512 and fc2 14336 x 4096 = 58,720,256 weights:
  // 2 x 176,160,768 x 2048.
  EXPECT_DOUBLE_EQ(c.gemm_flops, 721'554'505'728.0);
  EXPECT_DOUBLE_EQ(c.recompute_flops, 721'554'505'728.0);
  EXPECT_EQ(c.attention_flops, 0);
}

// A saved term's bytes, 0 when the block reports none of that name.
std::int64_t saved_bytes(const BlockActivations& a, std::string_view name) {
  for (const auto& t : a.saved)
    if (t.name == name) return t.bytes;
  return 0;
}

TEST(DenseMlpBlock, QuickGegluIsRefusedFusedAndKeepsItsClampedInputsUnfused) {
  test::BlockCase b;
  b.model.gated_linear_unit = true;
  b.model.activation = "quick_gelu";
  b.model.add_bias_linear = true;
  b.model.activation_clamp_value = 7;
  b.model.glu_linear_offset = 1;
  b.layer.mlp.kind = "dense";
  b.layer.mlp.ffn_hidden_size = 14336;
  // mlp.py MLP.forward: with bias_activation_fusion only gelu and SwiGLU are fused; it raises.
  EXPECT_THROW(DenseMlpModel().validate(b.context(2)), LayoutError);
  b.setup.bias_gelu_fusion = false;
  EXPECT_NO_THROW(DenseMlpModel().validate(b.context(2)));
  BlockActivations a;
  DenseMlpModel().activations(b.context(2), a);
  // glu(): act(x_glu) [4096, 14336 / 2] bf16 = 58,720,256 B for the product, and the clamped
  // x_glu and the offset x_linear (x_linear's clamp is consumed by the offset's add), as large.
  EXPECT_EQ(saved_bytes(a, "mlp/activation_glu_act"), 58'720'256);
  EXPECT_EQ(saved_bytes(a, "mlp/activation_glu_clamped"), 2 * 58'720'256);
  // An offset alone: only x_linear + offset is new.
  b.model.activation_clamp_value = 0;
  BlockActivations offset_only;
  DenseMlpModel().activations(b.context(2), offset_only);
  EXPECT_EQ(saved_bytes(offset_only, "mlp/activation_glu_clamped"), 58'720'256);
}

TEST(DenseMlpBlock, ChecksItsOwnFields) {
  test::BlockCase b;
  b.layer.mlp.kind = "dense";
  b.layer.mlp.ffn_hidden_size = 14336;
  EXPECT_EQ(b.spec_error(DenseMlpModel()), "(no error)");
  b.layer.mlp.ffn_hidden_size = std::int64_t{1} << 40;
  EXPECT_THAT(b.spec_error(DenseMlpModel()),
              ::testing::HasSubstr("block-test: layer 1 ffn_hidden_size = 1099511627776 is larger than"));
  EXPECT_EQ(DenseMlpModel().megatron_block(), MegatronBlock::kMlp);
}

}  // namespace
}  // namespace mme::plugins
