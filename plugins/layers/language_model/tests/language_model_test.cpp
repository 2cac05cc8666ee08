// The blocks around the decoder layers, called directly with hand-made contexts. Expected values
// are worked out by hand from the Megatron-LM code each term names (language_model.cpp).
// The model: h = 1024, V = 50000 padded to a multiple of 128 x TP = 512 -> 50176, so V/TP = 12544
// at TP 4; seq 2048 x micro-batch 2 = 4096 tokens per CP rank, 1024 per rank under SP.
#include "language_model.hpp"

#include <tuple>

#include <gtest/gtest.h>

#include <mme/sdk/model_spec.hpp>
#include <mme/sdk/training_setup.hpp>

namespace mme::plugins {
namespace {

struct Case {
  ModelSpec model;
  TrainingSetup setup;
  Case() {
    model.name = "lm-test";
    model.num_layers = 1;
    model.hidden_size = 1024;
    model.vocab_size = 50000;
    model.max_position_embeddings = 2048;
    model.layers.resize(1);
    setup.seq_length = 2048;
    setup.micro_batch_size = 2;
  }
  BlockContext context() const {
    BlockContext ctx{model, model.layers[0], setup};
    ctx.tp = 4;
    ctx.sequence_parallel = true;
    ctx.tokens = 4096;
    ctx.local_tokens = 1024;
    ctx.vocab_local = 12544;
    ctx.pp = 2;
    return ctx;
  }
};

const ParamTerm* find(const BlockParams& p, std::string_view name) {
  for (const auto& t : p.terms)
    if (t.name == name) return &t;
  return nullptr;
}

std::int64_t saved(const BlockActivations& a, std::string_view name) {
  for (const auto& t : a.saved)
    if (t.name == name) return t.bytes;
  return -1;
}

TEST(EmbeddingBlock, WordAndPositionEmbeddings) {
  Case c;
  c.model.position_embedding = PositionEmbedding::kLearnedAbsolute;
  BlockParams p;
  EmbeddingModel().parameters(c.context(), p);
  ASSERT_EQ(p.terms.size(), 2u);
  const ParamTerm* word = find(p, "word_embeddings");
  ASSERT_NE(word, nullptr);
  EXPECT_EQ(word->total, 51'200'000);     // 1024 x 50000, the checkpoint's rows
  EXPECT_EQ(word->per_rank, 12'845'056);  // 1024 x 12544, padded and split
  EXPECT_EQ(word->shard, ShardClass::kTensorParallel);
  const ParamTerm* pos = find(p, "position_embeddings");
  ASSERT_NE(pos, nullptr);
  EXPECT_EQ(pos->per_rank, 2'097'152);  // 2048 x 1024, replicated
  EXPECT_EQ(pos->group, ParamGroup::kPositionEmbedding);
}

TEST(EmbeddingBlock, TokenIdsAndDropoutMask) {
  Case c;
  BlockContext ctx = c.context();
  BlockActivations a;
  EmbeddingModel().activations(ctx, a);
  EXPECT_EQ(saved(a, "embedding/token_ids"), 32'768);  // 8 B x 4096
  EXPECT_EQ(saved(a, "embedding/dropout_mask"), -1);   // no dropout, no mask
  ctx.hidden_dropout = 0.1;
  BlockActivations b;
  EmbeddingModel().activations(ctx, b);
  EXPECT_EQ(saved(b, "embedding/dropout_mask"), 1'048'576);  // 1 B x 1024 local tokens x 1024
}

// The dataloader's attention mask (--create-attention-mask-in-dataloader, core/utils.py
// get_batch_on_this_tp_rank): bool [b, 1, s/CP, s] = 2 x 2048 x 2048 = 8,388,608 bytes per
// micro-batch (4096 tokens x 2048), kept only by the recompute checkpoints (full recompute with a
// recomputed layer, or core_attn), on the first stage (the embedding's chunk) and the last (the
// loss's, when it is another stage: at PP 1 the embedding counts the one mask).
TEST(EmbeddingBlock, TheDataloaderAttentionMaskIsKeptByRecomputeCheckpoints) {
  Case c;
  auto masks = [&](std::int64_t pp) {
    BlockContext ctx = c.context();
    ctx.pp = pp;
    BlockActivations e, h;
    EmbeddingModel().activations(ctx, e);
    OutputHeadModel().activations(ctx, h);
    return std::pair{saved(e, "embedding/dataloader_attention_mask"), saved(h, "dataloader_attention_mask")};
  };
  // Off (mme's default), or on without recompute: nothing kept.
  EXPECT_EQ(masks(2), std::pair(std::int64_t{-1}, std::int64_t{-1}));
  c.setup.create_attention_mask = true;
  EXPECT_EQ(masks(2), std::pair(std::int64_t{-1}, std::int64_t{-1}));
  c.setup.recompute.granularity = RecomputeGranularity::kSelective;
  c.setup.recompute.modules = kRecomputeMlp;  // the MLP's checkpoint does not take the mask
  EXPECT_EQ(masks(2), std::pair(std::int64_t{-1}, std::int64_t{-1}));
  c.setup.recompute.modules = kRecomputeCoreAttn;
  EXPECT_EQ(masks(2), std::pair(std::int64_t{8'388'608}, std::int64_t{8'388'608}));
  EXPECT_EQ(masks(1), std::pair(std::int64_t{8'388'608}, std::int64_t{-1}));
  c.setup.recompute.granularity = RecomputeGranularity::kFull;
  c.setup.recompute.method = RecomputeMethod::kBlock;
  c.setup.recompute.num_layers = 0;  // "block 0": no layer recomputed, no checkpoint
  EXPECT_EQ(masks(2), std::pair(std::int64_t{-1}, std::int64_t{-1}));
  c.setup.recompute.num_layers = 1;
  EXPECT_EQ(masks(2), std::pair(std::int64_t{8'388'608}, std::int64_t{8'388'608}));
  // With MTP the head's terms count once per loss: the last stage's mask is left out there.
  c.model.mtp_num_layers = 1;
  EXPECT_EQ(masks(2), std::pair(std::int64_t{8'388'608}, std::int64_t{-1}));
}

// The lookup's backward (F.embedding, tensor_parallel/layers.py VocabParallelEmbedding) builds a
// dense weight gradient of the rank's table, [V/TP, h] in the output's dtype, which the DDP hook
// adds into main_grad and drops: 2 B x 12544 x 1024 = 25,690,112 bytes. Under LoRA the table is
// frozen: none.
TEST(EmbeddingBlock, TheLookupsDenseWeightGradientInItsBackward) {
  Case c;
  BlockActivations a;
  EmbeddingModel().activations(c.context(), a);
  EXPECT_EQ(a.transient, 25'690'112);
  c.setup.lora.rank = 16;
  BlockActivations frozen;
  EmbeddingModel().activations(c.context(), frozen);
  EXPECT_EQ(frozen.transient, 0);
}

TEST(EmbeddingBlock, ReductionOverTensorParallelRanks) {
  Case c;
  BlockContext ctx = c.context();
  BlockCosts k;
  EmbeddingModel().costs(ctx, k);
  EXPECT_EQ(k.gemm_flops, 0);
  // [4096, 1024] bf16 = 8 MiB reduce-scattered: 3/4 of it leaves the rank; its backward all-gather the same.
  ASSERT_EQ(k.collectives.size(), 1u);
  EXPECT_DOUBLE_EQ(k.collectives[0].forward_bytes, 6'291'456);
  EXPECT_DOUBLE_EQ(k.collectives[0].backward_bytes, 6'291'456);
  ctx.sequence_parallel = false;  // all-reduce forward (twice the ring), identity backward
  BlockCosts n;
  EmbeddingModel().costs(ctx, n);
  EXPECT_DOUBLE_EQ(n.collectives[0].forward_bytes, 12'582'912);
  EXPECT_DOUBLE_EQ(n.collectives[0].backward_bytes, 0);
}

TEST(OutputHeadBlock, TiedOutputLayerOnlyOnALaterStage) {
  Case c;
  c.model.tie_embeddings = true;
  BlockContext ctx = c.context();
  ctx.pp = 1;
  BlockParams same;
  OutputHeadModel().parameters(ctx, same);
  EXPECT_EQ(find(same, "output_layer"), nullptr);  // the embedding's own weight
  ASSERT_NE(find(same, "final_norm"), nullptr);
  EXPECT_EQ(find(same, "final_norm")->per_rank, 1024);  // RMSNorm: a scale
  ctx.pp = 2;
  BlockParams later;
  OutputHeadModel().parameters(ctx, later);
  ASSERT_NE(find(later, "output_layer"), nullptr);
  EXPECT_EQ(find(later, "output_layer")->per_rank, 12'845'056);  // a copy on the last stage...
  EXPECT_EQ(find(later, "output_layer")->total, 0);              // ...that is no new parameter
  c.model.tie_embeddings = false;
  c.model.normalization = Normalization::kLayerNorm;
  BlockParams untied;
  OutputHeadModel().parameters(c.context(), untied);
  EXPECT_EQ(find(untied, "output_layer")->total, 51'200'000);
  EXPECT_EQ(find(untied, "final_norm")->per_rank, 2048);  // LayerNorm: scale and bias
}

TEST(OutputHeadBlock, LossTensorsBuffersAndDeferredGradients) {
  Case c;
  c.setup.defer_embedding_wgrad = true;
  c.setup.num_micro_batches = 8;
  BlockActivations a;
  OutputHeadModel().activations(c.context(), a);
  EXPECT_EQ(saved(a, "final_norm_and_output_input"), 4'194'304);  // 2 x 2 B x 1024 x 1024
  EXPECT_EQ(saved(a, "logits_fp32_softmax"), 205'520'896);        // 4 B x 4096 x 12544
  EXPECT_EQ(a.transient, 102'760'448);                            // the bf16 logits, 2 B x 4096 x 12544
  EXPECT_EQ(a.global_buffer, 8'388'608);                          // the SP all-gather, 2 B x 4096 x 1024
  ASSERT_EQ(a.held_for_step.size(), 1u);
  // 8 micro-batches x 2 B x (4096 x 12544 + 1024 x 1024).
  EXPECT_EQ(a.held_for_step[0].bytes, 838'860'800);
  c.setup.cross_entropy_fusion = true;  // native: the compiled graph's fp32 copy next to the bf16 logits
  BlockActivations f;
  OutputHeadModel().activations(c.context(), f);
  EXPECT_EQ(f.transient, 308'281'344);  // (2 + 4) B x 4096 x 12544
}

// The output layer's backward (layers.py LinearWithGradAccumulationAndAsyncCommunication): the
// fp32 loss gradient (the saved 4 B x T x V/TP) is freed once autograd has cast it to bf16; the
// layer then holds that bf16 gradient, a new [V/TP, h] weight gradient and the [T, h] input
// gradient. With h = 1024 (above) that is less than the cast's moment; with h = 16384 it is more:
// 2 x 4096 x 12544 + 2 x 12544 x 16384 + 2 x 4096 x 16384 - 4 x 4096 x 12544
// = 102,760,448 + 411,041,792 + 134,217,728 - 205,520,896 = 442,499,072 bytes over the saved ones.
TEST(OutputHeadBlock, TheOutputLayersWeightGradientInItsBackward) {
  Case c;
  c.model.hidden_size = 16384;
  BlockActivations a;
  OutputHeadModel().activations(c.context(), a);
  EXPECT_EQ(a.transient, 442'499'072);
}

// The loss's memory-bound kernels over the 4096 x 12544 logits of a rank, bytes per logit
// counted op by op in each implementation (bf16 logits, 2 B): unfused tensor_parallel/
// cross_entropy.py .float() 2 + 4, max 4, -= 8, exp 8, sum 4, div_ 8, backward mul_ 8 and the
// cast 4 + 2: 52; the native fusion's four compiled kernels 6 + 16 + 16 + 10: 48; TE's triton
// kernels, the gradient written over the logits, 2 + 4 + 4: 10. They stand for the saved logits:
// fp32 (4 B each), TE's the bf16 logits themselves (2 B).
TEST(OutputHeadBlock, TheLossKernelsBytesPerLogit) {
  Case c;
  const double logits = 4096.0 * 12544;
  for (const auto& [fusion, te, per, saved] :
       {std::tuple{false, false, 52.0, 4.0}, {true, false, 48.0, 4.0}, {true, true, 10.0, 2.0}}) {
    c.setup.cross_entropy_fusion = fusion;
    c.setup.cross_entropy_te = te;
    BlockCosts k;
    OutputHeadModel().costs(c.context(), k);
    EXPECT_DOUBLE_EQ(k.elementwise_bytes, per * logits) << fusion << te;
    EXPECT_DOUBLE_EQ(k.elementwise_saved_bytes, saved * logits) << fusion << te;
  }
}

// Transformer Engine's parallel_cross_entropy as the measured containers run it (TE 2.11):
// cross_entropy_kernel writes the gradient over the bf16 logits, which the autograd function
// saves: 2 B x 4096 x 12544 = 102,760,448 saved, no fp32 copy and no cast back. The output
// layer's backward then adds its input's gradient (2 B x 4096 x 1024 = 8 MiB) and the weight
// gradient (2 B x 12544 x 1024 = 25,690,112), allocated in that order.
TEST(OutputHeadBlock, TransformerEnginesLossKeepsTheLogitsWithTheirGradient) {
  Case c;
  c.setup.cross_entropy_fusion = c.setup.cross_entropy_te = true;
  BlockActivations a;
  OutputHeadModel().activations(c.context(), a);
  EXPECT_EQ(saved(a, "logits_with_gradient"), 102'760'448);
  EXPECT_EQ(saved(a, "logits_fp32_softmax"), -1);  // not there
  EXPECT_EQ(a.transient, 8'388'608 + 25'690'112);
  ASSERT_EQ(a.transient_parts.size(), 2u);
  EXPECT_EQ(a.transient_parts[0].bytes, 8'388'608);
  EXPECT_EQ(a.transient_parts[1].bytes, 25'690'112);
  // The other loss paths list no parts: one working-set block.
  c.setup.cross_entropy_te = false;
  BlockActivations native;
  OutputHeadModel().activations(c.context(), native);
  EXPECT_TRUE(native.transient_parts.empty());
}

TEST(OutputHeadBlock, OutputGemmAndItsInputGather) {
  Case c;
  BlockContext ctx = c.context();
  BlockCosts k;
  OutputHeadModel().costs(ctx, k);
  EXPECT_DOUBLE_EQ(k.gemm_flops, 105'226'698'752.0);  // 2 x 4096 x 1024 x 12544
  EXPECT_DOUBLE_EQ(k.weight_bytes, 25'690'112.0);     // 2 B x 1024 x 12544
  ASSERT_EQ(k.collectives.size(), 1u);
  EXPECT_DOUBLE_EQ(k.collectives[0].forward_bytes, 6'291'456);  // 3/4 of 8 MiB all-gathered
  EXPECT_DOUBLE_EQ(k.collectives[0].backward_bytes, 6'291'456);
}

TEST(MtpProjectionBlock, NormsProjectionAndTheirActivations) {
  Case c;
  BlockContext ctx = c.context();
  ctx.is_mtp = true;
  BlockParams p;
  MtpProjectionModel().parameters(ctx, p);
  ASSERT_NE(find(p, "eh_proj"), nullptr);
  EXPECT_EQ(find(p, "eh_proj")->total, 2'097'152);   // 2h x h
  EXPECT_EQ(find(p, "eh_proj")->per_rank, 524'288);  // column-parallel over TP 4
  std::int64_t norms = 0;
  for (const auto& t : p.terms)
    if (t.group == ParamGroup::kNorms) norms += t.per_rank;
  EXPECT_EQ(norms, 3 * 1024);  // enorm, hnorm, final norm
  BlockActivations a;
  MtpProjectionModel().activations(ctx, a);
  EXPECT_EQ(saved(a, "mtp/token_ids"), 32'768);
  EXPECT_EQ(saved(a, "mtp/norms_and_eh_proj"), 16'777'216);  // 2 B x 1024 x 1024 x 8
  BlockCosts k;
  MtpProjectionModel().costs(ctx, k);
  EXPECT_DOUBLE_EQ(k.gemm_flops, 4'294'967'296.0);  // 2 x 4096 x 2048 x 1024 / 4
  EXPECT_DOUBLE_EQ(k.weight_bytes, 1'048'576.0);    // 2 B x 2048 x 1024 / 4
}

}  // namespace
}  // namespace mme::plugins
