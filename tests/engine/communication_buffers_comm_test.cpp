// Communication overlap and its buffers, each checked against a value worked out by hand from
// the Megatron-LM / Transformer Engine code it models: expert capacity and token dropping
// (moe_utils.py get_capacity, router.py apply_router_token_dropping), the flex dispatcher's
// backends (token_dispatcher.py _DeepepManager / _HybridEPManager, fused_a2a.py), shared-expert
// overlap (shared_experts.py), TE's userbuffers (module/base.py initialize_ub), the data-parallel
// buckets (param_and_grad_buffer.py) and the combined 1F1B schedule (combined_1f1b.py), with
// Megatron-LM's refusals of each.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/engine/pipeline.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/error.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kLayers = 4, kHidden = 1024, kSeq = 4096;

// 4 layers, h 1024, 16 heads, GELU (not gated); MoE MLP of 8 experts, top-2, F 1024.
ModelSpec moe_model(std::int64_t shared = 0) {
  ModelSpec m = test::gpt_model(kLayers, kHidden, 16);
  for (auto& l : m.layers) {
    l.mlp.kind = "moe";
    l.mlp.num_experts = 8;
    l.mlp.top_k = 2;
    l.mlp.expert_ffn_hidden_size = 1024;
    l.mlp.shared_expert_ffn_hidden_size = shared;
  }
  return m;
}

class Communication : public ::testing::Test {
 protected:
  void SetUp() override { test::register_layer_models(registry_); }
  Estimate run(const ModelSpec& m, const TrainingSetup& s, bool layers = false) {
    EstimateOptions o;
    o.compute_capability = 90;
    o.layer_breakdown = layers;
    return Estimator(m, registry_).run(s, o);
  }
  // The named component of the peak stage (all layers, every micro-batch in flight).
  std::int64_t component(const ModelSpec& m, const TrainingSetup& s, const std::string& name) {
    return test::component_sum(run(m, s).peak(), name);
  }
  // One MoE layer's busiest moment (LayerKindEstimate::transient_bytes).
  std::int64_t layer_transient(const ModelSpec& m, const TrainingSetup& s) {
    return run(m, s, true).layer_kinds.at(0).transient_bytes;
  }
  Registry registry_;
};

TrainingSetup single_gpu() {
  TrainingSetup s;
  s.parallel.world_size = 1;
  return s;
}

// get_capacity(T_l x k, E, cf) = ceil(4096 x 2 / 8 x cf) tokens per expert from each routing
// rank; dropless routing would give every rank T_l x k = 8192 tokens.
TEST_F(Communication, CapacityFactorDropsTokensBeyondTheCapacity) {
  const ModelSpec m = moe_model();
  TrainingSetup s = single_gpu();
  const std::string fc1 = "activations/moe/expert_fc1_input";  // bf16 [N, h] per layer
  EXPECT_EQ(component(m, s, fc1), kLayers * 2 * 8192 * kHidden);
  // cf 0.5: capacity 512, N = 512 x 8 experts = 4096 (half the tokens dropped).
  s.moe_capacity_factor = 0.5;
  EXPECT_EQ(component(m, s, fc1), kLayers * 2 * 4096 * kHidden);
  // cf 2: capacity 2048, above the even share of 1024: nothing is dropped.
  s.moe_capacity_factor = 2.0;
  EXPECT_EQ(component(m, s, fc1), kLayers * 2 * 8192 * kHidden);
  // Padding to capacity: every expert takes its capacity, 2048 x 8.
  s.moe_pad_to_capacity = true;
  EXPECT_EQ(component(m, s, fc1), kLayers * 2 * 16384 * kHidden);
  // cf 1.3: capacity ceil(1331.2) = 1332, padded: 1332 x 8 = 10656.
  s.moe_capacity_factor = 1.3;
  EXPECT_EQ(component(m, s, fc1), kLayers * 2 * 10656 * kHidden);
}

