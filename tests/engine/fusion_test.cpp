// Megatron-LM's "fusion off" switches (--no-bias-swiglu-fusion, --no-bias-gelu-fusion,
// --no-rope-fusion, --no-bias-dropout-fusion) in the decoder blocks' saved activations, called
// directly with hand-made contexts. Each expected value is the bytes of the tensors the unfused
// torch code keeps beyond the fused kernel, worked out in the comment beside it from the
// Megatron-LM code the term models (docs/memory-model.md, "Fusions").
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include <mme/sdk/layer_model.hpp>

#include "block_case.hpp"
#include "dense_mlp.hpp"
#include "gqa.hpp"
#include "mla.hpp"
#include "moe.hpp"

namespace mme {
namespace {

// A block with hand-made contexts (hidden 4096, sequence 4096, micro-batch 1).
using Block = test::BlockCase;

std::int64_t saved_bytes(const BlockActivations& a) {
  std::int64_t total = 0;
  for (const auto& t : a.saved) total += t.bytes;
  return total;
}

std::int64_t term_bytes(const BlockActivations& a, std::string_view name) {
  for (const auto& t : a.saved)
    if (t.name == name) return t.bytes;
  return 0;
}

BlockActivations run(const LayerMemoryModel& model, const Block& b, std::int64_t tp, std::int64_t cp = 1) {
  BlockActivations out;
  model.activations(b.context(tp, cp), out);
  return out;
}

// Llama-3-8B's MLP: SwiGLU of 14336, no biases.
Block llama_mlp() {
  Block b;
  b.model.gated_linear_unit = true;
  b.model.activation = "silu";
  b.layer.mlp.kind = "dense";
  b.layer.mlp.ffn_hidden_size = 14336;
  return b;
}

TEST(Fusions, UnfusedSwigluKeepsTheGateActivation) {
  Block b = llama_mlp();
  const plugins::DenseMlpModel mlp;
  const BlockActivations fused = run(mlp, b, 2);
  b.setup.bias_swiglu_fusion = false;
  const BlockActivations unfused = run(mlp, b, 2);
  // mlp.py glu(): silu(x_glu) * x_linear keeps silu(x_glu) [4096 tokens, 14336 / TP 2] in bf16:
  // 2 B x 4096 x 7168 = 58,720,256 B; x_glu and x_linear are views of fc1's output, kept either way.
  EXPECT_EQ(term_bytes(fused, "mlp/activation_glu_act"), 0);
  EXPECT_EQ(term_bytes(unfused, "mlp/activation_glu_act"), 58'720'256);
  EXPECT_EQ(saved_bytes(unfused) - saved_bytes(fused), 58'720'256);
  // Its backward: the gradients of x_glu and x_linear ([4096, 7168] each) next to their
  // concatenation, one [4096, 7168] bf16 more than the fused swiglu_back.
  EXPECT_EQ(unfused.transient - fused.transient, 58'720'256);

  // `mlp` recompute checkpoints the whole MLP: nothing of it is kept, fused or not.
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeMlp;
  EXPECT_EQ(term_bytes(run(mlp, b, 2), "mlp/activation_glu_act"), 0);

  // --no-bias-gelu-fusion does not touch a SwiGLU MLP.
  Block g = llama_mlp();
  const std::int64_t before = saved_bytes(run(mlp, g, 2));
  g.setup.bias_gelu_fusion = false;
  EXPECT_EQ(saved_bytes(run(mlp, g, 2)), before);
}

TEST(Fusions, BiasGeluOffChangesOnlyAGatedGelu) {
  // GPT's MLP: plain GeLU of 4h = 16384 with biases. bias_gelu_impl keeps (input, bias); the
  // unfused input + bias, then F.gelu, keeps the sum of the same [4096, 16384 / 2]: no change.
  Block b;
  b.model.gated_linear_unit = false;
  b.model.activation = "gelu";
  b.model.add_bias_linear = true;
  b.layer.mlp.kind = "dense";
  b.layer.mlp.ffn_hidden_size = 16384;
  const plugins::DenseMlpModel mlp;
  const BlockActivations fused = run(mlp, b, 2);
  b.setup.bias_gelu_fusion = false;
  const BlockActivations unfused = run(mlp, b, 2);
  EXPECT_EQ(saved_bytes(unfused), saved_bytes(fused));
  EXPECT_EQ(unfused.transient, fused.transient);

  // A gated GeLU of 8192 with biases: bias_geglu_impl keeps its input only; glu() also keeps
  // gelu(x_glu) [4096, 8192 / 2]: 2 B x 4096 x 4096 = 33,554,432 B.
  b.model.gated_linear_unit = true;
  b.layer.mlp.ffn_hidden_size = 8192;
  b.setup.bias_gelu_fusion = true;
  EXPECT_EQ(term_bytes(run(mlp, b, 2), "mlp/activation_glu_act"), 0);
  b.setup.bias_gelu_fusion = false;
  EXPECT_EQ(term_bytes(run(mlp, b, 2), "mlp/activation_glu_act"), 33'554'432);
  // Without biases arguments.py turns bias_gelu_fusion off itself: unfused even at the default.
  b.model.add_bias_linear = false;
  b.setup.bias_gelu_fusion = true;
  EXPECT_EQ(term_bytes(run(mlp, b, 2), "mlp/activation_glu_act"), 33'554'432);
}

// A MoE layer: 8 experts of 2048, top-2, SwiGLU, shared experts of 4096, TP 2 (EP, ETP 1).
Block moe_layer() {
  Block b;
  b.model.gated_linear_unit = true;
  b.model.activation = "silu";
  b.layer.mlp.kind = "moe";
  b.layer.mlp.num_experts = 8;
  b.layer.mlp.top_k = 2;
  b.layer.mlp.expert_ffn_hidden_size = 2048;
  b.layer.mlp.shared_expert_ffn_hidden_size = 4096;
  return b;
}

TEST(Fusions, UnfusedSwigluInTheExpertsAndSharedExperts) {
  Block b = moe_layer();
  const plugins::MoeModel moe;
  const BlockActivations fused = run(moe, b, 2);
  b.setup.bias_swiglu_fusion = false;
  const BlockActivations unfused = run(moe, b, 2);
  // Dispatched tokens N = 2048 local tokens x top-2 = 4096 (balanced, dropless). experts.py
  // bias_act_func without weighted_bias_swiglu_impl: glu() keeps silu(x_glu) [N, 2048] and the
  // product with the routing probabilities keeps glu()'s output [N, 2048]: 2 x 2 B x 4096 x 2048.
  EXPECT_EQ(term_bytes(unfused, "moe/expert_activation_glu_act"), 16'777'216);
  EXPECT_EQ(term_bytes(unfused, "moe/expert_activation_unscaled"), 16'777'216);
  EXPECT_EQ(term_bytes(fused, "moe/expert_activation_unscaled"), 0);
  // The shared experts (MLP.forward) keep silu(x_glu) of the full sequence [4096, 4096 / TP 2].
  EXPECT_EQ(term_bytes(unfused, "moe/shared_activation_glu_act"), 16'777'216);
  EXPECT_EQ(saved_bytes(unfused) - saved_bytes(fused), 50'331'648);

  // moe_act recompute checkpoints bias_act_func: the experts keep only fc1's output, the shared
  // experts still their glu() activation.
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeMoeAct;
  const BlockActivations moe_act = run(moe, b, 2);
  EXPECT_EQ(term_bytes(moe_act, "moe/expert_activation_glu_act"), 0);
  EXPECT_EQ(term_bytes(moe_act, "moe/expert_activation_unscaled"), 0);
  EXPECT_EQ(term_bytes(moe_act, "moe/shared_activation_glu_act"), 16'777'216);
  // shared_experts recompute drops the shared experts' tensors, `moe` recompute everything.
  b.setup.recompute.modules = kRecomputeSharedExperts;
  EXPECT_EQ(term_bytes(run(moe, b, 2), "moe/shared_activation_glu_act"), 0);
  EXPECT_EQ(term_bytes(run(moe, b, 2), "moe/expert_activation_glu_act"), 16'777'216);
  b.setup.recompute.modules = kRecomputeMoe;
  const BlockActivations whole = run(moe, b, 2);
  EXPECT_EQ(term_bytes(whole, "moe/expert_activation_glu_act") + term_bytes(whole, "moe/shared_activation_glu_act"), 0);
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

TEST(Fusions, UnfusedRopeKeepsCosAndSinPerLayer) {
  Block b = llama_attention();
  const plugins::GqaAttentionModel gqa;
  const BlockActivations fused = run(gqa, b, 2);
  b.setup.apply_rope_fusion = false;
  // _apply_rotary_pos_emb_bshd, once for Q and once for K: t * cos_ and rotate_half(t) * sin_
  // keep cos_ and sin_ [4096, 1, 1, 128] bf16 each: 4 x 2 B x 4096 x 128 = 4,194,304 B, the same
  // for any TP or micro-batch size (no head or batch dimension).
  EXPECT_EQ(term_bytes(fused, "attention/rope_cos_sin"), 0);
  EXPECT_EQ(saved_bytes(run(gqa, b, 2)) - saved_bytes(fused), 4'194'304);
  EXPECT_EQ(term_bytes(run(gqa, b, 4), "attention/rope_cos_sin"), 4'194'304);
  // CP 2: each rank's freqs cover its 2048 positions.
  EXPECT_EQ(term_bytes(run(gqa, b, 2, 2), "attention/rope_cos_sin"), 2'097'152);
  // No rotary embedding, nothing to rotate.
  b.model.position_embedding = PositionEmbedding::kLearnedAbsolute;
  EXPECT_EQ(term_bytes(run(gqa, b, 2), "attention/rope_cos_sin"), 0);
}

// DeepSeek-V3's attention shape: 128 heads, q/kv latents 1536/512, d_qk 128 + d_rope 64, d_v 128.
Block deepseek_attention() {
  Block b;
  b.model.hidden_size = 7168;
  b.layer.attention.kind = "mla";
  b.layer.attention.num_heads = 128;
  b.layer.attention.q_lora_rank = 1536;
  b.layer.attention.kv_lora_rank = 512;
  b.layer.attention.qk_head_dim = 128;
  b.layer.attention.qk_pos_emb_head_dim = 64;
  b.layer.attention.v_head_dim = 128;
  return b;
}

TEST(Fusions, UnfusedMlaRopeAndItsRecompute) {
  Block b = deepseek_attention();
  const plugins::MlaAttentionModel mla;
  const BlockActivations fused = run(mla, b, 2);
  b.setup.apply_rope_fusion = false;
  // qkv_up_proj_and_rope_apply without the fused MLA kernels: two _apply_rotary_pos_emb_bshd
  // calls (q_pos_emb, k_pos_emb), each keeping cos_ and sin_ [4096, 1, 1, 64] bf16:
  // 4 x 2 B x 4096 x 64 = 2,097,152 B.
  EXPECT_EQ(saved_bytes(run(mla, b, 2)) - saved_bytes(fused), 2'097'152);
  // mla_up_proj recompute checkpoints that function (CheckpointWithoutOutput): nothing kept.
  b.setup.recompute.granularity = RecomputeGranularity::kSelective;
  b.setup.recompute.modules = kRecomputeMlaUpProj;
  EXPECT_EQ(term_bytes(run(mla, b, 2), "attention/rope_cos_sin"), 0);
}

TEST(Fusions, BiasDropoutAddKeepsTheSameMaskEitherWay) {
  // fused_bias_dropout.py: one function, compiled (fused) or eager; dropout keeps its 1-byte
  // mask [2048 local tokens, 4096] both ways, x + bias and residual + out keep nothing.
  const plugins::DenseMlpModel mlp;
  const plugins::GqaAttentionModel gqa;
  const plugins::MoeModel moe;
  const std::pair<const LayerMemoryModel*, Block> blocks[] = {
      {&mlp, llama_mlp()}, {&gqa, llama_attention()}, {&moe, moe_layer()}};
  for (auto [model, b] : blocks) {
    b.model.hidden_dropout = 0.1;
    b.model.add_bias_linear = true;
    const BlockActivations fused = run(*model, b, 2);
    b.setup.bias_dropout_fusion = false;
    const BlockActivations eager = run(*model, b, 2);
    const std::string mask = std::string(model->kind() == "gqa"   ? "attention"
                                         : model->kind() == "moe" ? "moe"
                                                                  : "mlp") +
                             "/bda_dropout_mask";
    EXPECT_EQ(term_bytes(eager, mask), 2048 * 4096) << mask;
    EXPECT_EQ(saved_bytes(eager), saved_bytes(fused)) << mask;
    EXPECT_EQ(eager.transient, fused.transient) << mask;
  }
}

}  // namespace
}  // namespace mme
