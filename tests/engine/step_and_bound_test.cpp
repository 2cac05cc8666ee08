// The mechanisms of the accuracy work, each checked against a value worked out by hand from
// the Megatron-LM / Transformer Engine code it models: the two phases of a step, Transformer
// Engine's attention choice, the loss paths, the interleaved schedule's micro-batch groups,
// deferred output-layer wgrads, and the upper bound.
#include <gtest/gtest.h>

#include <mme/engine/pipeline.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/sdk/error.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

class StepAndBound : public ::testing::Test {
 protected:
  void SetUp() override { test::register_layer_models(registry_); }
  Estimate run(const ModelSpec& m, const TrainingSetup& s, int compute_capability = 90) {
    EstimateOptions o;
    o.compute_capability = compute_capability;
    return Estimator(m, registry_).run(s, o);
  }
  Registry registry_;
};

// distrib_optimizer.py: bf16 gradients get an fp32 copy (4 bytes per sharded parameter) in the
// optimizer step; it never meets the activations.
TEST_F(StepAndBound, Fp32CopiesOfBf16GradientsLiveOnlyInTheOptimizerStep) {
  const ModelSpec m = test::gpt_model(4, 1024, 16);
  TrainingSetup s;
  s.parallel.world_size = 2;
  s.optimizer.main_grads = DType::kBF16;
  const Estimate e = run(m, s);
  const auto& st = e.peak();
  const std::int64_t shard = (st.parameters * 4 + 1) / 2;  // DP 2, ceil
  EXPECT_EQ(st.step_only_bytes, shard);
  EXPECT_EQ(st.forward_backward_bytes, st.static_bytes - shard + st.activation_bytes);
  EXPECT_EQ(st.optimizer_step_bytes, st.static_bytes);
  EXPECT_EQ(st.total_bytes, std::max(st.forward_backward_bytes, st.optimizer_step_bytes));
  // fp32 gradients: `.float()` is the same tensor, nothing is copied.
  s.optimizer.main_grads = DType::kFP32;
  EXPECT_EQ(run(m, s).peak().step_only_bytes, 0);
}

// TE get_attention_backend: of the kernels its filters leave it selects flash-attn before cuDNN
// fused attention, except from sm90 on; deterministic training on sm80 drops cuDNN fused attention.
TEST(AttentionChoice, FollowsTransformerEnginesFilters) {
  TrainingSetup s;
  EXPECT_EQ(resolve_attention(s, 80).backend, AttentionBackend::kFlash);  // flash-attn assumed installed
  EXPECT_EQ(resolve_attention(s, 90).backend, AttentionBackend::kFused);  // "FusedAttention preference on Hopper+"
  EXPECT_EQ(resolve_attention(s, 100).backend, AttentionBackend::kFused);
  EXPECT_FALSE(resolve_attention(s, 100).may_use_flash_attn);
  s.attention_env.flash_attn_installed = false;
  EXPECT_EQ(resolve_attention(s, 80).backend, AttentionBackend::kFused);
  s.attention_env.flash_attn_installed = std::nullopt;
  s.attention_env.flash_enabled = false;  // NVTE_FLASH_ATTN=0
  EXPECT_EQ(resolve_attention(s, 80).backend, AttentionBackend::kFused);
  s.attention_env.flash_enabled = true;
  s.attention_env.deterministic = true;
  EXPECT_EQ(resolve_attention(s, 90).backend, AttentionBackend::kFused);
  EXPECT_FALSE(resolve_attention(s, 90).may_fall_back_to_unfused);
  EXPECT_FALSE(resolve_attention(s, 90).may_use_flash_attn);
  // Blackwell: deterministic cuDNN attention is not listed there; the bound takes flash-attn.
  EXPECT_EQ(resolve_attention(s, 100).backend, AttentionBackend::kFused);
  EXPECT_TRUE(resolve_attention(s, 100).may_use_flash_attn);
  const AttentionChoice unknown = resolve_attention(s, 80);
  EXPECT_EQ(unknown.backend, AttentionBackend::kFlash);
  EXPECT_TRUE(unknown.may_fall_back_to_unfused);
  s.attention_env.flash_attn_installed = false;
  EXPECT_EQ(resolve_attention(s, 80).backend, AttentionBackend::kUnfused);
  EXPECT_FALSE(resolve_attention(s, 100).may_use_flash_attn);  // nothing to fall to
  s.attention_env = {};
  s.attention_env.flash_enabled = false;
  s.attention_env.fused_enabled = false;
  EXPECT_EQ(resolve_attention(s, 90).backend, AttentionBackend::kUnfused);
  s.attention_backend = AttentionBackend::kFlash;  // explicit: as asked
  EXPECT_EQ(resolve_attention(s, 90).backend, AttentionBackend::kFlash);
  s.attention_backend = AttentionBackend::kFused;
  EXPECT_EQ(resolve_attention(s, 80).backend, AttentionBackend::kFused);
  s.transformer_engine = false;  // local: Megatron's DotProductAttention
  EXPECT_EQ(resolve_attention(s, 90).backend, AttentionBackend::kUnfused);
}

