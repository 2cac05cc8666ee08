// Engine composition rules: schedules, recompute, MTP placement, layout validation.
#include <gtest/gtest.h>

#include <mme/engine/setup_checks.hpp>
#include <mme/sdk/error.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

class Engine : public ::testing::Test {
 protected:
  void SetUp() override { test::register_layer_models(registry_); }
  Estimate run(const ModelSpec& m, const TrainingSetup& s) { return Estimator(m, registry_).run(s); }
  std::string layout_error(const ModelSpec& m, const TrainingSetup& s) {
    try {
      run(m, s);
    } catch (const LayoutError& e) {
      return e.what();
    }
    return "(no error)";
  }
  Registry registry_;
};

TEST_F(Engine, OneFOneBHoldsPipelineDepthMinusRankMicroBatches) {
  const ModelSpec m = test::gpt_model(8, 1024, 16);
  TrainingSetup s;
  s.parallel.pp = 4;
  s.parallel.world_size = 4;
  const Estimate e = run(m, s);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(e.stages[static_cast<std::size_t>(r)].inflight_microbatches, 4 - r);
  // With only two micro-batches per step, no rank holds more than two.
  s.global_batch_size = 2;
  const Estimate few = run(m, s);
  EXPECT_EQ(few.stages[0].inflight_microbatches, 2);
}

TEST_F(Engine, StageActivationsScaleWithMicroBatchesInFlight) {
  const ModelSpec m = test::gpt_model(8, 1024, 16);
  TrainingSetup s;
  s.parallel.pp = 4;
  s.parallel.world_size = 4;
  const Estimate e = run(m, s);
  // Stage 1 and 2 hold the same two layers; stage 1 has 3 micro-batches in flight, stage 2 has 2.
  const auto layers1 =
      test::component_sum(e.stages[1], "activations/attention/") + test::component_sum(e.stages[1], "activations/mlp/");
  const auto layers2 =
      test::component_sum(e.stages[2], "activations/attention/") + test::component_sum(e.stages[2], "activations/mlp/");
  EXPECT_EQ(layers1 * 2, layers2 * 3);
}

TEST_F(Engine, PeakIsTheLargestStage) {
  const ModelSpec m = test::gpt_model(8, 1024, 16, 256000);
  TrainingSetup s;
  s.parallel.pp = 4;
  s.parallel.world_size = 4;
  const Estimate e = run(m, s);
  std::size_t largest = 0;
  for (std::size_t i = 0; i < e.stages.size(); ++i)
    if (e.stages[i].total_bytes > e.stages[largest].total_bytes) largest = i;
  EXPECT_EQ(e.peak_stage, largest);
}

TEST_F(Engine, BlockRecomputeKeepsInputsOfTheFirstLayersOnly) {
  const ModelSpec m = test::gpt_model(8, 1024, 16);
  TrainingSetup s;
  s.parallel.world_size = 1;
  s.seq_length = 1024;
  const auto none = run(m, s).stages[0];
  s.recompute.granularity = RecomputeGranularity::kFull;
  s.recompute.method = RecomputeMethod::kBlock;
  s.recompute.num_layers = 3;
  const auto block = run(m, s).stages[0];
  const auto per_layer =
      (test::component_sum(none, "activations/attention/") + test::component_sum(none, "activations/mlp/")) / 8;
  EXPECT_EQ(test::component_sum(block, "activations/attention/") + test::component_sum(block, "activations/mlp/"),
            5 * per_layer);
  EXPECT_EQ(test::component_sum(block, "activations/recompute_layer_inputs"), 3 * 2 * 1024 * 1024);
}

TEST_F(Engine, MtpLayersSitOnTheLastStageWithAnEmbeddingCopy) {
  ModelSpec m = test::gpt_model(8, 1024, 16);
  m.mtp_num_layers = 1;
  TrainingSetup s;
  s.parallel.pp = 2;
  s.parallel.world_size = 2;
  const Estimate e = run(m, s);
  EXPECT_EQ(e.stages[1].mtp_layers, 1);
  EXPECT_EQ(e.stages[0].mtp_layers, 0);
  EXPECT_TRUE(e.stages[1].chunks[0].embedding);
  EXPECT_GT(test::component_sum(e.stages[1], "activations/mtp/"), 0);
}

