// The multi-latent attention block called directly with hand-made contexts; the expected values
// are worked out by hand beside each.
#include "mla.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "block_case.hpp"

namespace mme::plugins {
namespace {

// DeepSeek-V2-Lite's attention: h 2048, 16 heads, no q LoRA, kv rank 512, 128 + 64 / 128.
test::BlockCase lite_attention() {
  test::BlockCase b;
  b.model.hidden_size = 2048;
  auto& a = b.layer.attention;
  a.kind = "mla";
  a.num_heads = 16;
  a.num_query_groups = 16;
  a.kv_lora_rank = 512;
  a.qk_head_dim = 128;
  a.qk_pos_emb_head_dim = 64;
  a.v_head_dim = 128;
  return b;
}

TEST(MlaBlock, CostsAndUpProjectionRecompute) {
  test::BlockCase b = lite_attention();
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeMlaUpProj;
  BlockCosts c;
  MlaAttentionModel().costs(b.context(1), c);
  // 16 heads x (128 + 64 + 128) = 5120, x 4096 keys x 4096 queries.
  EXPECT_DOUBLE_EQ(c.attention_flops, 85'899'345'920.0);
  // q_proj 2048 x 16 x 192 + kv_down 2048 x 576 + kv_up 512 x 16 x 256 + proj 16 x 128 x 2048
  // = 13,762,560 weights: 2 x 13,762,560 x 4096, all of it run again by mla_up_proj recompute.
  EXPECT_DOUBLE_EQ(c.gemm_flops, 112'742'891'520.0);
  EXPECT_DOUBLE_EQ(c.recompute_flops, 112'742'891'520.0);
  EXPECT_TRUE(c.collectives.empty());  // TP 1, CP 1
}

TEST(MlaBlock, ChecksItsRanks) {
  test::BlockCase b = lite_attention();
  EXPECT_EQ(b.spec_error(MlaAttentionModel()), "(no error)");
  b.layer.attention.kv_lora_rank = 0;
  EXPECT_EQ(b.spec_error(MlaAttentionModel()), "block-test: layer 1 kv_lora_rank must be positive, got 0");
  b = lite_attention();
  b.layer.attention.q_lora_rank = -3;
  EXPECT_EQ(b.spec_error(MlaAttentionModel()), "block-test: layer 1 q_lora_rank must be positive, got -3");
}

TEST(MlaBlock, RefusesLoraItsLinearsAreNotTheTargets) {
  // Megatron-Bridge's LoRA wraps linear_qkv, linear_proj, linear_fc1 and linear_fc2; MLA has
  // linear_q_proj, linear_kv_down_proj, ...: the block refuses it (the engine names no kind).
  test::BlockCase b = lite_attention();
  EXPECT_NO_THROW(MlaAttentionModel().validate(b.context(1)));
  b.setup.lora.rank = 16;
  try {
    MlaAttentionModel().validate(b.context(1));
    FAIL() << "LoRA on MLA was accepted";
  } catch (const LayoutError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("LoRA on multi-latent attention is not modelled"));
  }
  EXPECT_EQ(MlaAttentionModel().megatron_block(), MegatronBlock::kMlaSelfAttention);
}

}  // namespace
}  // namespace mme::plugins