// The model's attention in TE's filters: no FlashAttention for an off-by-one or learnable softmax,
// no cuDNN fused attention for sliding windows under the p2p CP exchange.
TEST(AttentionChoice, FollowsWhatTheModelsAttentionRulesOut) {
  ModelSpec m;
  m.layers.resize(2);
  m.layers[0].attention.window = 127;
  m.layers[1].attention.softmax_type = SoftmaxType::kLearnable;
  TrainingSetup s;
  // sm80 prefers flash-attn, which has no learnable softmax: cuDNN fused attention.
  EXPECT_EQ(resolve_attention(s, 80).backend, AttentionBackend::kFlash);
  EXPECT_EQ(resolve_attention(s, 80, &m).backend, AttentionBackend::kFused);
  // Under CP 2 with any exchange but a2a the learnable softmax rules cuDNN out too: unfused, which
  // then refuses CP (GqaBlock.ContextParallelBeyondA2aHasNoBackendForSinks).
  s.parallel.cp = 2;
  const AttentionChoice ring = resolve_attention(s, 90, &m);
  EXPECT_EQ(ring.backend, AttentionBackend::kUnfused);
  EXPECT_NE(ring.reason.find("learnable softmax rules out FlashAttention"), std::string::npos) << ring.reason;
  s.cp_comm_type = CpCommType::kAllGather;
  EXPECT_EQ(resolve_attention(s, 90, &m).backend, AttentionBackend::kUnfused);
  s.cp_comm_type = CpCommType::kA2A;
  EXPECT_EQ(resolve_attention(s, 90, &m).backend, AttentionBackend::kFused);
  // With a vanilla softmax the windowed ring falls to flash-attn.
  m.layers[1].attention.softmax_type = SoftmaxType::kVanilla;
  s.cp_comm_type = CpCommType::kP2P;
  EXPECT_EQ(resolve_attention(s, 90, &m).backend, AttentionBackend::kFlash);
  // An explicit flash backend cannot run the learnable softmax, nor cuDNN under the ring.
  m.layers[1].attention.softmax_type = SoftmaxType::kLearnable;
  s.attention_backend = AttentionBackend::kFlash;
  EXPECT_THROW(resolve_attention(s, 90, &m), UsageError);
  s.attention_backend = AttentionBackend::kFused;
  EXPECT_THROW(resolve_attention(s, 90, &m), UsageError);
  s.cp_comm_type = CpCommType::kA2A;
  EXPECT_EQ(resolve_attention(s, 90, &m).backend, AttentionBackend::kFused);
}

