// Sharded data parallelism, worked out by hand from Megatron-FSDP's buffers
// (distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py, megatron_fsdp.py) and PyTorch
// FSDP2 through Megatron (distributed/torch_fully_sharded_data_parallel.py).
//
// The model: 4 layers of h 1024 with LayerNorm and no biases, 12 h^2 + 4 h = 12,587,008
// parameters each (the FSDP units), plus a tied 128 x 1024 embedding and the final LayerNorm
// (131,072 + 2,048 = 133,120, the non-layer bucket). P = 50,481,152 on one GPU of DP 8, bf16.
#include <gtest/gtest.h>

#include <mme/inputs/megatron_args.hpp>
#include <mme/sdk/error.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

constexpr std::int64_t kUnit = 12'587'008, kUnits = 4 * kUnit, kOther = 133'120, kP = kUnits + kOther;

class ShardedDp : public ::testing::Test {
 protected:
  void SetUp() override { test::register_layer_models(registry_); }
  StageEstimate run(const TrainingSetup& s) { return Estimator(test::gpt_model(4, 1024, 16), registry_).run(s).peak(); }
  static TrainingSetup megatron_fsdp(FsdpSharding strategy) {
    TrainingSetup s;
    s.parallel.world_size = 8;
    s.fsdp.kind = FsdpKind::kMegatron;
    s.fsdp.strategy = strategy;
    return s;
  }
  Registry registry_;
};

TEST_F(ShardedDp, TheModelHasTheHandCountedParameters) {
  EXPECT_EQ(run(megatron_fsdp(FsdpSharding::kOptimGradsParams)).parameters, kP);
}

// optim_grads_params (Megatron-LM's default strategy): bf16 weight shards 2P/8 plus the
// non-layer bucket kept gathered (2 x 133,120); bf16 gradient shards ("auto" = the param
// dtype) 2P/8; fp32 main weights 4P/8 and two fp32 Adam moments 8P/8; the step's fp32 copy of
// the gradient shard 4P/8.
TEST_F(ShardedDp, FullShardingKeepsShardsAndTheGatheredNonLayerBucket) {
  const StageEstimate st = run(megatron_fsdp(FsdpSharding::kOptimGradsParams));
  EXPECT_EQ(st.weight_bytes, 2 * kP / 8 + 2 * kOther);
  EXPECT_EQ(st.gradient_bytes, 2 * kP / 8);
  EXPECT_EQ(st.step_only_bytes, 4 * kP / 8);
  EXPECT_EQ(st.optimizer_bytes, 4 * kP / 8 + 8 * kP / 8 + 4 * kP / 8);
  // In flight at the backward's start: the prefetch window (the running layer + 5e8 parameters)
  // covers all four layers, 2 x 4 x 12,587,008 bytes; the unsharded gradient buckets of the
  // non-layer parameters and of the first layer, 2 x (133,120 + 12,587,008).
  EXPECT_EQ(test::component_sum(st, "activations/fsdp_in_flight"), 2 * kUnits + 2 * (kOther + kUnit));
  // After the step the next forward's window is gathered while the fp32 copies still live.
  EXPECT_EQ(st.step_transient_bytes, 2 * kUnits);
  EXPECT_EQ(st.optimizer_step_bytes, st.static_bytes + 2 * kUnits);
}

// optim: only the main weights and Adam states are sharded; the all-gather and the
// reduce-scatter work in place in the unsharded buffers, nothing is in flight.
TEST_F(ShardedDp, OptimizerStateShardingKeepsWholeWeightsAndGradients) {
  const StageEstimate st = run(megatron_fsdp(FsdpSharding::kOptim));
  EXPECT_EQ(st.weight_bytes, 2 * kP);
  EXPECT_EQ(st.gradient_bytes, 2 * kP);
  EXPECT_EQ(st.optimizer_bytes, 16 * kP / 8);
  EXPECT_EQ(test::component_sum(st, "activations/fsdp_in_flight"), 0);
}

// no_shard: nothing is sharded, fp32 gradients asked for: no copy in the step.
TEST_F(ShardedDp, NoShardWithFp32GradientsIsPlainDataParallel) {
  TrainingSetup s = megatron_fsdp(FsdpSharding::kNoShard);
  s.fsdp.main_grads = DType::kFP32;
  const StageEstimate st = run(s);
  EXPECT_EQ(st.weight_bytes, 2 * kP);
  EXPECT_EQ(st.gradient_bytes, 4 * kP);
  EXPECT_EQ(st.optimizer_bytes, 12 * kP);
  EXPECT_EQ(st.step_only_bytes, 0);
}

// --fsdp-double-buffer: two persistent slots of the largest layer for weights and gradients
// replace the prefetch window; the non-layer gradient bucket stays dynamic.
TEST_F(ShardedDp, DoubleBufferHoldsTwoLayerSlots) {
  TrainingSetup s = megatron_fsdp(FsdpSharding::kOptimGradsParams);
  s.fsdp.double_buffer = true;
  const StageEstimate st = run(s);
  EXPECT_EQ(test::component_sum(st, "other/fsdp_double_buffer_pool"), 2 * 2 * kUnit + 2 * 2 * kUnit);
  EXPECT_EQ(test::component_sum(st, "activations/fsdp_in_flight"), 2 * kOther);
}

