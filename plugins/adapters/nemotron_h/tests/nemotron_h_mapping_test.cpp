// What the nemotron_h adapter puts into the ModelSpec for Nemotron 3 Nano: one layer per
// hybrid_override_pattern symbol (Mamba-2 mixers, attention, MoE), squared-ReLU experts with a
// shared MLP, no position embedding, and the keys it refuses. Configs are adapted as the CLI does
// (best adapter of the full registry, tests/support/adapters). The exact parameter count is in
// tests/data/expected_params.csv, checked with every bundled model.
#include <gtest/gtest.h>

#include <mme/sdk/error.hpp>

#include "test_registry.hpp"

namespace mme::test {
namespace {

constexpr const char* kNano = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16";

TEST(adapter_mapping, NemotronHLayersFollowThePattern) {
  const ModelSpec s = adapt(bundled_json(kNano));
  EXPECT_EQ(s.adapter, "nemotron_h");
  ASSERT_EQ(s.num_layers, 52);
  const std::string pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    const auto& a = s.layers[i].attention;
    const auto& f = s.layers[i].mlp;
    switch (pattern[i]) {
      case 'M':
        EXPECT_EQ(a.kind, "mamba") << i;
        EXPECT_EQ(a.mamba_num_heads, 64);
        EXPECT_EQ(a.mamba_head_dim, 64);
        EXPECT_EQ(a.mamba_state_dim, 128);
        EXPECT_EQ(a.mamba_num_groups, 8);
        EXPECT_EQ(f.kind, "no_mlp") << i;
        break;
      case '*':
        EXPECT_EQ(a.kind, "gqa") << i;
        EXPECT_EQ(a.num_heads, 32);
        EXPECT_EQ(a.num_query_groups, 2);
        EXPECT_EQ(a.kv_channels, 128);
        EXPECT_EQ(f.kind, "no_mlp") << i;
        break;
      default:
        EXPECT_EQ(a.kind, "no_attention") << i;
        EXPECT_EQ(f.kind, "moe") << i;
        EXPECT_EQ(f.num_experts, 128);
        EXPECT_EQ(f.top_k, 6);
        EXPECT_EQ(f.expert_ffn_hidden_size, 1856);
        EXPECT_EQ(f.shared_expert_ffn_hidden_size, 3712);
        EXPECT_TRUE(f.router_expert_bias);
    }
  }
  EXPECT_EQ(s.activation, "squared_relu");
  EXPECT_FALSE(s.gated_linear_unit);
  EXPECT_FALSE(s.add_bias_linear);
  EXPECT_EQ(s.position_embedding, PositionEmbedding::kNone);
  EXPECT_EQ(s.normalization, Normalization::kRMSNorm);
  EXPECT_FALSE(s.tie_embeddings);
  EXPECT_EQ(s.vocab_size, 131072);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(adapter_mapping, NemotronHRefusesWhatMegatronDoesNotBuild) {
  auto error_of = [](const std::string& key, const nlohmann::json& value) {
    auto config = bundled_json(kNano);
    config[key] = value;
    try {
      adapt(config);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_of("hybrid_override_pattern", "MEM").find("has 3 symbols for 52 layers"), std::string::npos);
  EXPECT_NE(error_of("hybrid_override_pattern", std::string(51, 'M') + "G").find("symbol 51 is 'G'"),
            std::string::npos);
  EXPECT_NE(error_of("conv_kernel", 3).find("only 4"), std::string::npos);
  EXPECT_NE(error_of("mlp_hidden_act", "silu").find("is not modelled"), std::string::npos);
  EXPECT_NE(error_of("use_bias", true).find("true is not modelled"), std::string::npos);
  EXPECT_NE(error_of("residual_in_fp32", true).find("fp32-residual-connection"), std::string::npos);
  // A dense Nemotron-H: '-' layers read intermediate_size.
  auto dense = bundled_json(kNano);
  std::string p = dense["hybrid_override_pattern"];
  for (char& c : p)
    if (c == 'E') c = '-';
  dense["hybrid_override_pattern"] = p;
  const ModelSpec d = adapt(dense);
  EXPECT_EQ(d.layers[1].mlp.kind, "dense");
  EXPECT_EQ(d.layers[1].mlp.ffn_hidden_size, 1856);
}

}  // namespace
}  // namespace mme::test
