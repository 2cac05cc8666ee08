// Offloading to the host, one test per mechanism, each against a value worked out by hand from
// the code it models: fine-grained activation offloading
// (megatron/core/pipeline_parallel/fine_grained_activation_offload.py), Transformer Engine's
// layer offload (transformer_engine/pytorch/cpu_offload.py, cpu_offload_v1.py) and the optimizer's
// (megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py).
//
// The test model: 4 layers of GQA (16 heads of 64) + a GELU MLP of 4096, hidden 1024, no
// dropout, sequence 2048, micro-batch 1, TP 1, bf16, unfused attention. Per layer and
// micro-batch its blocks keep (MiB): norm input 4, QKV input 4, Q 4, K+V 8, scores
// [16, 2048, 2048] 128, output 4; MLP norm input 4, fc1 input 4, fc1 output 16, activation
// output 16: 192 in all.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/block_helpers.hpp>
#include <mme/sdk/error.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kMiB = 1024 * 1024;
constexpr std::int64_t kLayer = 192 * kMiB;
constexpr std::int64_t kCoreAttn = (4 + 8 + 128) * kMiB;  // Q, K+V, scores
constexpr std::int64_t kAttnProj = 4 * kMiB;              // linear_proj's input

ModelSpec test_model() { return test::small_model_without_dropout(); }
TrainingSetup test_setup() { return test::unfused_setup(); }

TrainingSetup fine_grained(std::uint32_t modules) {
  TrainingSetup s = test_setup();
  s.activation_offload.fine_grained = true;
  s.activation_offload.modules = modules;
  return s;
}

std::int64_t component(const StageEstimate& st, const std::string& name) {
  for (const auto& c : st.components)
    if (c.name == name) return c.bytes;
  return -1;
}

class Offload : public ::testing::Test {
 protected:
  void SetUp() override { test::register_layer_models(registry_); }
  Estimate run(const ModelSpec& m, const TrainingSetup& s) { return Estimator(m, registry_).run(s); }
  Estimate run(const TrainingSetup& s) { return run(test_model(), s); }
  std::int64_t activations(const TrainingSetup& s, std::size_t stage = 0) {
    return run(s).stages.at(stage).activation_bytes;
  }
  Registry registry_;
};

TEST_F(Offload, TheTestModelKeeps192MiBPerLayer) {
  const Estimate e = run(test_setup());
  ASSERT_EQ(e.stages.size(), 1u);
  EXPECT_EQ(component(e.stages[0], "activations/attention/scores"), 4 * 128 * kMiB);
  std::int64_t layers = 0;
  for (const auto& c : e.stages[0].components)
    if (c.name.rfind("activations/attention/", 0) == 0 || c.name.rfind("activations/mlp/", 0) == 0) layers += c.bytes;
  EXPECT_EQ(layers, 4 * kLayer);
}

// core_attn and attn_proj: each layer sends Q, K, V, the scores and linear_proj's input to the
// host; in backward about one layer's worth is back on the GPU. Four layers go, one comes back.
TEST_F(Offload, FineGrainedSendsTheGroupsOfEveryLayerAndKeepsOneLayerInBackward) {
  const Estimate plain = run(test_setup());
  const std::int64_t base = plain.stages.at(0).activation_bytes;
  const Estimate e = run(fine_grained(kOffloadCoreAttn | kOffloadAttnProj));
  const StageEstimate& st = e.stages.at(0);
  EXPECT_EQ(base - st.activation_bytes, 3 * (kCoreAttn + kAttnProj));
  EXPECT_EQ(component(st, "activations/offload_layer_in_backward"), kCoreAttn + kAttnProj);
  EXPECT_EQ(component(st, "activations/attention/scores"), -1);  // all of it on the host
  EXPECT_EQ(component(st, "activations/attention/qkv_input"), 4 * 4 * kMiB);
  // What one micro-batch of the chunk keeps on the GPU: the layers' other tensors (and the
  // embedding's and the loss's).
  EXPECT_EQ(
      plain.stages[0].chunks.at(0).activation_bytes_per_microbatch - st.chunks.at(0).activation_bytes_per_microbatch,
      4 * (kCoreAttn + kAttnProj));
  // The bound: a second layer's groups on the GPU.
  EXPECT_EQ(st.offload_slack_bytes, kCoreAttn + kAttnProj);
  EXPECT_GE(st.upper_bytes, st.total_bytes + st.offload_slack_bytes);
  bool named = false;
  for (const auto& t : e.bound_terms) named = named || t.rfind("activation offloading", 0) == 0;
  EXPECT_TRUE(named);
}

