#include "mme/sdk/model_spec.hpp"

#include <cmath>

#include <fmt/core.h>

#include "mme/sdk/config_reader.hpp"
#include "mme/sdk/error.hpp"

namespace mme {

namespace {

void require_positive(const ModelSpec& m, std::string_view field, std::int64_t v, std::int64_t max) {
  if (v <= 0) throw ConfigError(fmt::format("{}: {} must be positive, got {}", m.name, field, v));
  if (v > max)
    throw ConfigError(fmt::format("{}: {} = {} is larger than {}, which no real model has", m.name, field, v, max));
}

}  // namespace

void require_layer_field(const ModelSpec& model, std::size_t index, std::string_view field, std::int64_t value,
                         std::int64_t max) {
  require_positive(model, fmt::format("layer {} {}", index, field), value, max);
}

LayerKinds group_layer_kinds(const ModelSpec& spec) {
  LayerKinds out;
  out.kind_of_layer.reserve(spec.layers.size());
  for (const auto& layer : spec.layers) {
    std::size_t idx = 0;
    while (idx < out.kinds.size() && !(*out.kinds[idx] == layer)) ++idx;
    if (idx == out.kinds.size()) out.kinds.push_back(&layer);
    out.kind_of_layer.push_back(idx);
  }
  return out;
}

void validate_model_spec(const ModelSpec& m) {
  constexpr std::int64_t kDim = ConfigReader::kMaxDimension;
  if (m.num_layers > ConfigReader::kMaxLayers)
    throw ConfigError(fmt::format("{}: num_layers: {}", m.name, too_many_layers(std::to_string(m.num_layers))));
  require_positive(m, "num_layers", m.num_layers, ConfigReader::kMaxLayers);
  require_positive(m, "hidden_size", m.hidden_size, kDim);
  require_positive(m, "vocab_size", m.vocab_size, kDim);
  if (m.max_position_embeddings < 0 || m.max_position_embeddings > kDim)
    throw ConfigError(fmt::format("{}: max_position_embeddings must be between 0 and {}, got {}", m.name, kDim,
                                  m.max_position_embeddings));
  if (static_cast<std::int64_t>(m.layers.size()) != m.num_layers)
    throw ConfigError(fmt::format("{}: {} layer specs for num_layers = {}", m.name, m.layers.size(), m.num_layers));
  if (m.mtp_num_layers < 0 || m.mtp_num_layers > ConfigReader::kMaxLayers)
    throw ConfigError(fmt::format("{}: mtp_num_layers must be between 0 and {}, got {}", m.name,
                                  ConfigReader::kMaxLayers, m.mtp_num_layers));
  // Written so that NaN fails too (it once passed `d < 0 || d >= 1` as no dropout).
  for (const double d : {m.hidden_dropout, m.attention_dropout})
    if (!(d >= 0 && d < 1)) throw ConfigError(fmt::format("{}: dropout rates must be in [0, 1), got {}", m.name, d));
  // transformer_config.py __post_init__: the clamp must be finite and positive (0 here: none); the
  // offset finite.
  if (!(m.activation_clamp_value >= 0 && std::isfinite(m.activation_clamp_value)))
    throw ConfigError(fmt::format("{}: activation_func_clamp_value must be finite and greater than zero, got {}",
                                  m.name, m.activation_clamp_value));
  if (!(m.rope_yarn_factor >= 1 && std::isfinite(m.rope_yarn_factor)))
    throw ConfigError(
        fmt::format("{}: the YaRN scaling factor must be finite and at least 1, got {}", m.name, m.rope_yarn_factor));
  if (!std::isfinite(m.glu_linear_offset))
    throw ConfigError(fmt::format("{}: glu_linear_offset must be finite, got {}", m.name, m.glu_linear_offset));
  if ((m.activation_clamp_value > 0 || m.glu_linear_offset != 0) && !m.gated_linear_unit)
    throw ConfigError(fmt::format("{}: a clamped or offset activation needs a gated linear unit (glu())", m.name));
  if (m.lm_blocks.embedding.empty() || m.lm_blocks.output_head.empty() || m.lm_blocks.mtp_projection.empty())
    throw ConfigError(fmt::format("{}: the embedding, output head and MTP projection kinds must be named", m.name));
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto& a = m.layers[i].attention;
    const auto& f = m.layers[i].mlp;
    const std::string where = fmt::format("layer {}", i);
    if (a.kind.empty()) throw ConfigError(fmt::format("{}: {}: attention kind is empty", m.name, where));
    if (f.kind.empty()) throw ConfigError(fmt::format("{}: {}: mlp kind is empty", m.name, where));
    require_positive(m, where + " num_attention_heads", a.num_heads, kDim);
    if (a.num_query_groups <= 0 || a.num_query_groups > a.num_heads || a.num_heads % a.num_query_groups != 0)
      throw ConfigError(fmt::format("{}: {}: num_query_groups = {} must divide num_attention_heads = {}", m.name, where,
                                    a.num_query_groups, a.num_heads));
    if (a.window < 0 || a.window > kDim)
      throw ConfigError(fmt::format("{}: {}: the attention window must be between 0 (none) and {}, got {}", m.name,
                                    where, kDim, a.window));
  }
}

}  // namespace mme
