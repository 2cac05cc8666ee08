#include "hf_common.hpp"

#include <set>

#include <fmt/core.h>

#include <mme/sdk/error.hpp>
#include <mme/sdk/text.hpp>

namespace mme::plugins::hf {

std::string model_type(const nlohmann::json& config) {
  if (!config.is_object()) return {};
  auto it = config.find("model_type");
  if (it == config.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

bool has_architecture(const nlohmann::json& config, std::string_view architecture) {
  if (!config.is_object()) return false;
  auto it = config.find("architectures");
  if (it == config.end() || !it->is_array()) return false;
  for (const auto& a : *it)
    if (a.is_string() && a.get<std::string>() == architecture) return true;
  return false;
}

bool has_key(const nlohmann::json& config, std::string_view key) {
  if (!config.is_object()) return false;
  auto it = config.find(key);
  return it != config.end() && !it->is_null();
}

std::int64_t count_at_most(ConfigReader& r, std::string_view key, std::int64_t max, std::int64_t fallback) {
  const std::int64_t v = r.count_or(key, fallback);
  if (v > max) r.fail(key, fmt::format("{} is larger than {}, which no real model has", v, max));
  return v;
}

ModelSpec start_spec(const ConfigInput& in, std::string family, std::string_view adapter) {
  ModelSpec spec;
  spec.name = in.name;
  spec.source = in.source;
  spec.family = std::move(family);
  spec.model_type = model_type(in.config);
  spec.adapter = std::string(adapter);
  return spec;
}

namespace {

double read_dropout(ConfigReader& r, std::string_view key) {
  const double p = r.number_or(key, 0.0);
  if (p < 0.0 || p >= 1.0) r.fail(key, fmt::format("a dropout rate must be in [0, 1), got {}", p));
  return p;
}

// A norm epsilon: a small positive number (validated, its value has no memory effect).
void read_epsilon(ConfigReader& r, std::string_view key) {
  const double eps = r.number_or(key, 1e-6);
  if (eps <= 0.0 || eps >= 1.0) r.fail(key, fmt::format("expected a small positive number, got {}", eps));
}

}  // namespace

bool read_common(ConfigReader& r, ModelSpec& spec, bool tie_default) {
  spec.num_layers = r.require_layers("num_hidden_layers");
  spec.hidden_size = r.require_size("hidden_size");
  spec.vocab_size = r.require_size("vocab_size");
  spec.max_position_embeddings = r.size_or("max_position_embeddings", 0);
  spec.tie_embeddings = r.bool_or("tie_word_embeddings", tie_default);
  bool decided = true;
  if (auto key = r.first_present({"rms_norm_eps"})) {
    read_epsilon(r, *key);
    spec.normalization = Normalization::kRMSNorm;
  } else if (auto ln = r.first_present({"layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"})) {
    read_epsilon(r, *ln);
    spec.normalization = Normalization::kLayerNorm;
  } else {
    spec.normalization = Normalization::kRMSNorm;
    decided = false;
  }
  spec.attention_dropout = read_dropout(r, "attention_dropout");
  spec.hidden_dropout = read_dropout(r, "hidden_dropout");
  return decided;
}

std::string read_activation(ConfigReader& r, std::initializer_list<std::string_view> keys, std::string fallback) {
  std::string act = std::move(fallback);
  for (auto k : keys) {
    if (auto v = r.optional_string(k)) {
      act = *v;
      if (act.empty()) r.fail(k, "expected an activation name, got an empty string");
      break;
    }
  }
  return lower(act);
}

bool is_swiglu_activation(std::string_view activation) { return activation == "silu" || activation == "swish"; }

AttentionSpec read_gqa_attention(ConfigReader& r, std::int64_t hidden_size, bool require_head_dim) {
  const GqaHeads heads = read_gqa_heads(r, hidden_size, require_head_dim);
  AttentionSpec a;
  a.kind = "gqa";
  a.num_heads = heads.heads;
  a.num_query_groups = heads.groups;
  a.kv_channels = heads.kv_channels;
  return a;
}

GqaHeads read_gqa_heads(ConfigReader& r, std::int64_t hidden_size, bool require_head_dim) {
  GqaHeads g;
  g.heads = r.require_size("num_attention_heads");
  g.groups = r.size_or("num_key_value_heads", g.heads);
  if (g.groups > g.heads || g.heads % g.groups != 0)
    r.fail("num_key_value_heads", fmt::format("{} does not divide num_attention_heads = {}", g.groups, g.heads));
  if (require_head_dim) {
    g.kv_channels = r.require_size("head_dim");
  } else if (auto d = r.optional_size("head_dim")) {
    g.kv_channels = *d;
  } else {
    // HF (and Megatron's kv_channels default): hidden_size // num_attention_heads.
    if (hidden_size % g.heads != 0)
      r.fail("num_attention_heads",
             fmt::format("{} heads do not divide hidden_size = {} and there is no head_dim key", g.heads, hidden_size));
    g.kv_channels = hidden_size / g.heads;
  }
  return g;
}

AttentionSpec read_mla_attention(ConfigReader& r, const nlohmann::json& config) {
  AttentionSpec a;
  a.kind = "mla";
  a.num_heads = r.require_size("num_attention_heads");
  // MLA has no KV heads; Megatron's num_query_groups only feeds a divisibility check.
  a.num_query_groups = a.num_heads;
  // q_lora_rank: null means no query compression (DeepSeek-V2-Lite, Moonlight). The key
  // itself must be there: HF would otherwise silently assume 1536.
  if (!config.contains("q_lora_rank"))
    r.fail("q_lora_rank", "required key is missing (null means a single query projection)");
  a.q_lora_rank = r.optional_size("q_lora_rank");
  a.kv_lora_rank = r.require_size("kv_lora_rank");
  a.qk_head_dim = r.require_size("qk_nope_head_dim");
  a.qk_pos_emb_head_dim = r.require_size("qk_rope_head_dim");
  a.v_head_dim = r.require_size("v_head_dim");
  a.kv_channels = a.qk_head_dim + a.qk_pos_emb_head_dim;  // informational: MLA's query/key head width
  // Megatron's qk_layernorm for MLA enables the q/kv latent norms (q_a_layernorm, kv_a_layernorm).
  a.qk_norm = true;
  return a;
}

std::int64_t read_top_k(ConfigReader& r, std::string_view key, std::int64_t experts, std::string_view experts_key) {
  const std::int64_t k = r.require_size(key);
  if (k > experts) r.fail(key, fmt::format("{} is more than the {} experts of {}", k, experts, experts_key));
  return k;
}

std::int64_t read_shared_experts_width(ConfigReader& r, std::int64_t expert_width) {
  const std::int64_t shared = count_at_most(r, "n_shared_experts", ConfigReader::kMaxCount, 0);
  // Megatron-Bridge: moe_shared_expert_intermediate_size = moe_intermediate_size x n_shared_experts.
  if (shared > ConfigReader::kMaxDimension / expert_width)
    r.fail("n_shared_experts",
           fmt::format("{} shared experts of width {} are wider than any real model", shared, expert_width));
  return shared * expert_width;
}

std::set<std::int64_t> read_mlp_only_layers(ConfigReader& r, std::int64_t num_layers) {
  std::set<std::int64_t> out;
  for (std::int64_t i : r.count_list_or("mlp_only_layers", {})) {
    if (i >= num_layers)
      r.fail("mlp_only_layers", fmt::format("layer {} does not exist (num_hidden_layers = {})", i, num_layers));
    out.insert(i);
  }
  return out;
}

void build_layers(ConfigReader& r, ModelSpec& spec, const AttentionSpec& attention, const MlpSpec& moe,
                  const std::function<bool(std::int64_t)>& is_moe, bool sandwich_norms) {
  const std::int64_t L = spec.num_layers;
  bool any_dense = false;
  for (std::int64_t i = 0; i < L && !any_dense; ++i) any_dense = !is_moe(i);
  MlpSpec dense;
  dense.kind = "dense";
  if (any_dense) dense.ffn_hidden_size = r.require_size("intermediate_size");
  spec.layers.clear();
  spec.layers.reserve(static_cast<std::size_t>(L));
  for (std::int64_t i = 0; i < L; ++i) {
    LayerSpec layer;
    layer.attention = attention;
    layer.mlp = is_moe(i) ? moe : dense;
    layer.post_attention_norm = sandwich_norms;
    layer.post_mlp_norm = sandwich_norms;
    spec.layers.push_back(std::move(layer));
  }
}

std::int64_t read_mtp_depth(ConfigReader& r, std::initializer_list<std::string_view> keys) {
  for (auto k : keys)
    if (r.has(k)) return count_at_most(r, k, ConfigReader::kMaxLayers, 0);
  return 0;
}

namespace {

// Approximate weight count of one decoder layer, in long double so that absurd sizes cannot
// overflow: the GEMM weights only (biases and norms are vanishingly small next to them).
// MLA: q_a_proj + q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_b_proj, o_proj; GQA: q/k/v_proj
// (Megatron linear_qkv) + o_proj (linear_proj); dense: gate/up/down_proj (linear_fc1/fc2);
// MoE: every expert's gate/up/down_proj + the router gate [E, h] + the shared experts.
long double approx_layer(const ModelSpec& m, const LayerSpec& l, long double& attention, long double& mlp) {
  const long double h = static_cast<long double>(m.hidden_size);
  const auto& a = l.attention;
  const auto& f = l.mlp;
  const long double n = static_cast<long double>(a.num_heads);
  if (a.kind == "mla") {
    const long double dq = static_cast<long double>(a.qk_head_dim + a.qk_pos_emb_head_dim);
    const long double kv_r = static_cast<long double>(a.kv_lora_rank);
    attention = a.q_lora_rank
                    ? h * static_cast<long double>(*a.q_lora_rank) + static_cast<long double>(*a.q_lora_rank) * n * dq
                    : h * n * dq;
    attention += h * (kv_r + static_cast<long double>(a.qk_pos_emb_head_dim)) +
                 kv_r * n * static_cast<long double>(a.qk_head_dim + a.v_head_dim) +
                 n * static_cast<long double>(a.v_head_dim) * h;
  } else {
    const long double d = static_cast<long double>(a.kv_channels);
    attention = h * (n + 2 * static_cast<long double>(a.num_query_groups)) * d + n * d * h;
  }
  const long double g = m.gated_linear_unit ? 3 : 2;
  if (f.kind == "moe") {
    mlp = static_cast<long double>(f.num_experts) * (g * h * static_cast<long double>(f.expert_ffn_hidden_size) + h) +
          g * h * static_cast<long double>(f.shared_expert_ffn_hidden_size);
  } else {
    mlp = g * h * static_cast<long double>(f.ffn_hidden_size);
  }
  return attention + mlp;
}

}  // namespace

void check_plausible_size(const ModelSpec& m, const ConfigReader& r) {
  const long double h = static_cast<long double>(m.hidden_size);
  const long double embedding =
      2 * static_cast<long double>(m.vocab_size) * h + static_cast<long double>(m.max_position_embeddings) * h;
  long double attention = 0, mlp = 0, total = embedding;
  for (const auto& l : m.layers) {
    long double a = 0, f = 0;
    total += approx_layer(m, l, a, f);
    attention += a;
    mlp += f;
  }
  if (!m.layers.empty() && m.mtp_num_layers > 0) {
    long double a = 0, f = 0;
    const long double per = approx_layer(m, m.layers.back(), a, f) + 2 * h * h;
    total += static_cast<long double>(m.mtp_num_layers) * per;
    mlp += static_cast<long double>(m.mtp_num_layers) * per;
  }
  if (total <= kMaxPlausibleParams) return;
  std::string_view culprit = "num_hidden_layers and hidden_size";
  if (embedding >= attention && embedding >= mlp)
    culprit = "vocab_size and hidden_size";
  else if (attention >= mlp)
    culprit = "num_hidden_layers, hidden_size and the attention head sizes";
  else
    culprit = "num_hidden_layers, hidden_size and the MLP / expert sizes";
  throw ConfigError(
      fmt::format("{}: the config describes about {:.3g} parameters, more than {:.0g}, which no real "
                  "model comes near; check {}",
                  r.source(), static_cast<double>(total), static_cast<double>(kMaxPlausibleParams), culprit));
}

void finish_spec(ModelSpec& spec, const ConfigReader& r) {
  std::set<std::string> seen;
  spec.keys_read.clear();
  for (const auto& k : r.keys_read())
    if (seen.insert(k).second) spec.keys_read.push_back(k);
  check_plausible_size(spec, r);
}

}  // namespace mme::plugins::hf