// ChunkOffloadHandler.tensor_need_offloading_checker: numel >= min_offloaded_tensor_size. At
// 3M elements only the scores (64M elements) move; Q, K, V and the output have 2M each.
TEST_F(Offload, TensorsBelowTheMinimumSizeStay) {
  const std::int64_t base = activations(test_setup());
  TrainingSetup s = fine_grained(kOffloadCoreAttn | kOffloadAttnProj);
  s.activation_offload.min_tensor_size = 3 * 1024 * 1024;
  EXPECT_EQ(base - activations(s), 3 * 128 * kMiB);
}

// post_warmup_callback: int(8 groups x (1 - 0.3)) = 5 of the chunk's groups, the last in the
// forward, stay on the GPU; layer 0's two groups and layer 1's core_attn go.
TEST_F(Offload, TheFractionKeepsTheLastGroupsOfEachChunk) {
  const std::int64_t base = activations(test_setup());
  TrainingSetup s = fine_grained(kOffloadCoreAttn | kOffloadAttnProj);
  s.activation_offload.fraction = 0.3;
  const std::int64_t sent = 2 * kCoreAttn + kAttnProj, back = kCoreAttn + kAttnProj;
  EXPECT_EQ(base - activations(s), sent - back);
  s.activation_offload.fraction = 0.0;  // every group stays
  EXPECT_EQ(activations(s), base);
}

// Every micro-batch in flight sends its groups: with PP 2 and 1F1B, stage 0 holds 2
// micro-batches of its 2 layers, stage 1 one.
TEST_F(Offload, EveryMicroBatchInFlightOffloads) {
  TrainingSetup plain = test_setup();
  plain.parallel.pp = 2;
  plain.parallel.world_size = 2;
  plain.global_batch_size = 8;
  TrainingSetup s = plain;
  s.activation_offload.fine_grained = true;
  s.activation_offload.modules = kOffloadCoreAttn | kOffloadAttnProj;
  const Estimate base = run(plain), off = run(s);
  ASSERT_EQ(off.stages.at(0).inflight_microbatches, 2);
  const std::int64_t layer = kCoreAttn + kAttnProj;
  EXPECT_EQ(base.stages[0].activation_bytes - off.stages[0].activation_bytes, 2 * 2 * layer - layer);
  EXPECT_EQ(base.stages[1].activation_bytes - off.stages[1].activation_bytes, 2 * layer - layer);
  // --delta-offload-bytes-across-pp-ranks: rank r keeps r x delta of its groups on the GPU.
  s.activation_offload.delta_bytes_across_pp_ranks = 100 * kMiB;
  const Estimate kept = run(s);
  EXPECT_EQ(kept.stages[0].activation_bytes, off.stages[0].activation_bytes);
  EXPECT_EQ(kept.stages[1].activation_bytes - off.stages[1].activation_bytes, 100 * kMiB);
  EXPECT_EQ(component(kept.stages[1], "activations/offload_kept_for_pp_balance"), 100 * kMiB);
}

// The TE spec fuses GQA's input norm into linear_qkv and the dense MLP's into linear_fc1:
// attn_norm and mlp_norm find no separate norm to offload (transformer_layer.py
// _set_offload_modules: not IdentityOp), and the report says so.
TEST_F(Offload, FusedNormsHaveNothingToOffload) {
  const std::int64_t base = activations(test_setup());
  const Estimate e = run(fine_grained(kOffloadAttnNorm | kOffloadMlpNorm));
  EXPECT_EQ(e.stages.at(0).activation_bytes, base);
  std::string lines;
  for (const auto& a : e.assumptions) lines += a + "\n";
  EXPECT_THAT(lines, HasSubstr("nothing to offload in this model and setup: attn_norm mlp_norm"));
}

