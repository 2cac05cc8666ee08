// The DeepSeek-V2/V3 config mapping (HF DeepseekV2Config / DeepseekV3Config ->
// Megatron MLATransformerConfig), shared by the deepseek adapter and by moonlight_kimi,
// whose Moonlight and Kimi-K2 models use the DeepseekV3ForCausalLM architecture unchanged.
#pragma once

#include <string>
#include <string_view>

#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::plugins::deepseek {

struct DeepSeekStyle {
  std::string family;        // ModelSpec::family, e.g. "deepseek_v3", "moonlight", "kimi_k2"
  std::string_view adapter;  // the adapter that produced the spec
  // V3 lineage (deepseek_v3, kimi_k2): topk_method defaults to noaux_tc (the router has an
  // e_score_correction_bias) and the router runs in fp32 (Megatron-Bridge's DeepSeek-V3 /
  // Kimi bridges set moe_router_dtype fp32). V2 lineage: topk_method defaults to greedy.
  bool v3 = true;
};

// Maps a DeepSeek-style config:
//  - MLA attention from q_lora_rank (null: single q projection), kv_lora_rank,
//    qk_nope_head_dim, qk_rope_head_dim, v_head_dim; head_dim and num_key_value_heads are
//    ignored; the q/kv latent norms are on (qk_layernorm);
//  - MoE on layer i iff n_routed_experts is set and i >= first_k_dense_replace and
//    i % moe_layer_freq == 0 (HF modeling_deepseek.py); dense layers use intermediate_size;
//    shared experts = n_shared_experts x moe_intermediate_size;
//  - router expert bias iff topk_method is noaux_tc;
//  - MTP depth from num_nextn_predict_layers.
// Throws ConfigError naming in.source and the key.
ModelSpec map_deepseek_config(const ConfigInput& in, const DeepSeekStyle& style);

}  // namespace mme::plugins::deepseek
