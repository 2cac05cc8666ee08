#include "spec_file_adapter.hpp"

#include <optional>

#include <fmt/core.h>

#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/hybrid_layers.hpp>

namespace mme::plugins {

namespace {

// Megatron-LM's MLATransformerConfig defaults.
constexpr std::int64_t kDefaultQLoraRank = 512;
constexpr std::int64_t kDefaultKvLoraRank = 512;
constexpr std::int64_t kDefaultQkHeadDim = 128;
constexpr std::int64_t kDefaultQkPosEmbHeadDim = 64;
constexpr std::int64_t kDefaultVHeadDim = 128;
constexpr std::int64_t kDefaultTopK = 2;

constexpr const char* kMlaFields[] = {"q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
                                      "v_head_dim"};
constexpr const char* kMoeFields[] = {
    "moe_router_topk",        "moe_ffn_hidden_size",           "moe_shared_expert_intermediate_size",
    "moe_shared_expert_gate", "moe_router_enable_expert_bias", "moe_router_dtype",
    "moe_layer_freq"};

AttentionSpec read_attention(SpecModelReader& r, std::int64_t hidden_size) {
  AttentionSpec a;
  a.num_heads = r.require_int("num_attention_heads");
  a.qkv_bias = r.bool_or("add_qkv_bias", false);
  a.qk_norm = r.bool_or("qk_layernorm", false);
  if (r.bool_or("multi_latent_attention", false)) {
    for (const char* f : {"num_query_groups", "kv_channels"})
      if (r.has(f)) r.fail(f, "does not apply to multi-latent attention");
    a.kind = "mla";
    a.num_query_groups = a.num_heads;  // MLA has no KV heads
    a.q_lora_rank = r.given("q_lora_rank") ? r.optional_int("q_lora_rank") : kDefaultQLoraRank;
    a.kv_lora_rank = r.int_or("kv_lora_rank", kDefaultKvLoraRank);
    a.qk_head_dim = r.int_or("qk_head_dim", kDefaultQkHeadDim);
    a.qk_pos_emb_head_dim = r.int_or("qk_pos_emb_head_dim", kDefaultQkPosEmbHeadDim);
    a.v_head_dim = r.int_or("v_head_dim", kDefaultVHeadDim);
    a.kv_channels = a.qk_head_dim + a.qk_pos_emb_head_dim;  // informational, as the HF adapters set it
    return a;
  }
  for (const char* f : kMlaFields)
    if (r.given(f)) r.fail(f, "only applies with multi_latent_attention: true");
  a.kind = "gqa";
  a.num_query_groups = r.int_or("num_query_groups", a.num_heads);
  if (a.num_query_groups > a.num_heads || a.num_heads % a.num_query_groups != 0)
    r.fail("num_query_groups", fmt::format("must divide num_attention_heads (num_query_groups {}, "
                                           "num_attention_heads {})",
                                           a.num_query_groups, a.num_heads));
  if (r.has("kv_channels")) {
    a.kv_channels = r.int_or("kv_channels", 0);
  } else {
    // The guide: hidden_size must be divisible by num_attention_heads (kv_channels' default).
    if (hidden_size % a.num_heads != 0)
      r.fail("hidden_size", fmt::format("must be divisible by num_attention_heads (hidden_size {}, "
                                        "num_attention_heads {}); or give kv_channels",
                                        hidden_size, a.num_heads));
    a.kv_channels = hidden_size / a.num_heads;
  }
  return a;
}

constexpr const char* kMambaFields[] = {"mamba_num_heads", "mamba_head_dim", "mamba_state_dim", "mamba_num_groups"};

// A hybrid model's layers (Megatron-LM's --hybrid-layer-pattern, docs/memory-model.md "Hybrid
// models"): one per symbol, 'M' a Mamba mixer, '*' the attention, '-' the dense MLP, 'E' the MoE,
// each beside the identity. The pipeline's split is the parallelism section's, so no '|'.
void read_hybrid_layers(SpecModelReader& r, ModelSpec& m, const AttentionSpec& attention, const MlpSpec& dense,
                        const MlpSpec& moe) {
  const std::string pattern = r.string_or("hybrid_layer_pattern", "");
  const char* field = "hybrid_layer_pattern";
  if (attention.kind != "gqa") r.fail("multi_latent_attention", "a hybrid model's attention layers are GQA here");
  if (r.given("moe_layer_freq")) r.fail("moe_layer_freq", "does not apply to a hybrid model: its E layers are MoE");
  AttentionSpec mixer = attention;
  mixer.kind = "mamba";
  mixer.mamba_head_dim = r.int_or("mamba_head_dim", 64);
  mixer.mamba_state_dim = r.int_or("mamba_state_dim", 128);
  mixer.mamba_num_groups = r.int_or("mamba_num_groups", 8);
  if (r.has("mamba_num_heads")) {
    mixer.mamba_num_heads = r.int_or("mamba_num_heads", 0);
  } else {
    if ((2 * m.hidden_size) % mixer.mamba_head_dim != 0)
      r.fail("mamba_head_dim",
             fmt::format("must divide 2 x hidden_size = {} when mamba_num_heads is not given", 2 * m.hidden_size));
    mixer.mamba_num_heads = 2 * m.hidden_size / mixer.mamba_head_dim;
  }
  for (const char c : pattern) {
    if (c == 'E' && moe.kind != "moe") r.fail(field, "'E' (MoE) layers need num_experts");
    if (c == '|')
      r.fail(field, "'|': the pipeline's split is the parallelism section's (pipeline_model_parallel_layout)");
    const std::optional<LayerSpec> layer = hybrid_layer(c, mixer, attention, dense, moe);
    if (!layer) r.fail(field, fmt::format("'{}' is not a layer symbol (M, *, -, E)", c));
    m.layers.push_back(*layer);
  }
  if (static_cast<std::int64_t>(m.layers.size()) != m.num_layers)
    r.fail(field, fmt::format("has {} layers, num_layers says {}", m.layers.size(), m.num_layers));
  if (pattern.find('M') == std::string::npos)
    for (const char* f : kMambaFields)
      if (r.given(f)) r.fail(f, "only applies to a hybrid_layer_pattern with Mamba (M) layers");
}

}  // namespace

int SpecFileAdapter::match(const nlohmann::json& config) const { return is_spec_file_config(config) ? 1000 : 0; }

ModelSpec SpecFileAdapter::adapt(const ConfigInput& input) const {
  SpecModelReader r(input.config);
  if (r.given("hf"))
    r.fail("hf", "a model with a Hugging Face base is loaded by libmme (load_spec_model), not by this adapter");
  ModelSpec m;
  m.name = r.string_or("name", input.name);
  m.family = "spec-file";
  m.model_type = "spec-file";
  m.adapter = std::string(name());
  m.source = r.file();

  m.num_layers = r.require_int("num_layers");
  m.hidden_size = r.require_int("hidden_size");
  const AttentionSpec attention = read_attention(r, m.hidden_size);
  const std::int64_t ffn = r.require_int("ffn_hidden_size");
  m.vocab_size = r.require_int("vocab_size");
  m.max_position_embeddings = r.require_int("max_position_embeddings");

  const std::string position = r.string_or("position_embedding_type", "rope");
  m.position_embedding = position == "learned_absolute" ? PositionEmbedding::kLearnedAbsolute
                         : position == "none"           ? PositionEmbedding::kNone
                                                        : PositionEmbedding::kRope;
  m.normalization =
      r.string_or("normalization", "RMSNorm") == "LayerNorm" ? Normalization::kLayerNorm : Normalization::kRMSNorm;
  (void)r.number_or("layernorm_epsilon", 1e-5);  // checked; no effect on memory
  const std::string activation = r.string_or("activation_func", "swiglu");
  m.gated_linear_unit = r.bool_or("gated_linear_unit", true);
  if (activation == "swiglu" && !m.gated_linear_unit)
    r.fail(r.given("gated_linear_unit") ? "gated_linear_unit" : "activation_func",
           r.given("activation_func") ? "SwiGLU requires gated_linear_unit: true"
                                      : "SwiGLU requires gated_linear_unit: true (activation_func is swiglu by "
                                        "default; set activation_func: gelu for a plain GELU MLP)");
  m.activation = activation == "swiglu" ? "silu" : activation;
  m.add_bias_linear = r.bool_or("add_bias_linear", false);
  m.tie_embeddings = r.bool_or("share_embeddings_and_output_weights", false);
  m.hidden_dropout = r.number_or("hidden_dropout", 0.0);
  m.attention_dropout = r.number_or("attention_dropout", 0.0);

  MlpSpec dense;
  dense.kind = "dense";
  dense.ffn_hidden_size = ffn;
  MlpSpec moe;
  std::vector<int> pattern(static_cast<std::size_t>(m.num_layers), 0);
  if (const auto experts = r.optional_int("num_experts")) {
    moe.kind = "moe";
    moe.ffn_hidden_size = ffn;  // the nominal width, as TransformerConfig keeps it
    moe.num_experts = *experts;
    moe.top_k = r.int_or("moe_router_topk", kDefaultTopK);
    if (moe.top_k > moe.num_experts)
      r.fail(r.given("moe_router_topk") ? "moe_router_topk" : "num_experts",
             fmt::format("moe_router_topk must not exceed num_experts (moe_router_topk {}{}, num_experts {})",
                         moe.top_k, r.given("moe_router_topk") ? "" : " by default", moe.num_experts));
    moe.expert_ffn_hidden_size = r.int_or("moe_ffn_hidden_size", ffn);
    moe.shared_expert_ffn_hidden_size = r.optional_int("moe_shared_expert_intermediate_size").value_or(0);
    moe.shared_expert_gate = r.bool_or("moe_shared_expert_gate", false);
    if (moe.shared_expert_gate && moe.shared_expert_ffn_hidden_size == 0)
      r.fail("moe_shared_expert_gate", "needs shared experts (moe_shared_expert_intermediate_size)");
    moe.router_expert_bias = r.bool_or("moe_router_enable_expert_bias", false);
    moe.router_fp32 = r.has("moe_router_dtype");
    if (!r.given("hybrid_layer_pattern")) pattern = spec_moe_layer_pattern(r, m.num_layers);
  } else {
    for (const char* f : kMoeFields)
      if (r.has(f)) r.fail(f, "only applies to MoE models (set num_experts)");
  }
  m.layers.reserve(static_cast<std::size_t>(m.num_layers));
  if (r.has("hybrid_layer_pattern")) {
    read_hybrid_layers(r, m, attention, dense, moe);
  } else {
    for (const char* f : kMambaFields)
      if (r.given(f)) r.fail(f, "only applies with hybrid_layer_pattern");
  }
  for (std::int64_t i = m.layers.empty() ? 0 : m.num_layers; i < m.num_layers; ++i) {
    LayerSpec layer;
    layer.attention = attention;
    layer.mlp = pattern[static_cast<std::size_t>(i)] ? moe : dense;
    m.layers.push_back(std::move(layer));
  }
  m.mtp_num_layers = r.int_or("mtp_num_layers", 0);
  for (const auto& f : r.fields()) m.keys_read.push_back("model." + f);
  return m;
}

void register_spec_file_adapter(Registrar& registry) { registry.add_adapter(std::make_shared<SpecFileAdapter>()); }

}  // namespace mme::plugins