// MoE: expert_fc1 sends the dispatched tokens [N = 2048 x top-2, 1024] (8 MiB), moe_act fc1's
// output [N, 512] and the unscaled GELU output (4 MiB each; the fp32 routing probabilities,
// 4096 elements, stay), mlp_norm the separate pre-MLP norm's input (4 MiB).
TEST_F(Offload, MoeGroupsSendTheExpertTensors) {
  ModelSpec m = test_model();
  for (auto& l : m.layers) {
    l.mlp.kind = "moe";
    l.mlp.num_experts = 8;
    l.mlp.top_k = 2;
    l.mlp.expert_ffn_hidden_size = 512;
  }
  const std::int64_t base = run(m, test_setup()).stages.at(0).activation_bytes;
  const TrainingSetup s = fine_grained(kOffloadExpertFc1 | kOffloadMoeAct | kOffloadMlpNorm);
  const std::int64_t layer = (8 + 4 + 4 + 4) * kMiB;
  EXPECT_EQ(base - run(m, s).stages.at(0).activation_bytes, 3 * layer);
}

// cpu_offload.py DefaultOffloadSynchronizer: layers 0 and 1 of 4 go to the host whole (every
// tensor has at least 256K elements) and come back one by one, so at most L - N = 2 layers are
// on the GPU.
TEST_F(Offload, LayerOffloadSendsTheFirstLayers) {
  const std::int64_t base = activations(test_setup());
  TrainingSetup s = test_setup();
  s.activation_offload.cpu_offloading_num_layers = 2;
  EXPECT_EQ(base - activations(s), 2 * kLayer);
  // NVTE_CPU_OFFLOAD_V1=1 (cpu_offload_v1.py): layer N - 1 is released only at the last
  // layer's commit and reloaded at the first backward step: L - N + 1 layers at the peak.
  ASSERT_TRUE(apply_environment(s, "NVTE_CPU_OFFLOAD_V1", "1"));
  EXPECT_EQ(base - activations(s), 2 * kLayer - kLayer);
}

// The default path's reload window: when the offloaded early layers outweigh the last ones
// they replace in backward, the window exceeds the end of the forward. Layers 0-1 with an MLP
// of 8192 keep 224 MiB, layers 2-3 192 MiB: two layers into the backward, layers 0 and 1 are back
// (448) and layers 2 and 3 freed (384): 64 MiB more than the 2 kept layers.
TEST_F(Offload, LayerOffloadReloadWindowOfUnevenLayers) {
  ModelSpec m = test_model();
  m.layers[0].mlp.ffn_hidden_size = 8192;
  m.layers[1].mlp.ffn_hidden_size = 8192;
  const std::int64_t base = run(m, test_setup()).stages.at(0).activation_bytes;
  TrainingSetup s = test_setup();
  s.activation_offload.cpu_offloading_num_layers = 2;
  const StageEstimate st = run(m, s).stages.at(0);
  EXPECT_EQ(base - st.activation_bytes, 2 * 224 * kMiB - 64 * kMiB);
  EXPECT_EQ(component(st, "activations/offload_reload_window"), 64 * kMiB);
}

