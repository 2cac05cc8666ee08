// Helpers shared by the Hugging Face config adapters (deepseek, qwen, moonlight_kimi,
// generic_hf): bounded reads of the keys every HF decoder config has, the attention shapes
// (GQA heads, MLA dimensions), MoE sanity checks, and the final bookkeeping of a ModelSpec.
// Every error is a ConfigError naming the source file and the JSON key.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/config_reader.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::plugins::hf {

// The config's model_type, or "" when it is absent or not a string (match() never throws).
std::string model_type(const nlohmann::json& config);
// True when the config's "architectures" list names `architecture`.
bool has_architecture(const nlohmann::json& config, std::string_view architecture);
// True when the key is present and not null (no type check: for match()).
bool has_key(const nlohmann::json& config, std::string_view key);

// A non-negative integer no larger than `max` (experts are bounded by ConfigReader::kMaxCount,
// MTP depths by kMaxLayers); `fallback` when the key is absent or null.
std::int64_t count_at_most(ConfigReader& r, std::string_view key, std::int64_t max, std::int64_t fallback);

// A new spec with its provenance filled in.
ModelSpec start_spec(const ConfigInput& in, std::string family, std::string_view adapter);

// Reads the keys every HF decoder config has into `spec`: num_hidden_layers, hidden_size,
// vocab_size (unpadded), max_position_embeddings, tie_word_embeddings (default
// `tie_default`, the family's HF default), the norm (RMSNorm when rms_norm_eps is present,
// else LayerNorm when layer_norm_eps / layer_norm_epsilon / norm_epsilon is) and the
// dropouts (attention_dropout, hidden_dropout; 0 when absent). Returns false when no
// epsilon key says which norm the model uses (RMSNorm is then assumed).
bool read_common(ConfigReader& r, ModelSpec& spec, bool tie_default);

// The activation name from the first present key of `keys`, lower case; `fallback` if none.
std::string read_activation(ConfigReader& r, std::initializer_list<std::string_view> keys, std::string fallback);
// True for activations HF uses with a gated MLP (gate_proj / up_proj / down_proj):
// silu and swish (SwiGLU).
bool is_swiglu_activation(std::string_view activation);

// Attention heads of a GQA/MHA/MQA layer: num_attention_heads, num_key_value_heads (default
// num_attention_heads; must divide it), and kv_channels from head_dim when present, else
// hidden_size / num_attention_heads (which must then divide evenly). With
// `require_head_dim` the head_dim key is required.
struct GqaHeads {
  std::int64_t heads = 0, groups = 0, kv_channels = 0;
};
GqaHeads read_gqa_heads(ConfigReader& r, std::int64_t hidden_size, bool require_head_dim);
// A "gqa" attention block of those heads (read_gqa_heads), its other fields at their defaults.
AttentionSpec read_gqa_attention(ConfigReader& r, std::int64_t hidden_size, bool require_head_dim);

// A multi-latent attention block (DeepSeek-V2/V3 layout): num_attention_heads,
// q_lora_rank (the key must be present; null = a single q projection), kv_lora_rank,
// qk_nope_head_dim, qk_rope_head_dim, v_head_dim. head_dim and num_key_value_heads are not
// read (MLA has neither; newer configs carry head_dim = qk_rope_head_dim).
AttentionSpec read_mla_attention(ConfigReader& r, const nlohmann::json& config);

// Top-k of a MoE router, checked against the expert count (both keys named on error).
std::int64_t read_top_k(ConfigReader& r, std::string_view key, std::int64_t experts, std::string_view experts_key);

// DeepSeek-style shared experts: `n_shared_experts` (0 when absent) x `expert_width`.
std::int64_t read_shared_experts_width(ConfigReader& r, std::int64_t expert_width);

// Qwen-MoE's mlp_only_layers (empty when absent); every entry must be a layer of the model.
std::set<std::int64_t> read_mlp_only_layers(ConfigReader& r, std::int64_t num_layers);

// Fills spec.layers: every layer gets `attention`; layer i gets `moe` where is_moe(i), else a
// dense MLP of intermediate_size (read, and required, only when some layer is dense).
// `sandwich_norms` adds the Gemma-2 post-attention and post-MLP norms.
void build_layers(ConfigReader& r, ModelSpec& spec, const AttentionSpec& attention, const MlpSpec& moe,
                  const std::function<bool(std::int64_t)>& is_moe, bool sandwich_norms = false);

// Depth of multi-token prediction from the first present key of `keys` (0 when none).
std::int64_t read_mtp_depth(ConfigReader& r, std::initializer_list<std::string_view> keys);

// Refuses a spec whose parameter count no real model comes near (more than
// kMaxPlausibleParams), so later 64-bit arithmetic cannot overflow; names the keys.
inline constexpr long double kMaxPlausibleParams = 1e15L;
void check_plausible_size(const ModelSpec& spec, const ConfigReader& r);

// Final bookkeeping: keys_read (each key once, in reading order) and the size check.
void finish_spec(ModelSpec& spec, const ConfigReader& r);

}  // namespace mme::plugins::hf