TEST(Environment, LaunchScriptExportsAndDeterministicMode) {
  const MegatronArgs a = parse_megatron_args(
      "export NVTE_FLASH_ATTN=0\nexport NVTE_FUSED_ATTN=0\nCUBLAS_WORKSPACE_CONFIG=:16:8 torchrun pretrain_gpt.py "
      "--num-layers 2 --deterministic-mode",
      "launch.sh");
  ASSERT_EQ(a.env().size(), 3u);
  const TrainingSetup s = setup_from_megatron_args(a, {});
  EXPECT_FALSE(s.attention_env.flash_enabled);
  EXPECT_FALSE(s.attention_env.fused_enabled);
  EXPECT_TRUE(s.attention_env.deterministic);
  EXPECT_EQ(s.cublas_workspace_config, ":16:8");  // the run's own value wins over the default
  EXPECT_EQ(resolve_attention(s, 90).backend, AttentionBackend::kUnfused);
  EXPECT_THROW(setup_from_megatron_args(parse_megatron_args("export NVTE_FLASH_ATTN=2", "x"), {}), UsageError);
  EXPECT_THROW(setup_from_megatron_args(parse_megatron_args("--attention-backend bogus", "x"), {}), UsageError);
  EXPECT_THROW(setup_from_megatron_args(parse_megatron_args("--optimizer madeup", "x"), {}), UsageError);
  EXPECT_THROW(setup_from_megatron_args(parse_megatron_args("--moe-token-dispatcher-type x", "x"), {}), UsageError);
}

// fused_cross_entropy.py and tensor_parallel/cross_entropy.py both keep logits.float().
// Transformer Engine's parallel_cross_entropy as TE 2.11 runs it keeps the bf16 logits with the
// gradient written over them instead (less, where the loss sets the peak: a 32000-word
// vocabulary on 4 layers of 1024); the bound adds the fp32 gradient newer TE writes beside them,
// 4 B x T x V on the loss stage.
TEST_F(StepAndBound, FusedCrossEntropyKeepsTheFp32SoftmaxLikeTheUnfusedPath) {
  const ModelSpec m = test::gpt_model(4, 1024, 16, 32000);
  TrainingSetup s;
  s.parallel.world_size = 1;
  const Estimate unfused = run(m, s);
  s.cross_entropy_fusion = true;
  const Estimate native = run(m, s);
  // The same fp32 logits kept; the compiled graph's second fp32 copy can raise the loss's moment.
  EXPECT_GE(native.peak().total_bytes, unfused.peak().total_bytes);
  EXPECT_EQ(native.peak().te_loss_fp32_gradient_bytes, 0);
  s.cross_entropy_te = true;
  const Estimate te = run(m, s);
  const std::int64_t T = s.seq_length * s.micro_batch_size;
  const std::int64_t V = padded_vocab_size(m.vocab_size, 128, 1);
  EXPECT_LT(te.peak().total_bytes, unfused.peak().total_bytes);
  EXPECT_EQ(te.peak().te_loss_fp32_gradient_bytes, 4 * T * V);
  EXPECT_GE(te.upper_bytes(), te.peak().total_bytes + 4 * T * V);
  bool named = false;
  for (const auto& t : te.bound_terms) named = named || t.find("fp32 gradient beside the logits") != std::string::npos;
  EXPECT_TRUE(named);
}

// schedules.py: warmup = 2 (p - r - 1) + (v - 1) G, plus one; groups of G micro-batches run
// chunk by chunk.
TEST(Schedule, MicroBatchGroupsOfTheInterleavedSchedule) {
  // p 4, v 2, rank 0, G 5: 2*3 + 5 + 1 = 12 passes: 5 of chunk 0, 5 of chunk 1, then 2 of chunk 0.
  const auto g5 = inflight_microbatches(4, 2, 0, 40, 5);
  EXPECT_EQ(g5[0], 7);
  EXPECT_EQ(g5[1], 5);
  // The default group (G = p): 11 passes, 4 + 4 of the first group, 3 more of chunk 0.
  const auto g4 = inflight_microbatches(4, 2, 0, 40);
  EXPECT_EQ(g4[0], 7);
  EXPECT_EQ(g4[1], 4);
  // Two micro-batches only: one group of 2, both chunks hold both.
  const auto two = inflight_microbatches(4, 2, 0, 2);
  EXPECT_EQ(two[0], 2);
  EXPECT_EQ(two[1], 2);
}