TEST_F(Offload, WhatMegatronRefuses) {
  auto refused = [&](const TrainingSetup& s, const std::string& message) {
    try {
      (void)run(s);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const LayoutError& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr(message));
    }
  };
  TrainingSetup s = fine_grained(kOffloadCoreAttn);
  s.activation_offload.cpu_offloading_num_layers = 1;
  refused(s, "fine_grained_activation_offloading cannot be enabled with cpu_offloading.");
  refused(fine_grained(kOffloadAttnProj), "attn_proj cannot be set to offload_modules alone without core_attn");
  refused(fine_grained(0), "needs --offload-modules");
  refused(fine_grained(kOffloadFusedGroupMlp), "fused_group_mlp requires use_transformer_engine_op_fuser.");
  s = fine_grained(kOffloadMoeAct);
  s.recompute.granularity = RecomputeGranularity::kSelective;
  s.recompute.modules = kRecomputeMoe;
  refused(s, "Cannot offload {'moe_act'} while recomputing the entire MoE layer.");
  s = fine_grained(kOffloadCoreAttn);
  s.transformer_engine = false;
  refused(s, "only supported with transformer_engine implementation");
  s = fine_grained(kOffloadCoreAttn);
  s.activation_offload.fraction = 1.5;
  refused(s, "activation_offload_fraction must be in range [0, 1].");
  s = test_setup();
  s.activation_offload.cpu_offloading_num_layers = 4;
  refused(s, "CPU offloading can be done only for layers less than 4");
  s.activation_offload.cpu_offloading_num_layers = 1;
  s.recompute.granularity = RecomputeGranularity::kSelective;
  refused(s, "CPU offloading does not work when activation recomputation is enabled");
  s = test_setup();
  s.activation_offload.cpu_offloading = true;
  s.parallel.pp = 2;
  s.parallel.world_size = 2;
  refused(s, "Currently there is no support for Pipeline parallelism with CPU offloading");
  s = test_setup();
  s.activation_offload.cpu_offloading_num_layers = 1;
  s.activation_offload.cpu_offloading_activations = false;
  refused(s, "CPU Offloading is enabled while it is not mentioned what to offload (weights/activations)");
  // Only weights: TE offloads nothing (weight offloading is deprecated, a no-op).
  s.activation_offload.cpu_offloading_weights = true;
  EXPECT_EQ(activations(s), activations(test_setup()));
  try {
    (void)parse_offload_modules("core_attn mlp");
    ADD_FAILURE() << "mlp accepted";
  } catch (const UsageError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("Invalid choices for offload_modules: {'mlp'}."));
  }
}

// The plugins name the group whose context saves each term (multi_latent_attention.py,
// transformer_layer.py, moe/experts.py).
TEST_F(Offload, MlaAndMoeTermsNameTheirGroups) {
  ModelSpec m = test_model();
  LayerSpec& l = m.layers[0];
  l.attention.kind = "mla";
  l.attention.q_lora_rank = 512;
  l.attention.kv_lora_rank = 256;
  l.attention.qk_head_dim = 64;
  l.attention.qk_pos_emb_head_dim = 32;
  l.attention.v_head_dim = 64;
  l.mlp.kind = "moe";
  l.mlp.num_experts = 8;
  l.mlp.top_k = 2;
  l.mlp.expert_ffn_hidden_size = 512;
  TrainingSetup s = test_setup();
  BlockContext ctx{m, l, s};
  ctx.tokens = ctx.local_tokens = 2048;
  BlockActivations attn, moe;
  registry_.find_layer_model("mla")->activations(ctx, attn);
  registry_.find_layer_model("moe")->activations(ctx, moe);
  auto module_of = [](const BlockActivations& a, std::string_view name) -> std::int64_t {
    for (const auto& t : a.saved)
      if (t.name == name) return t.module;
    return -1;
  };
  EXPECT_EQ(module_of(attn, "attention/input_norm_input"), kOffloadAttnNorm);
  EXPECT_EQ(module_of(attn, "attention/q_latent"), kOffloadQkvLinear);
  EXPECT_EQ(module_of(attn, "attention/q"), kOffloadCoreAttn);
  EXPECT_EQ(module_of(attn, "attention/scores"), kOffloadCoreAttn);
  EXPECT_EQ(module_of(attn, "attention/output"), kOffloadAttnProj);
  EXPECT_EQ(module_of(moe, "moe/norm_input"), kOffloadMlpNorm);
  EXPECT_EQ(module_of(moe, "moe/router"), 0);
  EXPECT_EQ(module_of(moe, "moe/expert_fc1_input"), kOffloadExpertFc1);
  EXPECT_EQ(module_of(moe, "moe/expert_fc1_output"), kOffloadMoeAct);
  EXPECT_EQ(module_of(moe, "moe/expert_activation_output"), 0);  // linear_fc2 runs outside moe_act
  for (const auto* a : {&attn, &moe})
    for (const auto& t : a->saved) EXPECT_GT(t.tensor_elements, 0) << t.name;
}