// HybridEP counts TP x E experts (_HybridEPManager.setup_metadata): with ETP 2 the capacity is
// ceil(T_l x k / (2 x 8) x cf), and a rank's experts take capacity x ETP x E.
TEST_F(Communication, HybridEpCapacityCountsTheTpCopiesOfTheExperts) {
  const ModelSpec m = moe_model();
  TrainingSetup s;
  s.parallel.world_size = 2;
  s.parallel.tp = 2;  // SP: T_l = 2048, ETP = TP = 2
  s.dispatcher = TokenDispatcher::kFlex;
  s.comm.flex_backend = FlexBackend::kHybridEP;
  s.moe_capacity_factor = 1.0;
  s.moe_pad_to_capacity = true;
  // capacity ceil(2048 x 2 / 16) = 256; N = 256 x 2 x 8 = 4096 tokens.
  EXPECT_EQ(component(m, s, "activations/moe/expert_fc1_input"), kLayers * 2 * 4096 * kHidden);
  // The alltoall dispatcher: ceil(2048 x 2 / 8) = 512; N = 512 x 2 x 8 = 8192.
  s.dispatcher = TokenDispatcher::kAllToAll;
  EXPECT_EQ(component(m, s, "activations/moe/expert_fc1_input"), kLayers * 2 * 8192 * kHidden);
}

// DeepEP: torch.topk keeps int64 indices [T_l, ETP x k]; HybridEP writes the permuted tokens
// straight from the dispatch, one [N, h] fewer at the busiest moment.
TEST_F(Communication, FlexBackendsDifferInTheirIndicesAndTheirDispatchCopies) {
  const ModelSpec m = moe_model();
  TrainingSetup s;
  s.parallel.world_size = 2;
  s.parallel.ep = 2;
  const std::int64_t alltoall = layer_transient(m, s);
  EXPECT_EQ(component(m, s, "activations/moe/deepep_topk_indices"), 0);
  s.dispatcher = TokenDispatcher::kFlex;  // DeepEP, Megatron-LM's default backend
  EXPECT_EQ(component(m, s, "activations/moe/deepep_topk_indices"), kLayers * 8 * kSeq * 2);
  // N = 4096 x 2 = 8192 tokens: 2 x 8192 x 1024 x 2 (send, receive) + 2 x 8192 x 1024 (fc1 out).
  EXPECT_EQ(layer_transient(m, s), alltoall);
  EXPECT_EQ(alltoall, 2 * 8192 * kHidden * 2 + 2 * 8192 * 1024);
  s.comm.flex_backend = FlexBackend::kHybridEP;
  EXPECT_EQ(component(m, s, "activations/moe/deepep_topk_indices"), 0);
  EXPECT_EQ(layer_transient(m, s), alltoall - 2 * 8192 * kHidden);
  // Their communication buffers are DeepEP's own: an assumption, not a term.
  bool named = false;
  for (const auto& a : run(m, s).assumptions) named = named || a.find("HybridEPBuffer") != std::string::npos;
  EXPECT_TRUE(named);
}

// Megatron-LM's spellings: --moe-enable-deepep is the deprecated name of the deepep backend and
// needs the flex dispatcher; ncclep is Megatron-LM's, not modelled here.
TEST(CommunicationFlags, MegatronSpellingsOfTheFlexBackend) {
  auto megatron = [](const std::string& text) {
    return setup_from_megatron_args(parse_megatron_args(text, "test"), TrainingSetup{});
  };
  const TrainingSetup h =
      megatron("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --tp-comm-overlap");
  EXPECT_EQ(h.comm.flex_backend, FlexBackend::kHybridEP);
  EXPECT_TRUE(h.comm.tp_comm_overlap);
  EXPECT_EQ(megatron("--moe-token-dispatcher-type flex --moe-enable-deepep").comm.flex_backend, FlexBackend::kDeepEP);
  EXPECT_THROW((void)megatron("--moe-enable-deepep"), UsageError);  // the default dispatcher is allgather
  EXPECT_THROW((void)megatron("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
                              "--moe-enable-deepep"),
               UsageError);
  try {
    (void)megatron("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend ncclep");
    ADD_FAILURE() << "ncclep accepted";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--moe-flex-dispatcher-backend: ncclep"));
    EXPECT_THAT(e.what(), HasSubstr("not modelled"));
  }
}

