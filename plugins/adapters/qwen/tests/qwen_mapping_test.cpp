// What the qwen adapter puts into the ModelSpec: Qwen2/2.5/3 and their MoE variants (QKV bias, QK norm, shared-expert
// gate, sparse layers), the keys it read and the warnings for keys it cannot honour. Configs are adapted as the CLI
// does (best adapter of the full registry, tests/support/adapters).
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/engine/estimator.hpp>

#include "test_registry.hpp"

namespace mme::test {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(adapter_mapping, Qwen2HasQkvBiasQwen3HasQkNormAndHeadDim) {
  const ModelSpec q2 = adapt(bundled_json("Qwen/Qwen2.5-7B"));
  EXPECT_TRUE(q2.layers[0].attention.qkv_bias);
  EXPECT_FALSE(q2.layers[0].attention.qk_norm);
  EXPECT_EQ(q2.layers[0].attention.kv_channels, 3584 / 28);
  EXPECT_EQ(q2.layers[0].attention.num_query_groups, 4);

  const ModelSpec q3 = adapt(bundled_json("Qwen/Qwen3-0.6B"));
  EXPECT_FALSE(q3.layers[0].attention.qkv_bias);
  EXPECT_TRUE(q3.layers[0].attention.qk_norm);
  EXPECT_EQ(q3.layers[0].attention.kv_channels, 128);  // head_dim, not 1024 / 16
  EXPECT_TRUE(q3.tie_embeddings);
}

TEST(adapter_mapping, Qwen2MoeSharedExpertGateAndSparseLayers) {
  auto config = bundled_json("Qwen/Qwen2-57B-A14B");
  ModelSpec s = adapt(config);
  for (const auto& l : s.layers) {
    EXPECT_EQ(l.mlp.kind, "moe");
    EXPECT_EQ(l.mlp.shared_expert_ffn_hidden_size, 20480);
    EXPECT_TRUE(l.mlp.shared_expert_gate);
    EXPECT_FALSE(l.mlp.router_expert_bias);
  }
  // HF semantics: sparse iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
  config["decoder_sparse_step"] = 2;
  config["mlp_only_layers"] = {1, 6};
  s = adapt(config);
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    const bool sparse = (i + 1) % 2 == 0 && i != 1;
    EXPECT_EQ(s.layers[i].mlp.kind, sparse ? "moe" : "dense") << i;
    if (!sparse) {
      EXPECT_EQ(s.layers[i].mlp.ffn_hidden_size, 18944) << i;  // intermediate_size
    }
  }
  config["shared_expert_intermediate_size"] = 0;
  EXPECT_FALSE(adapt(config).layers[3].mlp.shared_expert_gate);
}

TEST(adapter_mapping, Qwen3MoeHasNoSharedExpert) {
  const ModelSpec s = adapt(bundled_json("Qwen/Qwen3-30B-A3B"));
  for (const auto& l : s.layers) {
    EXPECT_EQ(l.mlp.kind, "moe");
    EXPECT_EQ(l.mlp.num_experts, 128);
    EXPECT_EQ(l.mlp.shared_expert_ffn_hidden_size, 0);
    EXPECT_TRUE(l.attention.qk_norm);
  }
}

}  // namespace
}  // namespace mme::test