// ---- the optimizer (hybrid_optimizer.py, distrib_optimizer.py) ---------------------------------

class OptimizerOffload : public Offload {
 protected:
  // DP 2: each parameter's optimizer state is split in two.
  StageEstimate stage(void (*tweak)(TrainingSetup&)) {
    TrainingSetup s;
    s.parallel.world_size = 2;
    tweak(s);
    return run(test::gpt_model(4, 1024, 16), s).stages.at(0);
  }
};

// With the precision-aware optimizer the hybrid optimizer holds an fp32 copy of each bf16 shard
// and fp32 moments for its GPU share (param_update_in_fp32), the rest on the host: 25 % on the
// host leaves 0.75 x (4 + 4 + 4) / 2 = 4.5 B per parameter, where TE FusedAdam alone keeps
// 16-bit remainders: (2 + 4 + 4) / 2 = 5.
TEST_F(OptimizerOffload, PrecisionAwareMovesMasterWeightsAndMoments) {
  const StageEstimate fused = stage([](TrainingSetup& s) { s.optimizer.precision_aware = true; });
  EXPECT_EQ(fused.optimizer_bytes, 5 * fused.parameters);
  const StageEstimate hybrid = stage([](TrainingSetup& s) {
    s.optimizer.precision_aware = true;
    s.optimizer.cpu_offload_fraction = 0.25;
  });
  EXPECT_NEAR(static_cast<double>(hybrid.optimizer_bytes), 4.5 * static_cast<double>(hybrid.parameters), 4.0);
  EXPECT_EQ(hybrid.step_only_bytes, 0);  // fp32 gradients: no copies
  // --exp-avg-dtype does not reach the hybrid optimizer's inner Adam.
  const StageEstimate bf16 = stage([](TrainingSetup& s) {
    s.optimizer.precision_aware = true;
    s.optimizer.exp_avg = s.optimizer.exp_avg_sq = DType::kBF16;
    s.optimizer.cpu_offload_fraction = 0.25;
  });
  EXPECT_EQ(bf16.optimizer_bytes, hybrid.optimizer_bytes);
  // --overlap-cpu-optimizer-d2h-h2d: the same bytes on other streams.
  const StageEstimate overlap = stage([](TrainingSetup& s) {
    s.optimizer.precision_aware = true;
    s.optimizer.cpu_offload_fraction = 0.25;
    s.optimizer.overlap_cpu_d2h_h2d = true;
  });
  EXPECT_EQ(overlap.total_bytes, hybrid.total_bytes);
}

// Without it (megatron.core allows it; Megatron-LM's arguments.py does not) the distributed
// optimizer's fp32 main params stay on the GPU and the hybrid optimizer offloads the moments of
// its host share: 4 / 2 + 0.75 x 8 / 2 = 5 B per parameter.
TEST_F(OptimizerOffload, WithoutPrecisionAwareTheMainParamsStay) {
  const StageEstimate st = stage([](TrainingSetup& s) { s.optimizer.cpu_offload_fraction = 0.25; });
  EXPECT_NEAR(static_cast<double>(st.optimizer_bytes), 5.0 * static_cast<double>(st.parameters), 4.0);
  auto megatron = [](const std::string& text) {
    return setup_from_megatron_args(parse_megatron_args(text, "test"), TrainingSetup{});
  };
  try {
    (void)megatron("--use-distributed-optimizer --optimizer-cpu-offload --optimizer-offload-fraction 0.5");
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("must be used in conjunction with `--use-precision-aware-optimizer`"));
  }
  EXPECT_DOUBLE_EQ(megatron("--use-distributed-optimizer --use-precision-aware-optimizer --optimizer-cpu-offload "
                            "--optimizer-offload-fraction 0.5")
                       .optimizer.cpu_offload_fraction,
                   0.5);
}

}  // namespace
}  // namespace mme
