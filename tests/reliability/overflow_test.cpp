// 64-bit arithmetic on config values (docs/reliability.md): sizes at the validation limits never
// wrap. Either the bounds make a product impossible to overflow, or it is checked and the
// overflow is a ConfigError naming it. Run under the asan preset, these tests also prove there is
// no undefined behaviour on the way (signed overflow is UB, and UBSan aborts on it).
#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include <mme/engine/estimator.hpp>
#include <mme/engine/pipeline.hpp>
#include <mme/engine/registry.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/planner/planner.hpp>
#include <mme/sdk/checked.hpp>
#include <mme/sdk/config_reader.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/training_setup.hpp>

#include "layer_plugins.hpp"

namespace mme {
namespace {

constexpr std::int64_t kDim = ConfigReader::kMaxDimension;  // 2^24
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

const Registry& layers() {
  static const Registry r = [] {
    Registry out;
    test::register_layer_plugins(out);
    return out;
  }();
  return r;
}

ModelSpec model(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t head_dim, std::int64_t ffn) {
  ModelSpec m;
  m.name = "limits";
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.vocab_size = 1024;
  m.max_position_embeddings = 4096;
  LayerSpec l;
  l.attention.num_heads = heads;
  l.attention.num_query_groups = heads;
  l.attention.kv_channels = head_dim;
  l.mlp.ffn_hidden_size = ffn;
  m.layers.assign(static_cast<std::size_t>(layers), l);
  return m;
}

ModelSpec mla_moe(std::int64_t layers, std::int64_t hidden, std::int64_t dims, std::int64_t experts) {
  ModelSpec m = model(layers, hidden, 128, 128, 1024);
  for (auto& l : m.layers) {
    l.attention.kind = "mla";
    l.attention.q_lora_rank = dims;
    l.attention.kv_lora_rank = dims;
    l.attention.qk_head_dim = dims;
    l.attention.qk_pos_emb_head_dim = dims;
    l.attention.v_head_dim = dims;
    l.mlp.kind = "moe";
    l.mlp.num_experts = experts;
    l.mlp.top_k = experts;
    l.mlp.expert_ffn_hidden_size = dims;
    l.mlp.shared_expert_ffn_hidden_size = dims;
  }
  m.mtp_num_layers = 1;
  return m;
}

// The overflow error, and nothing else: no wrapped (negative or small) number.
template <class F>
void expect_overflow(F&& f) {
  try {
    f();
    ADD_FAILURE() << "no error: a product of these sizes cannot fit in 64 bits";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit in 64 bits"), std::string::npos) << e.what();
  }
}

TEST(CheckedInt, ArithmeticAndItsErrors) {
  const CheckedInt a = std::int64_t{1} << 40;
  EXPECT_EQ((a * 4 + 3 - 1).value(), (std::int64_t{1} << 42) + 2);
  EXPECT_EQ((a / 8).value(), std::int64_t{1} << 37);
  EXPECT_EQ(CheckedInt(kMax - 1) + 1, CheckedInt(kMax));
  EXPECT_THROW(a * a, ConfigError);
  EXPECT_THROW(CheckedInt(kMax) + 1, ConfigError);
  EXPECT_THROW(CheckedInt(-kMax) - 2, ConfigError);
  EXPECT_THROW(a / 0, ConfigError);
  EXPECT_THROW(CheckedInt(std::numeric_limits<std::int64_t>::min()) / -1, ConfigError);
  CheckedInt s = kMax / 2;
  EXPECT_THROW(s *= 3, ConfigError);
  EXPECT_TRUE(CheckedInt(3) < 4);
  try {
    (void)(CheckedInt(3037000500) * 3037000500);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("3037000500 x 3037000500 does not fit in 64 bits"), std::string::npos);
  }
}

TEST(Overflow, DenseGqaModelAtTheDimensionLimits) {
  // Every dimension at 2^24: each weight matrix has 2^48 elements or more.
  expect_overflow([] { Estimator(model(ConfigReader::kMaxLayers, kDim, kDim, kDim, kDim), layers()); });
  // One layer fits (parameters near 2^50); the estimate's byte counts of 65536 do not.
  const Estimator one(model(1, kDim, 1, kDim, kDim), layers());
  EXPECT_GT(one.count_parameters().total, std::int64_t{1} << 49);
}

TEST(Overflow, MlaMoeModelAtTheLimits) {
  expect_overflow([] { Estimator(mla_moe(4, kDim, kDim, 1 << 20), layers()); });
}

TEST(Overflow, ActivationsOfAValidModelAndLayout) {
  // Parameters fit; the unfused attention scores of 2^32 tokens per micro-batch (the limit)
  // over a 2^24 key length and 64 heads do not.
  const Estimator est(model(2, 4096, 64, 64, 16384), layers());
  TrainingSetup s;
  s.parallel.world_size = 1;
  s.seq_length = kDim;
  s.micro_batch_size = 256;
  s.attention_backend = AttentionBackend::kUnfused;
  expect_overflow([&] { (void)est.run(s); });
  // The same with flash attention fits: 2^32 tokens x 4096 x 2 bytes and so on.
  s.attention_backend = AttentionBackend::kFlash;
  const Estimate e = est.run(s);
  for (const auto& st : e.stages) EXPECT_GT(st.activation_bytes, std::int64_t{1} << 44);
}

TEST(Limits, SetupSizesBeyondAnyRunAreLayoutErrors) {
  auto refused = [](TrainingSetup s, const std::string& what) {
    try {
      (void)resolve_setup(s);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const LayoutError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  TrainingSetup s;
  s.parallel.tp = kMaxParallelSize * 2;
  refused(s, "--tp 2097152 is larger than 1048576, which no real run uses");
  s = {};
  s.micro_batch_size = std::int64_t{1} << 62;  // what --micro-batch-size in Megatron flags could say
  refused(s, "--micro-batch-size 4611686018427387904 is larger than 16777216");
  s = {};
  s.seq_length = kDim;
  s.micro_batch_size = 512;
  refused(s, "tokens per micro-batch is more than 4294967296");
  s = {};
  s.parallel.pp = 1024;
  s.parallel.vpp = 2048;
  s.parallel.world_size = 1024;
  refused(s, "--pp 1024 x --vpp 2048 = 2097152 pipeline chunks is more than 1048576");
  s = {};
  s.global_batch_size = kMax;
  refused(s, "--global-batch-size 9223372036854775807 is larger than 1099511627776");
  s = {};
  s.parallel.world_size = kMax;
  refused(s, "--num-gpus 9223372036854775807 is larger");
}

TEST(Limits, CublasWorkspacesThatAddUpBeyond64Bits) {
  std::string config;
  for (int i = 0; i < 40; ++i) config += ":16777216:16777216";  // 40 x 2^58 bytes
  EXPECT_THROW(parse_cublas_workspace_config(config), UsageError);
  EXPECT_EQ(parse_cublas_workspace_config(":4096:8"), 4096 * 1024 * 8);
}

TEST(Limits, MegatronWorldSizeProduct) {
  // torchrun's counts: each at most 9 digits (a longer one is no GPU count: the reader says so),
  // their product checked against the GPU bound.
  const MegatronArgs a = parse_megatron_args("torchrun --nnodes 999999999 --nproc-per-node 999999999 x.py", "test");
  EXPECT_THROW(setup_from_megatron_args(a, {}), UsageError);
  EXPECT_FALSE(parse_megatron_args("torchrun --nnodes 4611686018427387904 x.py", "test").world_size);
  const MegatronArgs ok = parse_megatron_args("torchrun --nnodes 16 --nproc-per-node 8 x.py", "test");
  EXPECT_EQ(setup_from_megatron_args(ok, {}).parallel.world_size, 128);
}

TEST(Limits, MoeLayerFreqIsCheckedBeforeItIsBuilt) {
  // 2^23 entries of 8 would be 2^26 ints (256 MiB) before the old length check.
  EXPECT_THROW(parse_moe_layer_freq("[1,1,1,1,1,1,1,1]*999999", 64), ConfigError);
  EXPECT_THROW(parse_moe_layer_freq("99999999999999999999", 64), ConfigError);  // was std::out_of_range
  EXPECT_EQ(parse_moe_layer_freq("0000000000000000000000000002", 4), (std::vector<int>{1, 0, 1, 0}));
  EXPECT_EQ(parse_moe_layer_freq("([0]*1+[1]*3)", 4), (std::vector<int>{0, 1, 1, 1}));
}

TEST(MoeLayerFreq, PythonListExpressionsAsArgumentsPyEvaluatesThem) {
  using V = std::vector<int>;
  // Launchers write a trailing repetition (the DeepSeek launcher's "([0]*1+[1]*3)*1").
  EXPECT_EQ(parse_moe_layer_freq("([0]*1+[1]*3)*1", 4), (V{0, 1, 1, 1}));
  // arguments.py's own docstring example: "([1]*3+[0]*2)*2" is [1,1,1,0,0,1,1,1,0,0].
  EXPECT_EQ(parse_moe_layer_freq("([1]*3+[0]*2)*2", 10), (V{1, 1, 1, 0, 0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(parse_moe_layer_freq("[1,1,1,0]*3", 12), (V{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0}));
  // Python's int * list, repeated repetition, a trailing comma, integer arithmetic in a count.
  EXPECT_EQ(parse_moe_layer_freq("2*[0,1]", 4), (V{0, 1, 0, 1}));
  EXPECT_EQ(parse_moe_layer_freq("[0]+[1]*2*2", 5), (V{0, 1, 1, 1, 1}));
  EXPECT_EQ(parse_moe_layer_freq("[1,]+[0]*(1+1)", 3), (V{1, 0, 0}));
  EXPECT_EQ(parse_moe_layer_freq("[1]*0+[0, 1]", 2), (V{0, 1}));
  // What Python would refuse, what Megatron-LM's character check refuses, and what is not a
  // 0/1 list: each a ConfigError naming the problem.
  for (const char* bad : {"[1]+2", "[[1]]", "(1,2)*2", "[2]*4", "[1]*[1]*4", "[1]*3-1", "__import__('os')", "([1]*4",
                          "[1]*4)", "[1 1]", "4*4", "[1]*"})
    EXPECT_THROW(parse_moe_layer_freq(bad, 4), ConfigError) << bad;
  // Bounded before anything is built, however the repetition is nested.
  EXPECT_THROW(parse_moe_layer_freq("(([1]*999999999)*999999999)*999999999", 64), ConfigError);
  EXPECT_THROW(parse_moe_layer_freq(std::string(200, '(') + "[1]" + std::string(200, ')'), 1), ConfigError);
}

TEST(Limits, InflightMicroBatchesOfAHugeGlobalBatch) {
  // m x v overflowed: m up to the global batch (2^40 and beyond through the API), v up to 2^20.
  const std::int64_t m = std::int64_t{1} << 60;
  const auto inflight = inflight_microbatches(64, 1024, 0, m);
  std::int64_t sum = 0;
  for (auto x : inflight) {
    EXPECT_GE(x, 0);
    sum += x;
  }
  EXPECT_EQ(sum, 2 * 63 + 1023 * 64 + 1);  // the warm-up is not capped by m
}

TEST(Limits, FirstAndLastStageCountsBeyondTheModel) {
  ParallelLayout p;
  p.pp = 4;
  PipelineSplit split;
  split.first_stage_layers = kMax;
  split.last_stage_layers = kMax;
  EXPECT_THROW(partition_pipeline(32, 0, p, split), LayoutError);  // L - first - last overflowed
}

TEST(Limits, PlannerWithTheLargestGpuCountAndMicroBatch) {
  // GPUs (2^40) x micro-batch (2^24) overflowed twice in the planner: the nominal number of
  // sequences of the speed proxy, and micro-batch x DP against a global batch (then a division
  // by zero).
  ModelSpec m = model(4, 256, 8, 32, 1024);
  HardwareProfile gpu;
  gpu.name = "TEST-80GB";
  gpu.memory_bytes = std::int64_t{80} << 30;
  gpu.bf16_tflops = 1000;
  gpu.hbm_bandwidth_gbps = 3000;
  gpu.link_bandwidth_gbps = 450;
  Planner planner(m, layers());
  PlanOptions o;
  o.num_gpus = std::int64_t{1} << 40;
  o.gpu = &gpu;
  o.micro_batch_sizes = {std::int64_t{1} << 24};
  o.base.seq_length = 256;
  PlanLayout l;
  l.dp = o.num_gpus;
  l.micro_batch_size = std::int64_t{1} << 24;
  l.first_stage_layers = l.middle_stage_layers = l.last_stage_layers = 4;
  const PlanScore score = planner.score(l, o);
  EXPECT_TRUE(std::isfinite(score.score) && score.score > 0) << score.score;
  EXPECT_DOUBLE_EQ(score.micro_batches, 1.0);
  // micro-batch x DP was 2^24 x 2^40, wrapped to 0: the global batch % 0 was a SIGFPE. No
  // layout has a micro-batch x DP that divides 2^40.
  o.base.global_batch_size = std::int64_t{1} << 40;
  EXPECT_EQ(planner.count_candidates(o), 0u);
}

}  // namespace
}  // namespace mme
