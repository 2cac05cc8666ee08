// The Mamba-2 mixer block and the identity blocks called directly with hand-made contexts
// (hidden 4096, sequence 4096, micro-batch 1, bf16); every expected value is worked out by hand
// beside it from mamba_mixer.py's shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "block_case.hpp"
#include "hybrid.hpp"

namespace mme::plugins {
namespace {

// 128 heads of 64 (d_inner 8192), 8 groups of state 128: in_proj's outputs are
// 2 x 8192 + 2 x 8 x 128 + 128 = 18,560, conv1d's channels 8192 + 2048 = 10,240.
test::BlockCase mamba_case() {
  test::BlockCase b;
  b.layer.attention.kind = "mamba";
  b.layer.attention.num_heads = 32;
  b.layer.attention.num_query_groups = 8;
  b.layer.attention.kv_channels = 128;
  b.layer.attention.mamba_num_heads = 128;
  b.layer.attention.mamba_head_dim = 64;
  b.layer.attention.mamba_state_dim = 128;
  b.layer.attention.mamba_num_groups = 8;
  b.layer.mlp.kind = "no_mlp";
  return b;
}

std::int64_t saved_bytes(const BlockActivations& a, std::string_view name) {
  for (const auto& t : a.saved)
    if (t.name == name) return t.bytes;
  return 0;
}

TEST(MambaBlock, ParametersFollowTheMixersShapes) {
  const auto b = mamba_case();
  BlockParams p;
  MambaMixerModel().parameters(b.context(2), p);
  // input norm 4,096; in_proj 4096 x 18,560 = 76,021,760; conv1d 10,240 x (4 + 1) = 51,200;
  // dt_bias, A_log, D 3 x 128 = 384; gated norm 8,192; out_proj 8192 x 4096 = 33,554,432.
  EXPECT_EQ(sum_total(p), 109'640'064);
  // All but the input norm split over TP 2: 4,096 + 109,635,968 / 2.
  EXPECT_EQ(sum_per_rank(p), 54'822'080);
  ASSERT_EQ(p.gemm_weights.size(), 2U);
  EXPECT_EQ(p.gemm_weights.begin()[0].rows, 9'280);
  EXPECT_EQ(p.gemm_weights.begin()[1].cols, 4'096);
  EXPECT_EQ(MambaMixerModel().megatron_block(), MegatronBlock::kMambaMixer);
}

TEST(MambaBlock, KeepsTheKernelsInputTheScanOutputAndTheNormsAtTp2) {
  const auto b = mamba_case();
  BlockActivations a;
  MambaMixerModel().activations(b.context(2), a);
  // T 4096, 2048 per rank under SP, d_inner 4096 per rank.
  EXPECT_EQ(saved_bytes(a, "mamba/input_norm_input"), 2 * 2048 * 4096);
  EXPECT_EQ(saved_bytes(a, "mamba/in_proj_input"), 2 * 2048 * 4096);
  // zxbcdt: 4096 tokens x 18,560 / 2 channels x 2 B.
  EXPECT_EQ(saved_bytes(a, "mamba/zxbcdt"), 76'021'760);
  EXPECT_EQ(saved_bytes(a, "mamba/scan_output"), 2 * 4096 * 4096);
  EXPECT_EQ(saved_bytes(a, "mamba/norm_input"), 2 * 4096 * 4096);
  EXPECT_EQ(saved_bytes(a, "mamba/norm_rstd"), 4 * 4096 * 4);  // fp32, 4 groups per rank
  EXPECT_EQ(saved_bytes(a, "mamba/out_proj_input"), 2 * 4096 * 4096);
  EXPECT_EQ(sum_saved(a), 210'305'024);
  // The scan's backward: dout 33,554,432 + dzxbcdt 76,021,760 + xBC and dxBC 2 x 2 x (4096 x 4096
  // + 4096 x 2 x 4 x 128) = 83,886,080 + states and dstates in fp32 2 x 4 x 4096 x 4096 x 128 / 128
  // = 134,217,728 + C B^T 4 x 4096 x 4 x 128 = 8,388,608 + dA_cumsum and dt 2 x 4 x 4096 x 64 =
  // 2,097,152; more than in_proj's backward (76,021,760 + 2 x 33,554,432).
  EXPECT_EQ(a.transient, 338'165'760);
}

TEST(MambaBlock, ContextParallelRepeatsTheGroupsItShares) {
  auto b = mamba_case();
  b.layer.attention.mamba_num_groups = 2;
  BlockActivations a;
  MambaMixerModel().activations(b.context(1, 4), a);
  // 1024 tokens per CP rank; the kernel sees 4096 tokens of 8192 / 4 channels of z and x and 32 of
  // dt, and the 2 groups repeated to one per CP rank (group_repeat_count 2): 4096 x 2 x 128 of B
  // and C. 1024 x (2 x 8192 + 128) + 4096 x 256 = 17,956,864 elements.
  EXPECT_EQ(saved_bytes(a, "mamba/zxbcdt"), 2 * 17'956'864);
}

TEST(MambaBlock, CostsCountTheProjectionsAndTheScan) {
  const auto b = mamba_case();
  BlockCosts c;
  MambaMixerModel().costs(b.context(2), c);
  // 2 x (76,021,760 + 51,200 + 384 + 33,554,432) weights x 2048 tokens of the rank's share.
  EXPECT_DOUBLE_EQ(c.gemm_flops, 449'035'370'496.0);
  // training.py mamba_layer_flops' scan: 7 x 4096 x 4096 (d_inner per rank) x 128.
  EXPECT_DOUBLE_EQ(c.attention_flops, 15'032'385'536.0);
  ASSERT_EQ(c.gemms.size(), 2U);
  EXPECT_DOUBLE_EQ(c.gemms.begin()[0].n, 9'280.0);
  EXPECT_DOUBLE_EQ(c.gemms.begin()[1].k, 4'096.0);
}

TEST(MambaBlock, RefusesWhatMegatronAsserts) {
  auto b = mamba_case();
  EXPECT_NO_THROW(MambaMixerModel().validate(b.context(8)));
  EXPECT_THROW(MambaMixerModel().validate(b.context(16)), LayoutError);    // 8 groups over TP 16
  EXPECT_THROW(MambaMixerModel().validate(b.context(1, 3)), LayoutError);  // 128 heads over CP 3
  EXPECT_NO_THROW(MambaMixerModel().validate(b.context(1, 16)));           // 8 groups shared by 16
  // FP8: 100 heads of 64 in 4 groups of 128: 12,800 + 1,024 + 100 = 13,924 in_proj outputs.
  b.layer.attention.mamba_num_heads = 100;
  b.layer.attention.mamba_num_groups = 4;
  b.setup.precision = Precision::kFP8;
  EXPECT_THROW(MambaMixerModel().validate(b.context(1)), LayoutError);
  b.setup.transformer_engine = false;
  b.setup.precision = Precision::kBF16;
  EXPECT_THROW(MambaMixerModel().validate(b.context(1)), LayoutError);
}

TEST(MambaBlock, ChecksItsOwnFields) {
  auto b = mamba_case();
  EXPECT_EQ(b.spec_error(MambaMixerModel()), "(no error)");
  b.layer.attention.mamba_num_groups = 3;
  EXPECT_THAT(b.spec_error(MambaMixerModel()), ::testing::HasSubstr("not divisible by mamba_num_groups = 3"));
  b.layer.attention.mamba_state_dim = 0;
  EXPECT_THAT(b.spec_error(MambaMixerModel()), ::testing::HasSubstr("mamba_state_dim must be positive"));
}

TEST(IdentityBlock, HoldsNothing) {
  const auto b = mamba_case();
  for (const BlockRole role : {BlockRole::kAttention, BlockRole::kMlp}) {
    const IdentityBlockModel none(role);
    BlockParams p;
    BlockActivations a;
    BlockCosts c;
    none.parameters(b.context(2), p);
    none.activations(b.context(2), a);
    none.costs(b.context(2), c);
    EXPECT_EQ(sum_total(p), 0);
    EXPECT_EQ(sum_saved(a), 0);
    EXPECT_EQ(a.transient, 0);
    EXPECT_EQ(c.gemm_flops + c.attention_flops + c.expert_flops, 0);
    EXPECT_EQ(none.megatron_block(), MegatronBlock::kIdentity);
  }
  EXPECT_EQ(IdentityBlockModel(BlockRole::kAttention).kind(), "no_attention");
  EXPECT_EQ(IdentityBlockModel(BlockRole::kMlp).kind(), "no_mlp");
}

}  // namespace
}  // namespace mme::plugins
