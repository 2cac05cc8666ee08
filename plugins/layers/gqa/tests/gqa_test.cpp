// The GQA block (MHA, GQA, MQA) called directly with hand-made contexts. Every expected value is
// worked out by hand in the comment beside it: FLOPs are 2 per weight a token uses and token of
// the rank's TP share, the causal attention core heads x (d_qk + d_v) x s per query, bytes are
// what one rank sends.
#include "gqa.hpp"

#include <gtest/gtest.h>

#include "block_case.hpp"

namespace mme::plugins {
namespace {

using test::bytes_of;

// Llama-3-8B's attention: 32 heads of 128, 8 query groups.
test::BlockCase llama_attention() {
  test::BlockCase b;
  b.layer.attention.kind = "gqa";
  b.layer.attention.num_heads = 32;
  b.layer.attention.num_query_groups = 8;
  b.layer.attention.kv_channels = 128;
  return b;
}

TEST(GqaBlock, Costs) {
  test::BlockCase b = llama_attention();
  BlockCosts c;
  GqaAttentionModel().costs(b.context(2), c);
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

TEST(GqaBlock, ContextParallelRingAndCoreAttentionRecompute) {
  test::BlockCase b = llama_attention();
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeCoreAttn;
  BlockCosts c;
  GqaAttentionModel().costs(b.context(2, 2), c);
  // 2048 queries per CP rank: 8192 x 4096 x 2048 / 2, run once more by core_attn recompute.
  EXPECT_DOUBLE_EQ(c.attention_flops, 34'359'738'368.0);
  EXPECT_DOUBLE_EQ(c.recompute_flops, 34'359'738'368.0);
  // K and V of 8 groups x 128 (2048 per token, 1024 per TP rank), 2048 tokens, bf16, passed
  // on once (CP - 1 = 1) forward and twice backward.
  EXPECT_DOUBLE_EQ(bytes_of(c, CommGroup::kContext, true), 4'194'304.0);
  EXPECT_DOUBLE_EQ(bytes_of(c, CommGroup::kContext, false), 8'388'608.0);
  // The ring's merges on the last CP rank (context_parallel.py AttnFuncWithCPAndKVP2P), bf16:
  // Q and O, 16 heads x 256 = 4096 elements per token per TP rank, 2048 tokens: the output's
  // first-step write (2 accesses) and one add (3), dq the same: 5 x 2 B x 8,388,608 = 80 MiB;
  // dK and dV, 1024 elements per token: half copied (1), then added whole (3): 4 x 2 B x
  // 2,097,152 = 16 MiB.
  EXPECT_DOUBLE_EQ(c.elementwise_bytes, 100'663'296.0);
  EXPECT_EQ(c.elementwise_saved_bytes, 0);  // kernels of their own, not passes over saved tensors
  // At CP 4 (1024 tokens each): Q and O 2 + 3 x 3 = 11 accesses of 4,194,304 elements, dK and dV
  // 1 + 1.5 x 2 + 3 = 7 of 1,048,576: 2 B x (46,137,344 + 7,340,032).
  BlockCosts c4;
  GqaAttentionModel().costs(b.context(2, 4), c4);
  EXPECT_DOUBLE_EQ(c4.elementwise_bytes, 106'954'752.0);
  // No merges under the other exchanges: all-gather (AttnFuncWithCPAndKVAllGather) copies its two
  // half-chunks' outputs into place (not counted), a2a runs one attention call on whole heads.
  for (const CpCommType t : {CpCommType::kAllGather, CpCommType::kA2A}) {
    b.setup.cp_comm_type = t;
    BlockCosts other;
    GqaAttentionModel().costs(b.context(2, 2), other);
    EXPECT_EQ(other.elementwise_bytes, 0);
  }
}

// Transformer Engine's FlashAttention (backends.py FlashAttention.forward) returns flash-attn's
// [b, s, n, d] output, which flash-attn saves, as a contiguous [s, b, n * d] copy
// (`output.view(b, s, -1).transpose(0, 1)`, then `.contiguous()`), the tensor linear_proj saves.
// With one sequence the transpose is a view that is contiguous already (no copy); cuDNN's
// FusedAttention works on [s, b, n, d] as it is.
TEST(GqaBlock, FlashAttnKeepsASecondOutputForSeveralSequences) {
  test::BlockCase b = llama_attention();
  auto saved = [&](AttentionBackend backend, std::int64_t sequences, std::int64_t linear_input_bytes = 2) {
    b.setup.attention_backend = backend;
    b.setup.micro_batch_size = sequences;
    BlockContext ctx = b.context(2);
    ctx.tokens *= sequences;
    ctx.local_tokens *= sequences;
    ctx.linear_input_bytes = linear_input_bytes;
    BlockActivations a;
    GqaAttentionModel().activations(ctx, a);
    std::int64_t sum = 0;
    for (const auto& t : a.saved) sum += t.bytes;
    return sum;
  };
  // Two sequences of 4096 tokens, 16 heads of 128 per TP rank, bf16: 8192 x 2048 x 2 B = 32 MiB.
  EXPECT_EQ(saved(AttentionBackend::kFlash, 2) - saved(AttentionBackend::kFused, 2), 33'554'432);
  EXPECT_EQ(saved(AttentionBackend::kFlash, 1), saved(AttentionBackend::kFused, 1));
  // FP8 linear_proj keeps its own 1-byte copy: the bf16 [s, b, n * d] one is not kept.
  EXPECT_EQ(saved(AttentionBackend::kFlash, 2, 1), saved(AttentionBackend::kFused, 2, 1));
  // core_attn recompute: flash-attn keeps nothing; the checkpoint's output is linear_proj's input.
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeCoreAttn;
  EXPECT_EQ(saved(AttentionBackend::kFlash, 2), saved(AttentionBackend::kFused, 2));
}

// Qwen3-235B-A22B's attention: 64 heads of 128, 4 query groups. Megatron-LM takes TP 8 (a
// multiple of the groups, transformer_config.py): each rank keeps one group's K and V and its 8
// query heads (attention.py, SelfAttention), all-gathering linear_qkv's output to take its
// group's slice (get_query_key_value_tensors).
TEST(GqaBlock, MoreTensorParallelRanksThanQueryGroupsKeepOneGroupEach) {
  test::BlockCase b = llama_attention();
  b.layer.attention.num_heads = 64;
  b.layer.attention.num_query_groups = 4;
  b.setup.attention_backend = AttentionBackend::kFused;
  auto acts = [&](std::int64_t tp) {
    BlockActivations a;
    GqaAttentionModel().activations(b.context(tp), a);
    return a;
  };
  auto saved = [](const BlockActivations& a, const std::string& name) {
    for (const auto& t : a.saved)
      if (t.name == name) return t.bytes;
    return std::int64_t{-1};
  };
  const BlockActivations tp4 = acts(4), tp8 = acts(8);
  // Q: 4096 tokens x 16 (TP 4) or 8 (TP 8) heads x 128 x 2 B.
  EXPECT_EQ(saved(tp4, "attention/q"), 16'777'216);
  EXPECT_EQ(saved(tp8, "attention/q"), 8'388'608);
  // K and V: one group on every rank either way: 2 x 4096 x 128 x 2 B.
  EXPECT_EQ(saved(tp4, "attention/kv"), 2'097'152);
  EXPECT_EQ(saved(tp8, "attention/kv"), 2'097'152);
  // Backward at TP 8, bf16: dQ, dK, dV (8 + 2 heads) 10,485,760; the block input's gradient and
  // the SP-gathered linear_qkv input, [4096, 4096] each, 33,554,432 x 2; the all-gathered
  // [4096, (64 + 8) x 128] gradient 75,497,472 beside its group's [4096, (16 + 2) x 128]
  // 18,874,368.
  EXPECT_EQ(tp8.transient, 10'485'760 + 2 * 33'554'432 + 75'497'472 + 18'874'368);
  // TP 4 (= the groups) has no gathered gradient: 2 B x 4096 x (16 + 2) x 128 + the two above.
  EXPECT_EQ(tp4.transient, 18'874'368 + 2 * 33'554'432);

  // Step time: the all-gather of linear_qkv's output (forward) and the reduce-scatter of its
  // gradient (backward), 75,497,472 B over a ring of 8 (7/8 of it sent), beside the block's two
  // SP passes of [4096, 4096] bf16 (2 x 7/8 x 33,554,432).
  BlockCosts c;
  GqaAttentionModel().costs(b.context(8), c);
  EXPECT_DOUBLE_EQ(bytes_of(c, CommGroup::kTensor, true), 66'060'288.0 + 58'720'256.0);
  EXPECT_DOUBLE_EQ(bytes_of(c, CommGroup::kTensor, false), 66'060'288.0 + 58'720'256.0);

  // Megatron's rule: the groups a divisor or a multiple of TP, and TP dividing the heads.
  b.layer.attention.num_heads = 48;
  b.layer.attention.num_query_groups = 6;
  auto layout_error = [&](std::int64_t tp) {
    try {
      GqaAttentionModel().validate(b.context(tp));
    } catch (const LayoutError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(layout_error(12), "(no error)");
  EXPECT_EQ(layout_error(3), "(no error)");
  EXPECT_EQ(layout_error(4),
            "6 query groups (KV heads) are neither a multiple nor a divisor of --tp 4 (Megatron-LM's rule, "
            "transformer_config.py); --tp must be one of 1, 2, 3, 6, 12, 24 or 48");
  EXPECT_EQ(layout_error(5),
            "48 attention heads are not divisible by --tp 5; --tp must be one of 1, 2, 3, 6, 12, 24 or 48");
  // A list of more than 12 sizes keeps the first 11 and the largest: 5040 heads have 60 divisors.
  b.layer.attention.num_heads = b.layer.attention.num_query_groups = 5040;
  b.layer.attention.kv_channels = 1;
  EXPECT_EQ(layout_error(11),
            "5040 attention heads are not divisible by --tp 11; --tp must be one of 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, "
            "..., 5040");
}

TEST(GqaBlock, SlidingWindowCutsTheCoreAndSinksAreParameters) {
  test::BlockCase b = llama_attention();
  b.layer.attention.window = 127;  // GPT-OSS's sliding layers: 128 tokens with the query's own
  b.layer.attention.softmax_type = SoftmaxType::kLearnable;
  BlockCosts c;
  GqaAttentionModel().costs(b.context(2), c);
  // A block of 128 queries spans ceil((127 + 128) / 128) = 2 tiles of 128 keys: 256 keys per
  // query against 4096 / 2 causal ones: 8192 x 512 x 4096 / TP 2.
  EXPECT_DOUBLE_EQ(c.attention_flops, 8'589'934'592.0);
  // A window wider than the causal average changes nothing: 8192 x 4096 x 4096 / 2.
  b.layer.attention.window = 4000;
  BlockCosts wide;
  GqaAttentionModel().costs(b.context(2), wide);
  EXPECT_DOUBLE_EQ(wide.attention_flops, 68'719'476'736.0);
  // The learnable softmax's offsets: one per head, split over TP (TE softmax_offset).
  BlockParams p;
  GqaAttentionModel().parameters(b.context(2), p);
  bool found = false;
  for (const auto& t : p.terms)
    if (t.name == "softmax_offset") {
      found = true;
      EXPECT_EQ(t.total, 32);
      EXPECT_EQ(t.per_rank, 16);
    }
  EXPECT_TRUE(found);
  // The flash/fused kernels keep the same tensors whatever the window.
  BlockActivations windowed, full;
  GqaAttentionModel().activations(b.context(2), windowed);
  b.layer.attention.window = 0;
  GqaAttentionModel().activations(b.context(2), full);
  EXPECT_EQ(windowed.saved.size(), full.saved.size());
  for (std::size_t i = 0; i < full.saved.size() && i < windowed.saved.size(); ++i)
    EXPECT_EQ(windowed.saved[i].bytes, full.saved[i].bytes) << full.saved[i].name;
}

TEST(GqaBlock, ContextParallelBeyondA2aHasNoBackendForSinks) {
  test::BlockCase b = llama_attention();
  b.layer.attention.window = 127;
  b.layer.attention.softmax_type = SoftmaxType::kLearnable;
  b.setup.attention_backend = AttentionBackend::kUnfused;  // what resolve_attention leaves (step_and_bound_test)
  try {
    GqaAttentionModel().validate(b.context(2, 2));
    ADD_FAILURE() << "no error";
  } catch (const LayoutError& e) {
    EXPECT_NE(std::string(e.what()).find("softmax needs --cp-comm-type a2a"), std::string::npos) << e.what();
  }
}

TEST(GqaBlock, ChecksItsOwnFields) {
  test::BlockCase b = llama_attention();
  EXPECT_EQ(b.spec_error(GqaAttentionModel()), "(no error)");
  b.layer.attention.kv_channels = 0;
  EXPECT_EQ(b.spec_error(GqaAttentionModel()), "block-test: layer 1 kv_channels must be positive, got 0");
}

TEST(GqaBlock, ModelsMegatronSelfAttention) {
  // What the Megatron-LM flag export asks (megatron_export.cpp): --num-query-groups, --kv-channels.
  EXPECT_EQ(GqaAttentionModel().megatron_block(), MegatronBlock::kSelfAttention);
}

}  // namespace
}  // namespace mme::plugins