TEST_F(Engine, LayoutErrorsNameTheNumbers) {
  const ModelSpec m = test::gpt_model(12, 1024, 16);
  TrainingSetup s;
  s.parallel.tp = 3;
  s.parallel.world_size = 3;
  EXPECT_NE(layout_error(m, s).find("16 attention heads are not divisible by --tp 3"), std::string::npos);
  s = {};
  s.parallel.pp = 5;
  s.parallel.world_size = 5;
  EXPECT_NE(layout_error(m, s).find("--num-layers-in-last-pipeline-stage"), std::string::npos);
  s = {};
  s.parallel.tp = 2;
  s.parallel.world_size = 6;
  s.parallel.pp = 2;
  EXPECT_NE(layout_error(m, s).find("--num-gpus 6 is not divisible by TP x PP x CP = 2 x 2 x 1 = 4"),
            std::string::npos);
  s = {};
  s.parallel.cp = 2;
  s.parallel.world_size = 2;
  s.seq_length = 4098;
  EXPECT_NE(layout_error(m, s).find("2 x CP"), std::string::npos);
  s = {};
  s.parallel.pp = 13;
  s.parallel.world_size = 13;
  EXPECT_NE(layout_error(m, s).find("more pipeline stages than the model's 12 layers"), std::string::npos);
  s = {};
  s.parallel.ep = 2;
  s.parallel.world_size = 2;
  EXPECT_NE(layout_error(m, s).find("needs a mixture-of-experts model"), std::string::npos);
}

// schedules.py forward_backward_pipelining_with_interleaving: groups of G micro-batches per model
// chunk (default G = PP); a group larger than the micro-batches (ValueError) and a last group of
// fewer than PP (RuntimeError) are refused. Megatron's own example (model_parallel_config.py):
// PP 2, VPP 2, G 3 runs 5 micro-batches (a last group of 2).
TEST_F(Engine, InterleavedScheduleRunsOnlyWholeGroupsOfMicroBatches) {
  EXPECT_TRUE(interleaved_schedule_runs(4, 2, 2));
  EXPECT_FALSE(interleaved_schedule_runs(3, 2, 2));  // a last group of 1
  EXPECT_FALSE(interleaved_schedule_runs(1, 2, 2));  // fewer than a group
  EXPECT_TRUE(interleaved_schedule_runs(5, 2, 3));
  EXPECT_FALSE(interleaved_schedule_runs(7, 2, 3));  // 7 = 2 x 3 + 1
  EXPECT_TRUE(interleaved_schedule_runs(8, 2, 3));   // 8 = 2 x 3 + 2

  const ModelSpec m = test::gpt_model(12, 1024, 16);
  TrainingSetup s;
  s.parallel.pp = 2;
  s.parallel.vpp = 2;
  s.parallel.world_size = 2;
  s.micro_batch_size = 1;
  s.global_batch_size = 3;
  EXPECT_NE(
      layout_error(m, s).find("3 micro-batches leave a last group of 1 in the interleaved schedule's groups of 2"),
      std::string::npos);
  s.global_batch_size = 1;
  EXPECT_NE(layout_error(m, s).find("1 micro-batch (--global-batch-size 1 / (micro-batch 1 x DP 1)) is fewer than "
                                    "the 2"),
            std::string::npos);
  s.global_batch_size = 5;
  s.pipeline.microbatch_group_size = 3;
  EXPECT_EQ(layout_error(m, s), "(no error)");
  s.pipeline.microbatch_group_size = 1;  // smaller than PP: refused by the interleaved schedule
  EXPECT_NE(layout_error(m, s).find("--microbatch-group-size-per-virtual-pipeline-stage 1 is smaller than --pp 2"),
            std::string::npos);
  s.parallel.vpp = 1;  // 1F1B runs any number, and never reads the group size
  EXPECT_EQ(layout_error(m, s), "(no error)");
  s.pipeline.microbatch_group_size.reset();
  s.global_batch_size = 3;
  EXPECT_EQ(layout_error(m, s), "(no error)");
}

