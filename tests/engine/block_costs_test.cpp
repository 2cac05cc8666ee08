// The decoder blocks' costs per micro-batch (LayerMemoryModel::costs), called directly with
// hand-made contexts. Every expected value is worked out by hand in the comment beside it: FLOPs
// are 2 per weight a token uses and token of the rank's TP share, the causal attention core
// heads x (d_qk + d_v) x s per query, bytes are what one rank sends.
#include <gtest/gtest.h>

#include <mme/sdk/layer_model.hpp>

#include "dense_mlp.hpp"
#include "gqa.hpp"
#include "mla.hpp"
#include "moe.hpp"

namespace mme {
namespace {

struct Block {
  ModelSpec model;
  LayerSpec layer;
  TrainingSetup setup;
  Block() {
    model.name = "costs-test";
    model.num_layers = 1;
    model.hidden_size = 4096;
    model.vocab_size = 32000;
  }
  // seq 4096, micro-batch 1: T = 4096 / cp tokens per CP rank.
  BlockContext context(std::int64_t tp, std::int64_t cp = 1, std::int64_t ep = 1) {
    setup.seq_length = 4096;
    setup.micro_batch_size = 1;
    BlockContext ctx{model, layer, setup};
    ctx.tp = tp, ctx.cp = cp, ctx.ep = ep;
    ctx.sequence_parallel = tp > 1;
    ctx.tokens = 4096 / cp;
    ctx.local_tokens = ctx.tokens / tp;
    return ctx;
  }
};

double bytes_of(const BlockCosts& c, CommGroup g, bool forward) {
  return forward ? sum_forward_bytes(c, g) : sum_backward_bytes(c, g);
}

// Llama-3-8B's attention: 32 heads of 128, 8 query groups.
Block llama_attention() {
  Block b;
  b.layer.attention.kind = "gqa";
  b.layer.attention.num_heads = 32;
  b.layer.attention.num_query_groups = 8;
  b.layer.attention.kv_channels = 128;
  return b;
}

TEST(BlockCosts, GroupedQueryAttention) {
  Block b = llama_attention();
  BlockCosts c;
  plugins::GqaAttentionModel().costs(b.context(2), c);
  // QKV 4096 x (4096 + 2 x 1024) = 25,165,824 and proj 4096 x 4096 = 16,777,216 weights:
  // 2 x 41,943,040 x 4096 / 2 tokens per rank.
  EXPECT_DOUBLE_EQ(c.gemm_flops, 171'798'691'840.0);
  // 8192 (32 x 2 x 128) x 4096 keys x 4096 queries / TP 2.
  EXPECT_DOUBLE_EQ(c.attention_flops, 68'719'476'736.0);
  EXPECT_EQ(c.expert_flops, 0);
  // bf16: 2 B x 41,943,040 / 2 (TP), plus the replicated 4096-element input norm.
  EXPECT_DOUBLE_EQ(c.weight_bytes, 41'951'232.0);
  // Two ring passes of [4096, 4096] bf16 (32 MiB) over TP 2, half of it each: 32 MiB each way.
  EXPECT_DOUBLE_EQ(bytes_of(c, CommGroup::kTensor, true), 33'554'432.0);
  EXPECT_DOUBLE_EQ(bytes_of(c, CommGroup::kTensor, false), 33'554'432.0);
  EXPECT_EQ(c.recompute_flops, 0);  // no recompute asked for
}

TEST(BlockCosts, ContextParallelRingAndCoreAttentionRecompute) {
  Block b = llama_attention();
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeCoreAttn;
  BlockCosts c;
  plugins::GqaAttentionModel().costs(b.context(2, 2), c);
  // 2048 queries per CP rank: 8192 x 4096 x 2048 / 2, run once more by core_attn recompute.
  EXPECT_DOUBLE_EQ(c.attention_flops, 34'359'738'368.0);
  EXPECT_DOUBLE_EQ(c.recompute_flops, 34'359'738'368.0);
  // K and V of 8 groups x 128 (2048 per token, 1024 per TP rank), 2048 tokens, bf16, passed
  // on once (CP - 1 = 1) forward and twice backward.
  EXPECT_DOUBLE_EQ(bytes_of(c, CommGroup::kContext, true), 4'194'304.0);
  EXPECT_DOUBLE_EQ(bytes_of(c, CommGroup::kContext, false), 8'388'608.0);
}

TEST(BlockCosts, DenseMlpAndItsRecompute) {
  Block b;
  b.layer.mlp.kind = "dense";
  b.layer.mlp.ffn_hidden_size = 14336;
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeMlp;
  BlockCosts c;
  plugins::DenseMlpModel().costs(b.context(2), c);
  // fc1 4096 x 28672 (gated) = 117,440,512 and fc2 14336 x 4096 = 58,720,256 weights:
  // 2 x 176,160,768 x 2048.
  EXPECT_DOUBLE_EQ(c.gemm_flops, 721'554'505'728.0);
  EXPECT_DOUBLE_EQ(c.recompute_flops, 721'554'505'728.0);
  EXPECT_EQ(c.attention_flops, 0);
}

// DeepSeek-V2-Lite's MoE: h 2048, 64 experts of 1408 (top 6), 2 shared experts (2816).
Block lite_moe() {
  Block b;
  b.model.hidden_size = 2048;
  b.layer.mlp.kind = "moe";
  b.layer.mlp.num_experts = 64;
  b.layer.mlp.top_k = 6;
  b.layer.mlp.expert_ffn_hidden_size = 1408;
  b.layer.mlp.shared_expert_ffn_hidden_size = 2816;
  return b;
}

TEST(BlockCosts, MixtureOfExperts) {
  Block b = lite_moe();
  BlockCosts c;
  plugins::MoeModel().costs(b.context(1, 1, 8), c);
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

TEST(BlockCosts, MoeRecomputeModules) {
  Block b = lite_moe();
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeSharedExperts;
  BlockCosts shared;
  plugins::MoeModel().costs(b.context(1, 1, 8), shared);
  EXPECT_DOUBLE_EQ(shared.recompute_flops, 141'733'920'768.0);  // 2 x 17,301,504 x 4096
  b.setup.recompute.modules = kRecomputeMoe | kRecomputeSharedExperts;
  BlockCosts whole;
  plugins::MoeModel().costs(b.context(1, 1, 8), whole);
  EXPECT_DOUBLE_EQ(whole.recompute_flops, 568'009'424'896.0);  // router, shared and routed experts
}

TEST(BlockCosts, MultiLatentAttention) {
  Block b;
  b.model.hidden_size = 2048;
  auto& a = b.layer.attention;
  a.kind = "mla";
  a.num_heads = 16;
  a.num_query_groups = 16;
  a.kv_lora_rank = 512;
  a.qk_head_dim = 128;
  a.qk_pos_emb_head_dim = 64;
  a.v_head_dim = 128;
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeMlaUpProj;
  BlockCosts c;
  plugins::MlaAttentionModel().costs(b.context(1), c);
  // 16 heads x (128 + 64 + 128) = 5120, x 4096 keys x 4096 queries.
  EXPECT_DOUBLE_EQ(c.attention_flops, 85'899'345'920.0);
  // q_proj 2048 x 16 x 192 + kv_down 2048 x 576 + kv_up 512 x 16 x 256 + proj 16 x 128 x 2048
  // = 13,762,560 weights: 2 x 13,762,560 x 4096, all of it run again by mla_up_proj recompute.
  EXPECT_DOUBLE_EQ(c.gemm_flops, 112'742'891'520.0);
  EXPECT_DOUBLE_EQ(c.recompute_flops, 112'742'891'520.0);
  EXPECT_TRUE(c.collectives.empty());  // TP 1, CP 1
}

}  // namespace
}  // namespace mme