TEST_F(Communication, FlexRefusalsAreMegatronsOwn) {
  const ModelSpec m = moe_model();
  TrainingSetup s = single_gpu();
  s.dispatcher = TokenDispatcher::kFlex;
  try {
    (void)run(m, s);
    ADD_FAILURE() << "DeepEP on one rank accepted";
  } catch (const LayoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("DeepEP dispatcher requires TPxEP > 1"));
  }
  s.parallel.world_size = 2, s.parallel.ep = 2;
  s.moe_capacity_factor = 1.0, s.moe_pad_to_capacity = true;
  EXPECT_THROW((void)run(m, s), LayoutError);
  s.comm.flex_backend = FlexBackend::kHybridEP;  // HybridEP pads to capacity
  EXPECT_NO_THROW((void)run(m, s));
  // A dense model builds no dispatcher: nothing to refuse.
  TrainingSetup dense = single_gpu();
  dense.dispatcher = TokenDispatcher::kFlex;
  EXPECT_NO_THROW((void)run(test::gpt_model(2, 1024, 16), dense));
}

// shared_experts.py: overlapped shared experts gather their input themselves and TE keeps the
// gathered [T, h] (bf16, set_save_original_input); they run outside the shared_experts
// checkpoint; their backward runs beside the routed experts' on the side stream.
TEST_F(Communication, SharedExpertOverlapKeepsTheGatheredInputAndAddsTheWorkingSets) {
  const std::int64_t S = 512;
  const ModelSpec m = moe_model(S);
  TrainingSetup s;
  s.parallel.world_size = 2;
  s.parallel.tp = 2;  // SP: T = 4096, T_l = 2048, ETP 2
  const std::string gathered = "activations/moe/shared_fc1_gathered_input";
  const std::int64_t apart = layer_transient(m, s);
  EXPECT_EQ(component(m, s, gathered), 0);
  s.comm.shared_expert_overlap = true;
  EXPECT_EQ(component(m, s, gathered), kLayers * 2 * kSeq * kHidden);
  // Routed: N = 2048 x 2 x 2 = 8192; 2 x 8192 x 1024 x 2 + 2 x 8192 x 1024 / 2. Shared:
  // 2 x 4096 x (512 + 512) / 2 + 2 x 4096 x 1024. Apart the larger, overlapped the sum.
  const std::int64_t routed = 2 * 8192 * kHidden * 2 + 2 * 8192 * 1024 / 2;
  const std::int64_t shared = 2 * kSeq * (S + S) / 2 + 2 * kSeq * kHidden;
  EXPECT_EQ(apart, std::max(routed, shared));
  EXPECT_EQ(layer_transient(m, s), routed + shared);
  // transformer_config.py: not with shared_experts recompute, which without the overlap drops the
  // shared experts' fc1 and activation outputs.
  s.recompute.granularity = RecomputeGranularity::kSelective;
  s.recompute.modules = kRecomputeSharedExperts;
  try {
    (void)run(m, s);
    ADD_FAILURE() << "shared_experts recompute with the overlap accepted";
  } catch (const LayoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("shared_experts recompute cannot work with --moe-shared-expert-overlap"));
  }
  s.comm.shared_expert_overlap = false;
  EXPECT_EQ(component(m, s, "activations/moe/shared_fc1_output"), 0);
  s.recompute = {};
  // transformer_config.py: not with the allgather dispatcher.
  s.comm.shared_expert_overlap = true;
  s.dispatcher = TokenDispatcher::kAllGather;
  try {
    (void)run(m, s);
    ADD_FAILURE() << "allgather accepted";
  } catch (const LayoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("moe_shared_expert_overlap only works with alltoall or flex"));
  }
  EXPECT_NO_THROW((void)run(moe_model(0), s));  // without shared experts the switch does nothing
}