// gpt_model.py / layers.py: the last stage keeps k micro-batches of the output layer's input
// [T, h] and logits gradient [T, V/TP] until the pipeline flush.
TEST_F(StepAndBound, DeferredOutputLayerWgradKeepsKMicroBatchesOnTheLastStage) {
  const ModelSpec m = test::gpt_model(4, 1024, 16);
  TrainingSetup s;
  s.parallel.pp = 2;
  s.parallel.world_size = 2;
  s.global_batch_size = 8;
  const Estimate base = run(m, s);
  s.defer_embedding_wgrad = true;
  s.wgrad_deferral_limit = 3;
  const Estimate deferred = run(m, s);
  const std::int64_t T = s.seq_length * s.micro_batch_size;
  const std::int64_t V = padded_vocab_size(m.vocab_size, 128, 1);
  EXPECT_EQ(deferred.stages[1].total_bytes - base.stages[1].total_bytes, 3 * 2 * (T * V + T * m.hidden_size));
  EXPECT_EQ(deferred.stages[0].total_bytes, base.stages[0].total_bytes);
}

// The bound: the allocator's block rounding (up to 1 MiB per live activation tensor above
// 1 MiB) always; with deterministic training on sm80 and flash-attn unknown, the unfused pass.
TEST_F(StepAndBound, TheBoundCoversAllocatorRoundingAndAttentionFallback) {
  const ModelSpec dense = test::gpt_model(4, 1024, 16);
  TrainingSetup s;
  s.parallel.world_size = 1;
  const Estimate d = run(dense, s);
  const auto& st = d.peak();
  EXPECT_GT(st.allocator_slack_bytes, 0);
  EXPECT_EQ(st.allocator_slack_bytes % (1 << 20), 0);
  // The output layer's weight-gradient placeholder, kept by newer Megatron-LM (TE's cache): the
  // tied [V/TP, h] = 128 x 1024 x 2 B on the loss stage.
  EXPECT_EQ(st.cached_output_wgrad_bytes, 128 * 1024 * 2);
  EXPECT_EQ(d.upper_bytes(), std::max(st.total_bytes, st.forward_backward_bytes + st.allocator_slack_bytes) +
                                 st.cached_output_wgrad_bytes);
  ASSERT_EQ(d.bound_terms.size(), 2u);  // the placeholder and the rounding: nothing else is uncertain
  s.attention_env.deterministic = true;
  const Estimate a = run(dense, s, 80);
  s.attention_backend = AttentionBackend::kUnfused;
  const Estimate unfused = run(dense, s, 80);
  EXPECT_EQ(a.upper_bytes(), unfused.peak().forward_backward_bytes + unfused.peak().allocator_slack_bytes +
                                 unfused.peak().cached_output_wgrad_bytes);
  EXPECT_GT(a.upper_bytes(), unfused.peak().total_bytes);
  EXPECT_GT(unfused.peak().total_bytes, a.peak().total_bytes);
}