// FSDP2: bf16 weight and gradient shards, Float16Optimizer's fp32 main copy and moments, the
// fp32 gradient copy in the step; the running and the prefetched layer plus one unsharded
// gradient in flight.
// FSDP2 needs untied embedding and output weights (arguments.py): the model's own 128 x 1024
// output layer, P + 131,072 parameters.
TEST_F(ShardedDp, TorchFsdp2ShardsEverythingInTheParamDtype) {
  ModelSpec untied = test::gpt_model(4, 1024, 16);
  untied.tie_embeddings = false;
  const std::int64_t p = kP + 128 * 1024;
  auto run_untied = [&](const TrainingSetup& s) { return Estimator(untied, registry_).run(s).peak(); };
  TrainingSetup s;
  s.parallel.world_size = 8;
  s.fsdp.kind = FsdpKind::kTorchFsdp2;
  s.optimizer.distributed = false;
  s.gradient_accumulation_fusion = false;
  const StageEstimate st = run_untied(s);
  EXPECT_EQ(st.weight_bytes, 2 * p / 8);
  EXPECT_EQ(st.gradient_bytes, 2 * p / 8);
  EXPECT_EQ(st.optimizer_bytes, 16 * p / 8);
  EXPECT_EQ(test::component_sum(st, "activations/fsdp_in_flight"), 3 * 2 * kUnit);
  s.fsdp.reshard_after_forward = false;  // every layer stays gathered between its passes
  EXPECT_EQ(test::component_sum(run_untied(s), "activations/fsdp_in_flight"), 2 * p - 2 * p / 8 + 2 * kUnit);
  // The tied model is refused.
  EXPECT_THROW(run(s), LayoutError);
}

// --fp8-param-gather and --fp4-param-gather: Megatron-FSDP gives every TE QuantizedTensor
// (Float8 and NVFP4 alike, mixed_precision.py is_float8tensor) the "float8" bucket, a uint8
// buffer of one byte per element: NVFP4 weights are not packed two per byte here, unlike the
// distributed optimizer's buffer (low_precision_test).
TEST_F(ShardedDp, QuantizedParamsTakeOneByteInMegatronFsdpsBuffer) {
  TrainingSetup f8 = megatron_fsdp(FsdpSharding::kOptimGradsParams);
  f8.precision = Precision::kFP8;
  f8.fp8_param_gather = true;
  TrainingSetup f4 = megatron_fsdp(FsdpSharding::kOptimGradsParams);
  f4.low_precision.fp4 = true;
  f4.low_precision.fp4_param_gather = true;
  const StageEstimate bf16 = run(megatron_fsdp(FsdpSharding::kOptimGradsParams));
  const StageEstimate fp8 = run(f8), fp4 = run(f4);
  EXPECT_EQ(fp4.weight_bytes, fp8.weight_bytes);
  // The shards of the 12 h^2 GEMM weights of each layer (G = 50,331,648) lose one of their two
  // bytes: G / 8 less than in bf16 over DP 8, give or take the rounding of the shards and the
  // kept non-layer bucket.
  const std::int64_t gemm = 4 * 12 * 1024 * 1024;
  EXPECT_NEAR(static_cast<double>(bf16.weight_bytes - fp8.weight_bytes), gemm / 8.0, 2 * kOther);
}

TEST_F(ShardedDp, MegatronLmsRefusalsAreRefused) {
  auto parse = [](const char* text) { return setup_from_megatron_args(parse_megatron_args(text, "x"), {}); };
  EXPECT_EQ(parse("--use-megatron-fsdp").fsdp.strategy, FsdpSharding::kOptimGradsParams);
  EXPECT_TRUE(parse("--use-megatron-fsdp").optimizer.distributed);  // forced by arguments.py
  EXPECT_EQ(parse("--use-megatron-fsdp --data-parallel-sharding-strategy optim").fsdp.strategy, FsdpSharding::kOptim);
  // Without FSDP the sharding flags change nothing, as in Megatron-LM; their values are still checked.
  EXPECT_EQ(parse("--data-parallel-sharding-strategy optim").fsdp.kind, FsdpKind::kNone);
  EXPECT_THROW(parse("--data-parallel-sharding-strategy zero3"), UsageError);
  EXPECT_THROW(parse("--use-megatron-fsdp --megatron-fsdp-main-params-dtype auto"), UsageError);
  EXPECT_THROW(parse("--use-torch-fsdp2 --use-distributed-optimizer"), UsageError);
  TrainingSetup s;
  s.parallel.world_size = 8;
  s.parallel.pp = 2;
  s.fsdp.kind = FsdpKind::kTorchFsdp2;
  s.optimizer.distributed = false;
  s.gradient_accumulation_fusion = false;
  EXPECT_THROW(resolve_setup(s), LayoutError);  // FSDP2 with pipeline parallelism
  s.parallel.pp = 1;
  s.gradient_accumulation_fusion = true;
  EXPECT_THROW(resolve_setup(s), LayoutError);  // FSDP2 with gradient accumulation fusion
  TrainingSetup h = megatron_fsdp(FsdpSharding::kOptimGrads);
  h.fsdp.outer = FsdpSharding::kOptim;
  h.optimizer.instances = 2;
  EXPECT_THROW(run(h), LayoutError);  // outer optim needs full inner sharding
}

}  // namespace
}  // namespace mme