// initialize_ub: 12 buffers of [seq x micro-batch / CP, h] = [4096, 1024]; bf16, or under FP8
// uint8 for the 8 all-gather buffers. Outside PyTorch's allocator: the bound, not the estimate.
TEST_F(Communication, TpCommOverlapUserbuffersAreInTheBoundOnly) {
  const ModelSpec m = test::gpt_model(kLayers, kHidden, 16);
  TrainingSetup s;
  s.parallel.world_size = 2;
  s.parallel.tp = 2;
  const Estimate plain = run(m, s);
  s.comm.tp_comm_overlap = true;
  const Estimate ub = run(m, s);
  const std::int64_t buffer = kSeq * 1 * kHidden;
  EXPECT_EQ(ub.peak().total_bytes, plain.peak().total_bytes);
  EXPECT_EQ(ub.upper_bytes() - plain.upper_bytes(), 12 * 2 * buffer);
  EXPECT_EQ(ub.peak().outside_allocator_bytes, 12 * 2 * buffer);
  ASSERT_FALSE(ub.bound_terms.empty());
  EXPECT_THAT(ub.bound_terms.front(), HasSubstr("TE userbuffers of --tp-comm-overlap: 0.09 GiB"));
  s.micro_batch_size = 2;  // the buffers follow the micro-batch
  EXPECT_EQ(run(m, s).peak().outside_allocator_bytes, 12 * 2 * 2 * buffer);
  s.micro_batch_size = 1;
  s.precision = Precision::kFP8;
  EXPECT_EQ(run(m, s).peak().outside_allocator_bytes, (8 * 1 + 4 * 2) * buffer);
  // arguments.py: sequence parallelism is required (and turned off with TP 1).
  s.precision = Precision::kBF16;
  s.parallel.sequence_parallel = false;
  try {
    (void)run(m, s);
    ADD_FAILURE() << "TP overlap without SP accepted";
  } catch (const LayoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("can happen only when sequence parallelism is enabled"));
  }
  TrainingSetup one = single_gpu();
  one.comm.tp_comm_overlap = true;
  EXPECT_THROW((void)run(m, one), LayoutError);
}

// param_and_grad_buffer.py with the distributed optimizer: each bucket's end padded to
// lcm(DP, 128) elements in the fp32 gradient (4 B) and bf16 parameter (2 B) buffers; buckets of
// --ddp-bucket-size on the first stage with --overlap-grad-reduce.
TEST_F(Communication, OverlappedGradReduceBoundsTheBucketPadding) {
  const ModelSpec m = test::gpt_model(2, kHidden, 16);
  TrainingSetup s;
  s.parallel.world_size = 8;  // DP 8
  const Estimate plain = run(m, s);
  const std::int64_t params = plain.peak().parameters;  // all dense, one buffer
  s.comm.overlap_grad_reduce = true;
  // Default bucket max(4e7, 1e6 x 8) = 4e7 elements > params: one bucket, 127 elements of padding.
  ASSERT_LT(params, 40000000);
  Estimate e = run(m, s);
  EXPECT_EQ(e.peak().total_bytes, plain.peak().total_bytes);
  EXPECT_EQ(e.peak().bucket_padding_bytes, 127 * (4 + 2));
  EXPECT_EQ(e.upper_bytes() - plain.upper_bytes(), 127 * (4 + 2));
  // Buckets of 1e6 elements: at most floor(params / 1e6) + 1 of them.
  s.comm.ddp_bucket_size = 1000000;
  EXPECT_EQ(run(m, s).peak().bucket_padding_bytes, (params / 1000000 + 1) * 127 * 6);
  // --ddp-pad-buckets-for-high-nccl-busbw: lcm(8, 128, 2^16) = 65536.
  s.comm.pad_buckets_for_nccl = true;
  EXPECT_EQ(run(m, s).peak().bucket_padding_bytes, (params / 1000000 + 1) * 65535 * 6);
  // No distributed optimizer: no padding (_pad_end_of_bucket).
  s.optimizer.distributed = false;
  EXPECT_EQ(run(m, s).peak().bucket_padding_bytes, 0);
  // arguments.py: the parameter all-gather overlaps only with the gradients'.
  s.optimizer.distributed = true;
  s.comm.overlap_grad_reduce = false;
  s.comm.overlap_param_gather = true;
  try {
    (void)run(m, s);
    ADD_FAILURE() << "--overlap-param-gather alone accepted";
  } catch (const LayoutError& e2) {
    EXPECT_THAT(e2.what(), HasSubstr("Must use --overlap-param-gather with --overlap-grad-reduce"));
  }
  s.comm.overlap_grad_reduce = true;
  s.optimizer.distributed = false;
  EXPECT_THROW((void)run(m, s), LayoutError);  // needs the distributed optimizer
}

