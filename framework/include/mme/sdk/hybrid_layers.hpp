// A hybrid model's one-block layers (Megatron-LM's --hybrid-layer-pattern, Nemotron-H's
// hybrid_override_pattern; megatron/core/models/hybrid/hybrid_block.py HybridStack): the layer each
// pattern symbol stands for, and a layer's symbol back. The readers of patterns (the megatron_args,
// nemotron_h and spec_file adapters) and the spec-file writer share these, with their own errors.
#pragma once

#include <algorithm>
#include <optional>

#include "mme/sdk/model_spec.hpp"

namespace mme {

// The layer a pattern symbol stands for: 'M' the Mamba mixer, '*' the attention, '-' the dense MLP,
// 'E' the MoE, each beside the identity block ("no_mlp", "no_attention"); nullopt for any other
// symbol. The MLP layers' identity attention keeps `attention`'s heads, as every layer of a model
// carries them.
inline std::optional<LayerSpec> hybrid_layer(char symbol, const AttentionSpec& mixer, const AttentionSpec& attention,
                                             const MlpSpec& dense, const MlpSpec& moe) {
  AttentionSpec none = attention;
  none.kind = "no_attention";
  MlpSpec no_mlp;
  no_mlp.kind = "no_mlp";
  LayerSpec l;
  switch (symbol) {
    case 'M': l.attention = mixer, l.mlp = no_mlp; return l;
    case '*': l.attention = attention, l.mlp = no_mlp; return l;
    case '-': l.attention = none, l.mlp = dense; return l;
    case 'E': l.attention = none, l.mlp = moe; return l;
    default: return std::nullopt;
  }
}

// The pattern symbol of a layer of the built-in kinds (a "mamba" or "gqa" mixer beside no MLP, a
// "dense" or "moe" MLP beside no attention); 0 for a layer with both blocks or of another kind.
inline char hybrid_symbol(const LayerSpec& l) {
  const std::string &a = l.attention.kind, &f = l.mlp.kind;
  if (a == "mamba" && f == "no_mlp") return 'M';
  if (a == "gqa" && f == "no_mlp") return '*';
  if (a == "no_attention" && f == "dense") return '-';
  if (a == "no_attention" && f == "moe") return 'E';
  return 0;
}

// Whether a model is a hybrid one: a Mamba mixer or an identity block in some layer.
inline bool is_hybrid_model(const ModelSpec& m) {
  return std::any_of(m.layers.begin(), m.layers.end(), [](const LayerSpec& l) {
    return l.attention.kind == "mamba" || l.attention.kind == "no_attention" || l.mlp.kind == "no_mlp";
  });
}

}  // namespace mme
