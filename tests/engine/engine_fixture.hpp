// Shared helpers for the engine tests: a registry with the built-in layer models linked
// statically, and hand-built model specs.
#pragma once

#include <string>

#include <mme/engine/estimator.hpp>
#include <mme/engine/registry.hpp>

#include "layer_plugins.hpp"

namespace mme::test {

inline void register_layer_models(Registry& r) { test::register_layer_plugins(r); }

// A GPT model the way Korthikanti et al. describe it: MHA, LayerNorm, GELU MLP of 4h, no
// biases counted in the 12 h^2 weights per layer, dropout 0.1.
inline ModelSpec gpt_model(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t vocab = 128) {
  ModelSpec m;
  m.name = "gpt-test";
  m.family = "test";
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.vocab_size = vocab;
  m.max_position_embeddings = 2048;
  m.tie_embeddings = true;
  m.position_embedding = PositionEmbedding::kRope;
  m.normalization = Normalization::kLayerNorm;
  m.add_bias_linear = false;
  m.gated_linear_unit = false;
  m.activation = "gelu";
  m.hidden_dropout = 0.1;
  m.attention_dropout = 0.1;
  LayerSpec l;
  l.attention.kind = "gqa";
  l.attention.num_heads = heads;
  l.attention.num_query_groups = heads;
  l.attention.kv_channels = hidden / heads;
  l.mlp.kind = "dense";
  l.mlp.ffn_hidden_size = 4 * hidden;
  m.layers.assign(static_cast<std::size_t>(layers), l);
  return m;
}

// Sum of the named components of a stage whose name starts with `prefix`.
inline std::int64_t component_sum(const StageEstimate& s, const std::string& prefix) {
  std::int64_t total = 0;
  for (const auto& c : s.components)
    if (c.name.rfind(prefix, 0) == 0) total += c.bytes;
  return total;
}

}  // namespace mme::test
