// LoRA as Megatron-Bridge runs it (TrainingSetup::lora, docs/memory-model.md "LoRA"): frozen base
// weights without gradients or optimizer states, adapters r x (in + out) / TP per rank trained
// like any parameter, and what the adapters and the frozen linears keep for backward. Expected
// values are worked out by hand in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/sdk/error.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

using ::testing::HasSubstr;

// Meta-Llama-3-8B in Megatron terms (config.json values written out by hand).
ModelSpec llama3_8b() {
  ModelSpec m;
  m.name = "llama-3-8b";
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.vocab_size = 128256;
  m.max_position_embeddings = 8192;
  m.tie_embeddings = false;
  m.normalization = Normalization::kRMSNorm;
  m.gated_linear_unit = true;
  m.activation = "silu";
  LayerSpec l;
  l.attention.kind = "gqa";
  l.attention.num_heads = 32;
  l.attention.num_query_groups = 8;
  l.attention.kv_channels = 128;
  l.mlp.kind = "dense";
  l.mlp.ffn_hidden_size = 14336;
  m.layers.assign(32, l);
  return m;
}

// A small Mixtral-like MoE: 2 layers, h 1024, 8 experts of F 512 (SwiGLU), top-2, no shared experts.
ModelSpec small_moe() {
  ModelSpec m = llama3_8b();
  m.name = "small-moe";
  m.num_layers = 2;
  m.hidden_size = 1024;
  m.vocab_size = 32000;
  LayerSpec l;
  l.attention.kind = "gqa";
  l.attention.num_heads = 8;
  l.attention.num_query_groups = 8;
  l.attention.kv_channels = 128;
  l.mlp.kind = "moe";
  l.mlp.num_experts = 8;
  l.mlp.top_k = 2;
  l.mlp.expert_ffn_hidden_size = 512;
  m.layers.assign(2, l);
  return m;
}

class Lora : public ::testing::Test {
 protected:
  void SetUp() override { test::register_layer_models(registry_); }
  Estimate run(const ModelSpec& m, const TrainingSetup& s) {
    EstimateOptions o;
    o.layer_breakdown = true;
    return Estimator(m, registry_).run(s, o);
  }
  static TrainingSetup tp2_dp4() {
    TrainingSetup s;
    s.parallel.tp = 2;
    s.parallel.world_size = 8;  // DP 4; SP on with TP 2
    s.seq_length = 4096;
    s.micro_batch_size = 1;
    return s;
  }
  Registry registry_;
};

