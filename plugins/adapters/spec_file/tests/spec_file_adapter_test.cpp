// What the spec_file adapter builds from a spec file's model section (docs/spec-files.md): the
// configuration guide's defaults where a field is absent (RMSNorm, SwiGLU, rotary positions, no
// biases, untied embeddings, no dropout), Megatron-LM's MLATransformerConfig defaults for MLA,
// and the fields that change them. The file is read by libmme (parse_spec_text) and adapted
// through the full test registry (tests/support/adapters), as `mme estimate --config` does.
#include <string>

#include <gtest/gtest.h>

#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/error.hpp>

#include "test_registry.hpp"

namespace mme::test {
namespace {

// Every required field of the model section; lines 2 to 7 of the file.
const std::string kModel = R"(model:
  num_layers: 2
  hidden_size: 4096
  num_attention_heads: 32
  ffn_hidden_size: 11008
  vocab_size: 32000
  max_position_embeddings: 4096
)";

ModelSpec model_of(const std::string& extra_fields) {
  const SpecFile s = parse_spec_text(kModel + extra_fields, "spec.yaml", SpecFormat::kYaml);
  return load_spec_model(s, full_registry());
}

std::string error_of(const std::string& extra_fields) {
  try {
    (void)model_of(extra_fields);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SpecFileAdapter, TheGuidesDefaults) {
  const ModelSpec m = model_of("");
  EXPECT_EQ(m.adapter, "spec_file");
  EXPECT_EQ(m.family, "spec-file");
  EXPECT_EQ(m.normalization, Normalization::kRMSNorm);
  EXPECT_EQ(m.position_embedding, PositionEmbedding::kRope);
  EXPECT_TRUE(m.gated_linear_unit);
  EXPECT_EQ(m.activation, "silu");
  EXPECT_FALSE(m.add_bias_linear);
  EXPECT_FALSE(m.tie_embeddings);
  EXPECT_EQ(m.hidden_dropout, 0.0);
  EXPECT_EQ(m.attention_dropout, 0.0);
  EXPECT_EQ(m.mtp_num_layers, 0);
  ASSERT_EQ(m.layers.size(), 2u);
  for (const auto& l : m.layers) {
    EXPECT_EQ(l.attention.kind, "gqa");
    EXPECT_EQ(l.attention.num_query_groups, 32);  // num_attention_heads
    EXPECT_EQ(l.attention.kv_channels, 128);      // hidden_size / num_attention_heads
    EXPECT_FALSE(l.attention.qkv_bias);
    EXPECT_FALSE(l.attention.qk_norm);
    EXPECT_EQ(l.mlp.kind, "dense");
    EXPECT_EQ(l.mlp.ffn_hidden_size, 11008);
  }
}

TEST(SpecFileAdapter, OptInFieldsChangeTheModel) {
  const ModelSpec m = model_of(
      "  position_embedding_type: learned_absolute\n"
      "  normalization: layernorm\n"  // matched ignoring case
      "  activation_func: gelu\n"
      "  gated_linear_unit: false\n"
      "  add_bias_linear: true\n"
      "  add_qkv_bias: true\n"
      "  qk_layernorm: true\n"
      "  share_embeddings_and_output_weights: true\n"
      "  hidden_dropout: 0.1\n"
      "  attention_dropout: 0.05\n"
      "  num_query_groups: 8\n"
      "  kv_channels: 96\n");
  EXPECT_EQ(m.position_embedding, PositionEmbedding::kLearnedAbsolute);
  EXPECT_EQ(m.normalization, Normalization::kLayerNorm);
  EXPECT_EQ(m.activation, "gelu");
  EXPECT_FALSE(m.gated_linear_unit);
  EXPECT_TRUE(m.add_bias_linear);
  EXPECT_TRUE(m.tie_embeddings);
  EXPECT_DOUBLE_EQ(m.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(m.attention_dropout, 0.05);
  EXPECT_TRUE(m.layers[0].attention.qkv_bias);
  EXPECT_TRUE(m.layers[0].attention.qk_norm);
  EXPECT_EQ(m.layers[0].attention.num_query_groups, 8);
  EXPECT_EQ(m.layers[0].attention.kv_channels, 96);
}

TEST(SpecFileAdapter, MlaRanksFollowMegatronDefaults) {
  const ModelSpec m = model_of("  multi_latent_attention: true\n");
  const auto& a = m.layers[0].attention;
  EXPECT_EQ(a.kind, "mla");
  EXPECT_EQ(a.q_lora_rank, std::optional<std::int64_t>(512));
  EXPECT_EQ(a.kv_lora_rank, 512);
  EXPECT_EQ(a.qk_head_dim, 128);
  EXPECT_EQ(a.qk_pos_emb_head_dim, 64);
  EXPECT_EQ(a.v_head_dim, 128);
  const ModelSpec lite = model_of("  multi_latent_attention: true\n  q_lora_rank: null\n  kv_lora_rank: 256\n");
  EXPECT_FALSE(lite.layers[0].attention.q_lora_rank.has_value());
  EXPECT_EQ(lite.layers[0].attention.kv_lora_rank, 256);
  EXPECT_EQ(error_of("  multi_latent_attention: true\n  kv_channels: 64\n"),
            "spec.yaml:9: model.kv_channels: does not apply to multi-latent attention");
}

TEST(SpecFileAdapter, FieldsOfAnotherBlockKindAreRefused) {
  EXPECT_EQ(error_of("  kv_lora_rank: 256\n"),
            "spec.yaml:8: model.kv_lora_rank: only applies with multi_latent_attention: true");
  EXPECT_EQ(error_of("  moe_router_topk: 2\n"),
            "spec.yaml:8: model.moe_router_topk: only applies to MoE models (set num_experts)");
  EXPECT_EQ(error_of("  num_query_groups: 5\n"),
            "spec.yaml:8: model.num_query_groups: must divide num_attention_heads (num_query_groups 5, "
            "num_attention_heads 32)");
}

}  // namespace
}  // namespace mme::test