// transformer_config.py __post_init__ (uneven PP): a given first/last stage count must be larger
// than 0, and the middle stages must hold layers when there are any ("Mismatch: 0 middle layers
// remaining but 2 middle PP stages available"). arguments.py: no more than one of
// --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank and the
// layout, and no layers per virtual stage with an uneven first or last stage.
TEST_F(Engine, PipelineSplitsMegatronRefusesAreRefused) {
  const ModelSpec m = test::gpt_model(12, 1024, 16);
  TrainingSetup s;
  s.parallel.pp = 4;
  s.parallel.world_size = 4;
  s.pipeline.first_stage_layers = 0;
  EXPECT_NE(layout_error(m, s).find("--num-layers-in-first-pipeline-stage must be larger than 0, got 0"),
            std::string::npos);
  s.pipeline.first_stage_layers = 6;
  s.pipeline.last_stage_layers = 6;
  EXPECT_NE(layout_error(m, s).find("the first/last pipeline stages hold all 12 layers, leaving none for the other 2 "
                                    "pipeline stages"),
            std::string::npos);
  s.pipeline.last_stage_layers = 2;  // 6 + 2 x 2 + 2
  EXPECT_EQ(layout_error(m, s), "(no error)");
  // One stage: a first (or last) stage of every layer is that stage (the mismatch check of
  // transformer_config.py counts 0 middle layers and 0 middle stages); both counts are refused.
  s = {};
  s.pipeline.first_stage_layers = 12;
  EXPECT_EQ(layout_error(m, s), "(no error)");
  s.pipeline.last_stage_layers = 12;
  EXPECT_NE(layout_error(m, s).find("with --pp 1: the first stage is the last"), std::string::npos);
  // --account-for-embedding/loss-in-pipeline-split count the embedding and the loss as a layer
  // each: 2 + 2 over PP 4 gives the first and last stages no decoder layer (transformer_block.py
  // builds them empty); without them PP 4 is more stages than layers.
  const ModelSpec two = test::gpt_model(2, 1024, 16);
  s = {};
  s.parallel.pp = 4;
  s.parallel.world_size = 4;
  EXPECT_NE(layout_error(two, s).find("--pp 4 is more pipeline stages than the model's 2 layers"), std::string::npos);
  s.pipeline.account_for_embedding = s.pipeline.account_for_loss = true;
  const Estimate e = run(two, s);
  ASSERT_EQ(e.stages.size(), 4u);
  EXPECT_EQ(e.stages[0].layers, 0);
  EXPECT_EQ(e.stages[1].layers, 1);
  EXPECT_EQ(e.stages[2].layers, 1);
  EXPECT_EQ(e.stages[3].layers, 0);

  s = {};
  s.parallel.pp = 2;
  s.parallel.world_size = 2;
  s.pipeline.layers_per_virtual_stage = 3;  // 6 layers a rank: VPP 2
  EXPECT_EQ(layout_error(m, s), "(no error)");
  s.parallel.vpp = 3;
  EXPECT_NE(layout_error(m, s).find("--num-layers-per-virtual-pipeline-stage 3 and --vpp 3"), std::string::npos);
  s.parallel.vpp = 1;
  s.pipeline.first_stage_layers = 4;
  EXPECT_NE(layout_error(m, s).find("with --num-layers-in-first/last-pipeline-stage"), std::string::npos);
}

