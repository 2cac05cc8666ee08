// Weight gradients that are not main_grad (weight_gradients.cpp): with gradient accumulation
// fusion Transformer Engine's linears hand autograd get_dummy_wgrad(shape, dtype) (module/base.py),
// one cached tensor per distinct weight shape for the rest of the run. Expected values by hand.
#include <gtest/gtest.h>

#include "engine_fixture.hpp"

namespace mme {
namespace {

class DummyWgrads : public ::testing::Test {
 protected:
  void SetUp() override { test::register_layer_models(registry_); }
  std::int64_t dummies(const ModelSpec& m, const TrainingSetup& s) {
    return test::component_sum(Estimator(m, registry_).run(s).stages.at(0), "other/te_dummy_wgrads");
  }
  Registry registry_;
};

TrainingSetup one_gpu() {
  TrainingSetup s;
  s.parallel.world_size = 1;
  return s;
}

TEST_F(DummyWgrads, OnePerDistinctShapeInTheParameterDtype) {
  // gpt_model(4, 1024, 16): MHA and a GELU MLP of 4096. The four TE linears' weights are
  // linear_qkv [3072, 1024], linear_proj [1024, 1024], linear_fc1 [4096, 1024] and linear_fc2
  // [1024, 4096]: fc1 and fc2 have as many elements but other shapes, so two tensors. The four
  // layers share them: (3072 + 1024 + 4096 + 4096) x 1024 x 2 B = 25,165,824 B.
  const ModelSpec m = test::gpt_model(4, 1024, 16);
  TrainingSetup s = one_gpu();
  EXPECT_EQ(dummies(m, s), 25'165'824);
  EXPECT_EQ(dummies(test::gpt_model(8, 1024, 16), s), 25'165'824);  // more layers, the same shapes
  s.parallel.tp = 2;  // each weight's per-rank shape halves (column- or row-parallel)
  s.parallel.world_size = 2;
  EXPECT_EQ(dummies(m, s), 12'582'912);
  s.precision = Precision::kFP32;  // weight.dtype: 4 B
  EXPECT_EQ(dummies(m, s), 25'165'824);
}

TEST_F(DummyWgrads, NoneWithoutGradientAccumulationFusionOrTransformerEngine) {
  const ModelSpec m = test::gpt_model(4, 1024, 16);
  TrainingSetup s = one_gpu();
  s.gradient_accumulation_fusion = false;  // the real gradient, freed by the DDP hook
  EXPECT_EQ(dummies(m, s), 0);
  s = one_gpu();
  s.transformer_engine = false;  // Megatron's own linears: a fresh placeholder each backward
  EXPECT_EQ(dummies(m, s), 0);
}

TEST_F(DummyWgrads, ExpertsShareOnePerShapeWhateverTheirNumber) {
  // 8 experts of F 1024 (GELU) on EP 1: GroupedLinear's per-expert fc1 [1024, 1024] and fc2
  // [1024, 1024] are one shape, so one tensor; with the attention's qkv [3072, 1024] and proj
  // [1024, 1024] (the experts' shape again): (3072 + 1024) x 1024 x 2 B = 8,388,608 B.
  ModelSpec m = test::gpt_model(2, 1024, 16);
  for (auto& l : m.layers) {
    l.mlp.kind = "moe";
    l.mlp.num_experts = 8;
    l.mlp.top_k = 2;
    l.mlp.expert_ffn_hidden_size = 1024;
  }
  EXPECT_EQ(dummies(m, one_gpu()), 8'388'608);
  for (auto& l : m.layers) l.mlp.num_experts = 64;
  EXPECT_EQ(dummies(m, one_gpu()), 8'388'608);
}

}  // namespace
}  // namespace mme
