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
