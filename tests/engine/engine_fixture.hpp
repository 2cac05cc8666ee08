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

// The 4-layer model of the offload and CUDA-graph tests: GQA (16 heads of 64) + a GELU MLP of
// 4096, hidden 1024, no dropout; with unfused_setup(): sequence 2048, micro-batch 1, one GPU,
// unfused attention.
inline ModelSpec small_model_without_dropout(std::int64_t layers = 4) {
  ModelSpec m = gpt_model(layers, 1024, 16);
  m.hidden_dropout = 0;
  m.attention_dropout = 0;
  return m;
}
inline TrainingSetup unfused_setup() {
  TrainingSetup s;
  s.parallel.world_size = 1;
  s.seq_length = 2048;
  s.attention_backend = AttentionBackend::kUnfused;
  return s;
}

// Two pipeline stages on two GPUs, sequence 1024 (the rest Megatron-LM's defaults).
inline TrainingSetup two_stages() {
  TrainingSetup s;
  s.parallel.pp = 2;
  s.parallel.world_size = 2;
  s.seq_length = 1024;
  return s;
}

// Sum of the named components of a stage whose name starts with `prefix`.
inline std::int64_t component_sum(const StageEstimate& s, const std::string& prefix) {
  std::int64_t total = 0;
  for (const auto& c : s.components)
    if (c.name.rfind(prefix, 0) == 0) total += c.bytes;
  return total;
}

}  // namespace mme::test
