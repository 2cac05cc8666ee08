#include "acme_lm_adapter.hpp"

#include <fmt/core.h>

#include <mme/sdk/config_reader.hpp>
#include <mme/sdk/error.hpp>

namespace acme {

int AcmeLmAdapter::match(const nlohmann::json& config) const {
  if (!config.is_object()) return 0;
  auto it = config.find("model_type");
  return it != config.end() && it->is_string() && *it == "acme_lm" ? 100 : 0;
}

mme::ModelSpec AcmeLmAdapter::adapt(const mme::ConfigInput& input) const {
  // ConfigReader: typed reads whose errors name the source and the key, and a record of the
  // keys read (shown by `mme params --json`).
  mme::ConfigReader r(input.config, input.source);
  mme::ModelSpec spec;
  spec.name = input.name;
  spec.source = input.source;
  spec.family = "acme_lm";
  spec.model_type = r.string_or("model_type", "acme_lm");
  spec.adapter = std::string(name());

  spec.num_layers = r.require_layers("n_layers");  // at most ConfigReader::kMaxLayers
  spec.hidden_size = r.require_size("d_model");
  spec.vocab_size = r.require_size("vocab");
  spec.max_position_embeddings = r.size_or("context_length", 4096);
  spec.tie_embeddings = r.bool_or("tie_word_embeddings", false);
  spec.position_embedding = mme::PositionEmbedding::kRope;
  spec.normalization = mme::Normalization::kRMSNorm;
  spec.add_bias_linear = false;
  spec.gated_linear_unit = true;  // SwiGLU
  spec.activation = "silu";

  // Attention: grouped-query, handled by the built-in "gqa" layer-memory model.
  mme::AttentionSpec attention;
  attention.kind = "gqa";
  attention.num_heads = r.require_size("n_heads");
  attention.num_query_groups = r.size_or("n_kv_heads", attention.num_heads);
  if (attention.num_heads % attention.num_query_groups != 0)
    r.fail("n_kv_heads",
           fmt::format("{} key/value heads do not divide {} heads", attention.num_query_groups, attention.num_heads));
  if (spec.hidden_size % attention.num_heads != 0 && !r.has("head_dim"))
    r.fail("n_heads",
           fmt::format("{} heads do not divide d_model {} (give head_dim)", attention.num_heads, spec.hidden_size));
  attention.kv_channels = r.size_or("head_dim", spec.hidden_size / attention.num_heads);

  // MLP: dense SwiGLU ("dense" model); every moe_every-th layer (1-based) a mixture of experts
  // ("moe" model) when n_experts is set.
  mme::MlpSpec dense;
  dense.kind = "dense";
  dense.ffn_hidden_size = r.require_size("ffn_dim");
  mme::MlpSpec moe;
  const std::int64_t experts = r.count_or("n_experts", 0);
  const std::int64_t every = r.size_or("moe_every", 1);
  if (experts > 0) {
    moe.kind = "moe";
    moe.num_experts = experts;
    moe.top_k = r.require_size("experts_per_token");
    if (moe.top_k > experts)
      r.fail("experts_per_token", fmt::format("{} is more than the {} experts", moe.top_k, experts));
    moe.expert_ffn_hidden_size = r.require_size("expert_ffn_dim");
    moe.shared_expert_ffn_hidden_size = r.count_or("shared_expert_ffn_dim", 0);
  }
  for (std::int64_t i = 0; i < spec.num_layers; ++i) {
    mme::LayerSpec layer;
    layer.attention = attention;
    layer.mlp = experts > 0 && (i + 1) % every == 0 ? moe : dense;
    spec.layers.push_back(layer);
  }

  spec.keys_read = r.keys_read();
  if (r.has("sliding_window"))
    spec.warnings.push_back("sliding_window is set: attention memory is estimated for full causal attention");
  mme::validate_model_spec(spec);  // throws ConfigError naming the field
  return spec;
}

}  // namespace acme
