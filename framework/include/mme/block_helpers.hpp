// Small helpers for layer-memory models (plugins): the terms every transformer block shares.
#pragma once

#include <cstdint>

#include "mme/layer_model.hpp"

namespace mme {

// Elements of one norm's weights: RMSNorm has a scale, LayerNorm a scale and a bias.
inline std::int64_t norm_weight_count(const ModelSpec& m, std::int64_t width) {
  return (m.normalization == Normalization::kLayerNorm ? 2 : 1) * width;
}

// Bytes of the 1-byte mask a bias-dropout-add keeps for its [s/TP, b, h] output
// (fused_bias_dropout.py), zero without hidden dropout.
inline std::int64_t bda_dropout_mask_bytes(const BlockContext& ctx) {
  return ctx.hidden_dropout > 0 ? ctx.local_tokens * ctx.model.hidden_size : 0;
}

// Key length the unfused attention scores of one CP rank span.
inline std::int64_t attention_key_length(const BlockContext& ctx) { return ctx.setup.seq_length / ctx.cp; }

// Bytes per element of the unfused [b, heads/TP, s, s] score tensors kept for backward
// (dot_product_attention.py): softmax output, plus dropout mask (1 B) and output with dropout.
inline std::int64_t unfused_score_bytes_per_element(const BlockContext& ctx) {
  return ctx.act_bytes + (ctx.attention_dropout > 0 ? 1 + ctx.act_bytes : 0);
}

// Adds a parameter term whose per-rank share is total / divisor.
inline void add_param(BlockParams& out, std::string_view name, ParamGroup group, ShardClass shard,
                      std::int64_t total, std::int64_t divisor, std::int64_t active = -1) {
  out.terms.push({name, group, shard, total, total / divisor, active < 0 ? total : active});
}

inline void add_act(BlockActivations& out, std::string_view name, std::int64_t bytes) {
  if (bytes != 0) out.saved.push({name, bytes});
}

}  // namespace mme