// More of Megatron-LM's refusals (model_parallel_config.py, transformer_config.py,
// optimizer_config.py, arguments.py), each next to the setup it accepts.
TEST_F(Engine, SettingsMegatronRefusesAreRefused) {
  ModelSpec m = test::gpt_model(12, 1024, 16);
  auto refused = [&](const TrainingSetup& s, const std::string& why) {
    SCOPED_TRACE(why);
    const std::string e = layout_error(m, s);
    EXPECT_NE(e.find(why), std::string::npos) << e;
    EXPECT_NE(e.find("Megatron-LM"), std::string::npos) << e;
  };
  TrainingSetup s;
  s.parallel.pp = 2;
  s.parallel.world_size = 2;
  s.defer_embedding_wgrad = true;
  EXPECT_EQ(layout_error(m, s), "(no error)");
  s.gradient_accumulation_fusion = false;
  refused(s, "--defer-embedding-wgrad-compute with --no-gradient-accumulation-fusion");

  s = {};
  s.recompute.granularity = RecomputeGranularity::kSelective;
  s.recompute.modules = kRecomputeMoeAct;
  s.moe_grouped_gemm = false;
  refused(s, "--recompute-modules moe_act without --moe-grouped-gemm");
  // shared_experts recompute with the shared-expert overlap: refused only when the model has shared
  // experts (Communication.SharedExpertOverlapKeepsTheGatheredInputAndAddsTheWorkingSets).
  s.moe_grouped_gemm = true;
  s.recompute.modules = kRecomputeSharedExperts;
  s.comm.shared_expert_overlap = true;
  EXPECT_EQ(layout_error(m, s), "(no error)");

  s = {};
  s.optimizer.precision_aware = true;
  s.optimizer.name = "sgd";
  refused(s, "--use-precision-aware-optimizer with --optimizer sgd");

  s = {};
  s.optimizer.name = "muon";
  s.precision = Precision::kBF16;
  EXPECT_EQ(layout_error(m, s), "(no error)");
  s.precision = Precision::kFP16;
  refused(s, "--optimizer muon with fp16");

  s = {};
  s.fsdp.kind = FsdpKind::kTorchFsdp2;
  s.optimizer.distributed = false;
  s.gradient_accumulation_fusion = false;
  m.tie_embeddings = false;
  EXPECT_EQ(layout_error(m, s), "(no error)");
  m.tie_embeddings = true;
  refused(s, "--use-torch-fsdp2 with");

  // Experts with linear biases: ETP 1 only (transformer_config.py), and TE's grouped experts
  // without the fused bias-dropout-add (experts.py TEGroupedMLP).
  ModelSpec moe = test::gpt_model(2, 1024, 16);
  moe.add_bias_linear = true;
  for (auto& l : moe.layers) {
    l.mlp.kind = "moe";
    l.mlp.num_experts = 8;
    l.mlp.top_k = 2;
    l.mlp.expert_ffn_hidden_size = 512;
  }
  s = {};
  s.bias_dropout_fusion = false;
  s.parallel.tp = 2;
  s.parallel.etp = 1;
  s.parallel.world_size = 2;
  EXPECT_EQ(layout_error(moe, s), "(no error)");
  s.parallel.etp = 2;
  EXPECT_NE(layout_error(moe, s).find("the experts' linear biases need --etp 1, not 2: Megatron-LM refuses them"),
            std::string::npos);
  s.parallel.etp = 1;
  s.bias_dropout_fusion = true;
  EXPECT_NE(layout_error(moe, s).find("with --moe-grouped-gemm need --no-bias-dropout-fusion: Megatron-LM refuses"),
            std::string::npos);
  s.moe_grouped_gemm = false;  // SequentialMLP takes them
  EXPECT_EQ(layout_error(moe, s), "(no error)");
  // Not given (not a launch line): off for such a model, as its recipes run it, and said.
  s.moe_grouped_gemm = true;
  s.bias_dropout_fusion.reset();
  EXPECT_EQ(layout_error(moe, s), "(no error)");
  EXPECT_FALSE(bias_dropout_fusion_on(moe, s));
  const Estimate e = run(moe, s);
  EXPECT_EQ(e.setup.bias_dropout_fusion, false);
  bool said = false;
  for (const auto& a : e.assumptions)
    said = said || a.find("Megatron-LM refuses for the experts' linear biases") != std::string::npos;
  EXPECT_TRUE(said);
  // Without biases the default stays Megatron-LM's: on.
  moe.add_bias_linear = false;
  EXPECT_TRUE(bias_dropout_fusion_on(moe, s));
}

TEST_F(Engine, ExpertsMustDivideByExpertParallelism) {
  ModelSpec m = test::gpt_model(2, 1024, 16);
  for (auto& l : m.layers) {
    l.mlp.kind = "moe";
    l.mlp.num_experts = 6;
    l.mlp.top_k = 2;
    l.mlp.expert_ffn_hidden_size = 512;
  }
  TrainingSetup s;
  s.parallel.ep = 4;
  s.parallel.world_size = 4;
  EXPECT_NE(layout_error(m, s).find("6 experts are not divisible by --ep 4"), std::string::npos);
}

TEST_F(Engine, SequenceParallelSplitsNormAndDropoutTensors) {
  const ModelSpec m = test::gpt_model(1, 1024, 16);
  TrainingSetup s;
  s.parallel.tp = 4;
  s.parallel.world_size = 4;
  s.seq_length = 1024;
  s.parallel.sequence_parallel = false;
  const auto off = run(m, s).stages[0];
  s.parallel.sequence_parallel = true;
  const auto on = run(m, s).stages[0];
  EXPECT_EQ(test::component_sum(off, "activations/mlp/bda_dropout_mask"),
            4 * test::component_sum(on, "activations/mlp/bda_dropout_mask"));
}

TEST_F(Engine, LossStageKeepsFp32Logits) {
  const ModelSpec m = test::gpt_model(2, 1024, 16, 32000);
  TrainingSetup s;
  s.parallel.world_size = 1;
  s.seq_length = 2048;
  s.micro_batch_size = 2;
  const auto st = run(m, s).stages[0];
  // cross_entropy.py: the fp32 softmax of [s, b, V/TP] logits is kept for backward.
  EXPECT_EQ(test::component_sum(st, "activations/logits_fp32_softmax"), 4LL * 2048 * 2 * 32000);
}

}  // namespace
}  // namespace mme