// Before sm90 TE selects flash-attn over cuDNN (get_attention_backend), whose FlashAttention keeps
// a second [s, b, n * d] copy of each layer's attention output when a micro-batch holds several
// sequences (block_helpers.hpp flash_attn_output_copy_bytes); on Blackwell a deterministic run
// may take it too, which only the bound covers.
TEST_F(StepAndBound, FlashAttnsOutputCopyBeforeHopperAndInTheBlackwellDeterministicBound) {
  const ModelSpec dense = test::gpt_model(4, 1024, 16);
  TrainingSetup s;
  s.parallel.world_size = 1;
  s.seq_length = 2048;
  s.micro_batch_size = 2;
  const Estimate a100 = run(dense, s, 80), h100 = run(dense, s, 90);
  EXPECT_EQ(a100.attention, AttentionBackend::kFlash);
  EXPECT_EQ(h100.attention, AttentionBackend::kFused);
  // 4 layers x [2048 x 2, 1024] bf16 (8 MiB each), one micro-batch in flight.
  EXPECT_EQ(a100.peak().activation_bytes - h100.peak().activation_bytes, 4 * 4096 * 1024 * 2);
  s.attention_env.deterministic = true;
  const Estimate b200 = run(dense, s, 100);
  EXPECT_EQ(b200.peak().total_bytes, h100.peak().total_bytes);
  // The same four copies, each with the allocator rounding the bound allows a live tensor above
  // 1 MiB (1 MiB).
  EXPECT_EQ(b200.upper_bytes() - h100.upper_bytes(), 4 * (4096 * 1024 * 2 + (1 << 20)));
  bool named = false;
  for (const auto& t : b200.bound_terms) named = named || t.find("attention may run on flash-attn") == 0;
  EXPECT_TRUE(named);
}

// Unfused attention cannot run context parallelism (the attention blocks refuse it), so with CP
// a run whose flash attention is uncertain cannot fall back to it: the bound leaves that state
// out and says so, instead of refusing a layout the point estimate accepts (it exited 4).
TEST_F(StepAndBound, TheBoundTakesNoAttentionFallbackTheLayoutCannotReach) {
  const ModelSpec dense = test::gpt_model(4, 1024, 16);
  TrainingSetup s;
  s.parallel.world_size = 2;
  s.parallel.cp = 2;
  s.attention_env.deterministic = true;  // TE's fused backend is out: flash, if flash-attn is installed
  ASSERT_TRUE(resolve_attention(s, 80).may_fall_back_to_unfused);
  const Estimate e = run(dense, s, 80);
  ASSERT_EQ(e.bound_terms.size(), 2u);  // the output layer's cached placeholder and the allocator's rounding
  EXPECT_EQ(e.bound_terms.front().rfind("the output layer's weight-gradient placeholder", 0), 0u)
      << e.bound_terms.front();
  EXPECT_EQ(e.bound_terms.back().rfind("allocator block rounding", 0), 0u) << e.bound_terms.back();
  const auto& st = e.peak();
  EXPECT_EQ(e.upper_bytes(), std::max(st.total_bytes, st.forward_backward_bytes + st.allocator_slack_bytes) +
                                 st.cached_output_wgrad_bytes);
  bool named = false;
  for (const auto& a : e.assumptions)
    named = named || a.find("no unfused-attention fallback in the upper bound: context parallelism") == 0;
  EXPECT_TRUE(named);
  // Without CP the same setup keeps the fallback in the bound.
  s.parallel.world_size = 1;
  s.parallel.cp = 1;
  EXPECT_EQ(run(dense, s, 80).bound_terms.size(), 3u);  // and the fallback
}

// The MoE block's routed tokens grow by the imbalance in the bound's pass only.
TEST_F(StepAndBound, RoutingImbalanceRaisesTheBoundNotTheEstimate) {
  ModelSpec moe = test::gpt_model(4, 1024, 16);
  for (auto& l : moe.layers) {
    l.mlp.kind = "moe";
    l.mlp.num_experts = 8;
    l.mlp.top_k = 2;
    l.mlp.expert_ffn_hidden_size = 1024;
  }
  TrainingSetup s;
  s.parallel.world_size = 1;
  const Estimate balanced = run(moe, s);
  s.moe_routing_imbalance = 2.0;
  const Estimate skewed = run(moe, s);
  EXPECT_EQ(skewed.peak().total_bytes, balanced.peak().total_bytes);
  EXPECT_GT(skewed.upper_bytes(), balanced.upper_bytes());
  // Padding to capacity fixes the token count: no imbalance term.
  s.moe_capacity_factor = 1.0;
  s.moe_pad_to_capacity = true;
  for (const auto& t : run(moe, s).bound_terms) EXPECT_EQ(t.find("imbalance"), std::string::npos) << t;
}