// Rank 16 on linear_qkv, linear_proj, linear_fc1, linear_fc2 of Llama-3-8B at TP 2, DP 4.
TEST_F(Lora, Llama3_8BRank16AllTargetsStaticMemory) {
  TrainingSetup s = tp2_dp4();
  const StageEstimate base = run(llama3_8b(), s).stages.at(0);
  s.lora.rank = 16;
  const Estimate est = run(llama3_8b(), s);
  const StageEstimate& st = est.stages.at(0);
  // Adapters per layer, r x (in + out) each, every one split over TP 2:
  //   linear_qkv  16 x (4096 + 6144)  = 163,840 -> 81,920 per rank
  //   linear_proj 16 x (4096 + 4096)  = 131,072 -> 65,536
  //   linear_fc1  16 x (4096 + 28672) = 524,288 -> 262,144
  //   linear_fc2  16 x (14336 + 4096) = 294,912 -> 147,456
  // = 557,056 per rank and layer, x 32 layers = 17,825,792.
  const std::int64_t adapters = 17'825'792;
  EXPECT_EQ(st.trainable_parameters, adapters);
  EXPECT_EQ(base.trainable_parameters, base.parameters);  // without LoRA every parameter trains
  EXPECT_EQ(st.parameters, 4'015'263'744 + adapters);     // the base (static_memory_test) + adapters
  // bf16 weights for all, frozen base included.
  EXPECT_EQ(st.weight_bytes, 2 * st.parameters);
  // fp32 main gradients for the adapters only: 4 x 17,825,792 = 71,303,168.
  EXPECT_EQ(st.gradient_bytes, 71'303'168);
  // Distributed optimizer over DP 4: (4 + 4 + 4) x 17,825,792 / 4 = 53,477,376.
  EXPECT_EQ(st.optimizer_bytes, 53'477'376);
  EXPECT_EQ(test::component_sum(st, "weights/lora_adapters"), 2 * adapters);
  EXPECT_EQ(test::component_sum(st, "weights/dense"), 2 * 4'015'263'744);
  EXPECT_LT(st.total_bytes, base.total_bytes);
  bool said = false;
  for (const auto& a : est.assumptions) said |= a.find("LoRA (Megatron-Bridge): rank 16") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST_F(Lora, Llama3_8BRank16AllTargetsActivationsOfOneLayer) {
  TrainingSetup s = tp2_dp4();
  const Estimate base = run(llama3_8b(), s);
  s.lora.rank = 16;
  const Estimate lora = run(llama3_8b(), s);
  ASSERT_EQ(base.layer_kinds.size(), 1u);
  ASSERT_EQ(lora.layer_kinds.size(), 1u);
  // T = 4096 tokens, T / TP = 2048 under SP, bf16. What changes in one layer:
  //   linear_qkv wrapped: the frozen base keeps its norm output all the same (return_layernorm_output);
  //     its adapter keeps the all-gathered [T, h] input 2 x 4096 x 4096 = 33,554,432
  //     and linear_in's [T, r] output 2 x 4096 x 16 = 131,072;
  //   linear_proj wrapped: its adapter's input is O, which flash attention keeps: + 131,072;
  //   linear_fc1 wrapped: as linear_qkv, 33,554,432 + 131,072;
  //   linear_fc2 wrapped: the frozen fc2 keeps no input, its adapter keeps the same bf16
  //     [T, f/TP] (no change) + 131,072.
  // = 2 x 33,554,432 + 4 x 131,072 = 67,633,152.
  EXPECT_EQ(lora.layer_kinds[0].activation_bytes_per_microbatch - base.layer_kinds[0].activation_bytes_per_microbatch,
            67'633'152);
  // Per layer and rank, the adapters' parameters (see above).
  EXPECT_EQ(lora.layer_kinds[0].parameters - base.layer_kinds[0].parameters, 557'056);
}

// Only linear_fc2 wrapped, dropout 0.1 at its input: the other frozen linears drop their inputs.
TEST_F(Lora, FrozenLinearsKeepNoInputsAndDropoutKeepsItsMask) {
  TrainingSetup s = tp2_dp4();
  const Estimate base = run(llama3_8b(), s);
  s.lora.rank = 16;
  s.lora.targets = kLoraLinearFc2;
  s.lora.dropout = 0.1;
  const Estimate lora = run(llama3_8b(), s);
  // linear_qkv frozen, not wrapped: its norm output is freed: - 2 x 2048 x 4096 = -16,777,216;
  // linear_fc1 likewise: -16,777,216; linear_proj frozen: O stays for flash attention;
  // linear_fc2's input [T, f/TP] = 4096 x 7168 is kept by no one, its adapter keeps the dropout's
  // bf16 output instead (no change, 58,720,256) and the 1-byte mask + 29,360,128, and
  // linear_in's output + 131,072.
  // = -33,554,432 + 29,360,128 + 131,072 = -4,063,232.
  EXPECT_EQ(lora.layer_kinds[0].activation_bytes_per_microbatch - base.layer_kinds[0].activation_bytes_per_microbatch,
            -4'063'232);
  // linear_fc2's adapter alone: 147,456 per rank and layer, x 32.
  EXPECT_EQ(lora.stages[0].trainable_parameters, 32 * 147'456);
  // Dropout at the output instead: a mask over its [T/TP, h] output (2048 x 4096 = 8,388,608)
  // and the adapter keeps the fc2 input itself (58,720,256, as the base did).
  s.lora.dropout_position = LoraDropoutPosition::kPost;
  const Estimate post = run(llama3_8b(), s);
  EXPECT_EQ(post.layer_kinds[0].activation_bytes_per_microbatch - base.layer_kinds[0].activation_bytes_per_microbatch,
            -33'554'432 + 8'388'608 + 131'072);
}

TEST_F(Lora, RoutedExpertsGetOneAdapterEach) {
  TrainingSetup s;
  s.parallel.ep = 2;
  s.parallel.world_size = 4;  // DP 4, expert DP 2
  s.seq_length = 4096;
  const Estimate base = run(small_moe(), s);
  s.lora.rank = 8;
  s.lora.targets = kLoraLinearFc1 | kLoraLinearFc2;
  const Estimate lora = run(small_moe(), s);
  const StageEstimate& st = lora.stages.at(0);
  // Per expert: fc1 8 x (1024 + 1024) = 16,384, fc2 8 x (512 + 1024) = 12,288: 28,672; 8 / EP 2
  // = 4 local experts: 114,688 per layer, x 2 layers = 229,376, all expert-sharded.
  EXPECT_EQ(st.trainable_parameters, 229'376);
  EXPECT_EQ(st.expert_parameters - base.stages[0].expert_parameters, 229'376);
  // Gradients fp32: 4 x 229,376; optimizer over expert DP 2: 12 x 229,376 / 2.
  EXPECT_EQ(st.gradient_bytes, 917'504);
  EXPECT_EQ(st.optimizer_bytes, 1'376'256);
  // Activations of one layer: N = 4096 tokens x top-2 = 8192 routed tokens. The frozen grouped
  // GEMMs keep no inputs (fc1's [N, h] 16,777,216, fc2's [N, F] 8,388,608); the adapters keep the
  // same tensors in bf16 (no change) and linear_in's [N, r] outputs, 2 x 8192 x 8 = 131,072 each.
  // Attention: its linears are frozen and not wrapped: linear_qkv's norm output goes,
  // 2 x 4096 x 1024 = 8,388,608.
  EXPECT_EQ(lora.layer_kinds[0].activation_bytes_per_microbatch - base.layer_kinds[0].activation_bytes_per_microbatch,
            2 * 131'072 - 8'388'608);
}

TEST_F(Lora, RefusesWhatItCannotModel) {
  TrainingSetup s = tp2_dp4();
  s.lora.rank = 15;  // linear_qkv's adapter splits r over TP 2
  try {
    (void)run(llama3_8b(), s);
    ADD_FAILURE() << "rank 15 at TP 2 accepted";
  } catch (const LayoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("LoRA rank 15 is not divisible by --tp 2"));
  }
  s.lora.targets = kLoraLinearProj | kLoraLinearFc2;  // row-parallel ones only: any rank
  EXPECT_NO_THROW((void)run(llama3_8b(), s));
  s.lora.rank = 16;
  s.fsdp.kind = FsdpKind::kMegatron;
  EXPECT_THROW((void)run(llama3_8b(), s), LayoutError);
  s.fsdp.kind = FsdpKind::kNone;
  ModelSpec mla = llama3_8b();
  for (auto& l : mla.layers) {
    l.attention.kind = "mla";
    l.attention.q_lora_rank = 1536;
    l.attention.kv_lora_rank = 512;
    l.attention.qk_head_dim = 128;
    l.attention.qk_pos_emb_head_dim = 64;
    l.attention.v_head_dim = 128;
  }
  try {
    (void)run(mla, s);
    ADD_FAILURE() << "LoRA on MLA accepted";
  } catch (const LayoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("multi-latent attention is not modelled"));
  }
}

}  // namespace
}  // namespace mme
