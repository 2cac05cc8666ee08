// Static memory: parameters per rank and the bytes Megatron-LM keeps per parameter for
// weights, main gradients and optimizer states (docs/user-guide/features/dist_optimizer.md
// table; megatron/core/optimizer). Expected values are worked out by hand here.
#include <gtest/gtest.h>

#include "engine_fixture.hpp"

namespace mme {
namespace {

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

class StaticMemory : public ::testing::Test {
 protected:
  void SetUp() override { test::register_layer_models(registry_); }
  Estimate run(const ModelSpec& m, const TrainingSetup& s) { return Estimator(m, registry_).run(s); }
  Registry registry_;
};

TEST_F(StaticMemory, Llama3_8BTensorParallel2) {
  TrainingSetup s;
  s.parallel.tp = 2;
  s.parallel.world_size = 8;  // DP 4
  const Estimate dist = run(llama3_8b(), s);
  const StageEstimate& st = dist.stages.at(0);
  // Per layer at TP 2: QKV 4096 x 6144 / 2, proj 4096 x 4096 / 2, fc1 4096 x 28672 / 2,
  // fc2 14336 x 4096 / 2, two RMSNorms of 4096 = 109,060,096; x 32 layers, + embedding and
  // output layer 2 x 128256 / 2 x 4096, + final norm 4096.
  EXPECT_EQ(st.parameters, 4'015'263'744);
  EXPECT_EQ(st.weight_bytes, 2 * st.parameters);    // bf16 parameters
  EXPECT_EQ(st.gradient_bytes, 4 * st.parameters);  // fp32 main gradients
  // Distributed optimizer over DP 4: (fp32 main param + two Adam moments) / 4 = 3 B/param.
  EXPECT_EQ(st.optimizer_bytes, 3 * st.parameters);
  EXPECT_EQ(st.weight_bytes + st.gradient_bytes + st.optimizer_bytes, 9 * st.parameters);

  s.optimizer.distributed = false;
  const Estimate plain = run(llama3_8b(), s);
  const StageEstimate& p = plain.stages.at(0);
  EXPECT_EQ(p.weight_bytes + p.gradient_bytes + p.optimizer_bytes, 18 * p.parameters);
}

TEST_F(StaticMemory, BytesPerParameterTable) {
  // dist_optimizer.md: fp16/fp16 20 | 4 + 16/D; bf16/fp32 18 | 6 + 12/D; fp32/fp32 16 | 8 + 8/D.
  struct Row {
    Precision precision;
    std::optional<DType> grads;
    std::int64_t plain, fixed, sharded;
  };
  const Row rows[] = {
      {Precision::kFP16, std::nullopt, 20, 4, 16},
      {Precision::kBF16, std::nullopt, 18, 6, 12},
      {Precision::kFP32, std::nullopt, 16, 8, 8},
  };
  const ModelSpec m = test::gpt_model(4, 1024, 16);
  for (const auto& r : rows) {
    TrainingSetup s;
    s.parallel.world_size = 8;  // DP 8
    s.precision = r.precision;
    s.optimizer.main_grads = r.grads;
    s.optimizer.distributed = false;
    const StageEstimate plain = run(m, s).stages[0];
    EXPECT_EQ(plain.weight_bytes + plain.gradient_bytes + plain.optimizer_bytes, r.plain * plain.parameters)
        << to_string(r.precision);
    s.optimizer.distributed = true;
    const StageEstimate dist = run(m, s).stages[0];
    const std::int64_t P = dist.parameters;
    // Shards are rounded up to whole bytes per parameter class.
    EXPECT_EQ(dist.weight_bytes + dist.gradient_bytes, r.fixed * P) << to_string(r.precision);
    EXPECT_EQ(dist.optimizer_bytes, (r.sharded * P + 7) / 8) << to_string(r.precision);
  }
}

TEST_F(StaticMemory, ContextParallelRanksShareTheOptimizerShard) {
  // distributed_data_parallel.py: dense buffers are sharded over the DP x CP group.
  const ModelSpec m = test::gpt_model(4, 1024, 16);
  TrainingSetup s;
  s.parallel.cp = 2;
  s.parallel.world_size = 8;  // DP 4, CP 2: shards over 8
  s.seq_length = 4096;
  const StageEstimate st = run(m, s).stages[0];
  EXPECT_EQ(st.optimizer_bytes, (12 * st.parameters + 7) / 8);
}

TEST_F(StaticMemory, PrecisionAwareOptimizer) {
  // optimizer/__init__.py + TE FusedAdam: bf16 params with 16-bit remainders as master
  // weights: 2 + 4 + (2 + 4 + 4)/D; bf16 moments: 2 + 4 + (2 + 2 + 2)/D; bf16 grads too: 2 + 2 + 6/D.
  const ModelSpec m = test::gpt_model(4, 1024, 16);
  TrainingSetup s;
  s.parallel.world_size = 2;  // DP 2
  s.optimizer.precision_aware = true;
  StageEstimate st = run(m, s).stages[0];
  EXPECT_EQ(st.optimizer_bytes, (10 * st.parameters + 1) / 2);
  s.optimizer.exp_avg = DType::kBF16;
  s.optimizer.exp_avg_sq = DType::kBF16;
  st = run(m, s).stages[0];
  EXPECT_EQ(st.optimizer_bytes, 3 * st.parameters);
  s.optimizer.main_grads = DType::kBF16;
  st = run(m, s).stages[0];
  EXPECT_EQ(st.gradient_bytes, 2 * st.parameters);
  // Offloading half the optimizer state to the host: HybridDeviceOptimizer keeps its own fp32
  // master copy and fp32 moments (not FusedAdam's remainders and bf16 moments) and an fp32 copy
  // of the bf16 gradients for the half it steps on the GPU: (4 + 4 + 4 + 4) / 2 x 0.5 = 4 B per
  // parameter (tests/engine/offload_test.cpp has the rest).
  s.optimizer.cpu_offload_fraction = 0.5;
  const StageEstimate off = run(m, s).stages[0];
  EXPECT_NEAR(static_cast<double>(off.optimizer_bytes), 4.0 * static_cast<double>(st.parameters), 4.0);
}

TEST_F(StaticMemory, RoutedExpertsShardOverExpertDataParallel) {
  ModelSpec m = test::gpt_model(2, 1024, 16);
  for (auto& l : m.layers) {
    l.mlp.kind = "moe";
    l.mlp.num_experts = 8;
    l.mlp.top_k = 2;
    l.mlp.expert_ffn_hidden_size = 512;
  }
  TrainingSetup s;
  s.parallel.ep = 4;
  s.parallel.etp = 1;
  s.parallel.world_size = 8;  // DP 8 for dense, expert DP = 8 / (1 x 4) = 2
  const StageEstimate st = run(m, s).stages[0];
  // 2 local experts of fc1 1024 x 512 (GELU, not gated) and fc2 512 x 1024 per layer.
  EXPECT_EQ(st.expert_parameters, 2 * 2 * (1024 * 512 + 512 * 1024));
  const std::int64_t dense = st.parameters - st.expert_parameters;
  EXPECT_EQ(st.optimizer_bytes, (12 * dense + 7) / 8 + 12 * st.expert_parameters / 2);
}

TEST_F(StaticMemory, TiedEmbeddingsKeepTwoCopiesWithPipelineParallelism) {
  // gpt_model.py: the output layer skips its weight only when the same stage holds the
  // embedding (pre_process), i.e. PP = 1.
  ModelSpec m = test::gpt_model(4, 1024, 16, 32000);
  TrainingSetup s;
  s.parallel.world_size = 1;
  const std::int64_t vocab_rows = 32000;  // 32000 is a multiple of 128
  const auto one = run(m, s);
  s.parallel.pp = 2;
  s.parallel.world_size = 2;
  const auto two = run(m, s);
  const std::int64_t layer = 12 * 1024 * 1024 + 4 * 1024;  // 12 h^2 + two LayerNorms (weight + bias)
  EXPECT_EQ(one.stages[0].parameters, 4 * layer + vocab_rows * 1024 + 2 * 1024);
  EXPECT_EQ(two.stages[0].parameters, 2 * layer + vocab_rows * 1024);
  EXPECT_EQ(two.stages[1].parameters, 2 * layer + vocab_rows * 1024 + 2 * 1024);
}

TEST_F(StaticMemory, VocabularyIsPaddedToMultipleOf128TimesTP) {
  EXPECT_EQ(padded_vocab_size(50257, 128, 1), 50304);
  EXPECT_EQ(padded_vocab_size(50257, 128, 8), 51200);
  EXPECT_EQ(padded_vocab_size(128256, 128, 2), 128256);
  EXPECT_EQ(padded_vocab_size(151936, 128, 4), 152064);
}

}  // namespace
}  // namespace mme