// --moe-router-force-load-balancing (moe_utils.py apply_random_logits): tokens route independently
// and every expert is alike. 128 experts, top-8, EP 16, 4096 tokens per rank (TP 1): a token sends
// a rank 8/16 = 0.5 pairs on average and at most min(8, 128/16) = 8, so its variance is at most
// (8 - 0.5) x 0.5 = 3.75; over the group's n = 4096 x 16 = 65,536 tokens mu = 32,768,
// sigma^2 <= 245,760, sigma = 495.74; z with 16 x Q(z) = 0.001 is 3.8361 (Q(3.8361) = 6.25e-5):
// (mu + z sigma) / mu = 1.05804, printed "1.058".
TEST_F(StepAndBound, ForcedBalancingSizesTheImbalanceFromUniformRouting) {
  ModelSpec moe = test::gpt_model(2, 1024, 16);
  for (auto& l : moe.layers) {
    l.mlp.kind = "moe";
    l.mlp.num_experts = 128;
    l.mlp.top_k = 8;
    l.mlp.expert_ffn_hidden_size = 256;
  }
  TrainingSetup s;
  s.parallel.world_size = 16;
  s.parallel.ep = 16;
  s.seq_length = 4096;
  auto imbalance_term = [&](const Estimate& e) {
    for (const auto& t : e.bound_terms)
      if (t.find("MoE routing imbalance") == 0) return t;
    return std::string();
  };
  EXPECT_NE(imbalance_term(run(moe, s)).find("receives 1.25x"), std::string::npos);
  s.moe_force_load_balancing = true;
  const std::string forced = imbalance_term(run(moe, s));
  EXPECT_NE(forced.find("receives 1.058x"), std::string::npos) << forced;
  EXPECT_NE(forced.find("--moe-router-force-load-balancing"), std::string::npos) << forced;
  s.moe_routing_imbalance = 1.5;  // the user's value wins
  EXPECT_NE(imbalance_term(run(moe, s)).find("receives 1.5x"), std::string::npos);
  s.moe_routing_imbalance.reset();
  s.parallel.ep = 1;  // every expert on every rank: nothing to be unbalanced
  s.parallel.world_size = 16;
  EXPECT_EQ(imbalance_term(run(moe, s)), "");
}

// PyTorch's cuBLAS + cuBLASLt workspaces (CublasHandlePool.cpp), one each: 4096 KiB x 8 = 32 MiB
// on Hopper and, in the releases the newer GB200 golden files ran, Blackwell; 4096 KiB x 2 +
// 16 KiB x 8 = 8320 KiB before. CUBLAS_WORKSPACE_CONFIG=:4096:2 sets 8 MiB everywhere.
// Transformer Engine's own workspace (module/base.py get_workspace): 32 MiB + 1 KiB from Hopper.
TEST_F(StepAndBound, CublasWorkspacesFollowTheArchitecture) {
  const ModelSpec m = test::gpt_model(2, 1024, 16);
  auto torch_ws = [&](int compute_capability, const std::string& config) {
    TrainingSetup s;
    s.cublas_workspace_config = config;
    return test::component_sum(run(m, s, compute_capability).peak(), "other/torch_cublas_workspaces");
  };
  constexpr std::int64_t kMiB = 1024 * 1024;
  EXPECT_EQ(torch_ws(90, ""), 2 * 32 * kMiB);
  EXPECT_EQ(torch_ws(100, ""), 2 * 32 * kMiB);
  EXPECT_EQ(torch_ws(80, ""), 2 * 8320 * 1024);
  EXPECT_EQ(torch_ws(100, ":4096:2"), 2 * 8 * kMiB);
  TrainingSetup s;
  EXPECT_EQ(test::component_sum(run(m, s, 100).peak(), "other/te_cublas_workspace"), 32 * kMiB + 1024);
}

}  // namespace
}  // namespace mme