// combined_1f1b.py: the forward of the next micro-batch reaches layer j's attention while layer
// L-1-j's MLP backward runs: one attention block more than a micro-batch's layers, and the MoE
// block's backward meets the next micro-batch's norm input and output and router tensors.
TEST_F(Communication, EpOverlapAddsOneAttentionBlockAndThePreDispatchTensors) {
  const ModelSpec m = moe_model();
  TrainingSetup s;
  s.parallel.world_size = 2;
  s.parallel.ep = 2;
  const Estimate plain = run(m, s, true);
  std::int64_t attention = 0;
  for (const auto& c : plain.layer_kinds.at(0).components)
    if (c.name.rfind("activations/attention/", 0) == 0) attention += c.bytes;
  ASSERT_GT(attention, 0);
  s.comm.ep_overlap = true;
  const Estimate e = run(m, s, true);
  EXPECT_EQ(test::component_sum(e.peak(), "activations/ep_overlap_forward_attention"), attention);
  // T_l = 4096: bf16 norm input and output 2 x 2 x 4096 x 1024, router 4096 x 8 x (2 + 4 + 1).
  EXPECT_EQ(e.layer_kinds.at(0).transient_bytes - plain.layer_kinds.at(0).transient_bytes,
            2 * 2 * kSeq * kHidden + kSeq * 8 * (2 + 4 + 1));
  EXPECT_EQ(e.peak().inflight_microbatches, 1);
  // Megatron-LM's refusals.
  auto refused = [&](TrainingSetup bad, const char* message) {
    try {
      (void)run(m, bad);
      ADD_FAILURE() << message;
    } catch (const LayoutError& err) {
      EXPECT_THAT(err.what(), HasSubstr(message));
    }
  };
  TrainingSetup bad = s;
  bad.parallel.ep = 1;
  refused(bad, "only supported with expert model parallelism");
  bad = s;
  bad.recompute.granularity = RecomputeGranularity::kFull;
  refused(bad, "disable full recomputation");
  bad = s;
  bad.comm.shared_expert_overlap = true;
  refused(bad, "disable moe_shared_expert_overlap");
  bad = s;
  bad.parallel.world_size = 4, bad.parallel.pp = 2;
  refused(bad, "virtual_pipeline_model_parallel_size must be specified");
  bad.parallel.vpp = 2;
  EXPECT_NO_THROW((void)run(m, bad));
}

// schedules.py get_pp_rank_microbatches: with the overlap the interleaved warmup is one forward
// pass longer. PP 4, VPP 2, rank 0, G = 4: 2 x 3 + 4 + 1 = 11 chunk passes without, 12 with; in
// groups of 4 per chunk: [7, 4] and [8, 4].
TEST(CommunicationSchedule, EpOverlapAddsAWarmupForwardPass) {
  EXPECT_EQ(inflight_microbatches(4, 2, 0, 40), (std::vector<std::int64_t>{7, 4}));
  EXPECT_EQ(inflight_microbatches(4, 2, 0, 40, 0, 1), (std::vector<std::int64_t>{8, 4}));
}

// The engine passes the extra pass on: PP 2, VPP 2, rank 0, the pipeline full (G = 2):
// 2 + 2 + 1 = 5 chunk passes, [3, 2]; with the overlap 6, [4, 2].
TEST_F(Communication, EpOverlapHoldsOneMoreMicroBatchWithInterleaving) {
  const ModelSpec m = moe_model();
  TrainingSetup s;
  s.parallel.world_size = 4;
  s.parallel.pp = 2;
  s.parallel.vpp = 2;
  s.parallel.ep = 2;
  EXPECT_EQ(run(m, s).stages.at(0).inflight_microbatches, 3);
  s.comm.ep_overlap = true;
  EXPECT_EQ(run(m, s).stages.at(0).inflight_microbatches, 4);
}

}  // namespace
}  // namespace mme
