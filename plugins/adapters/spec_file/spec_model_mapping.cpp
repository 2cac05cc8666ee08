// The spec_file adapter's SpecModelMapping (mme/inputs/spec_file.hpp): the model section's
// fields over a Hugging Face base, and a ModelSpec back as a model section (`mme init`,
// --dump-config). With adapt() (spec_file_adapter.cpp) the one place that knows which block
// kinds the section stands for: gqa / mla attention, dense / moe MLPs.
#include <algorithm>
#include <optional>

#include <fmt/core.h>

#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/hybrid_layers.hpp>

#include "spec_file_adapter.hpp"

namespace mme::plugins {

namespace {

using OJ = nlohmann::ordered_json;

std::string activation_for(const std::string& activation_func) {
  return activation_func == "swiglu" ? "silu" : activation_func;
}

std::optional<std::string> activation_func_of(const ModelSpec& m) {
  const std::string& a = m.activation;
  if (a == "silu") return m.gated_linear_unit ? "swiglu" : "silu";
  if (a == "relu" || a == "squared_relu") return a;
  if (a.rfind("gelu", 0) == 0) return std::string("gelu");  // gelu_new, gelu_pytorch_tanh: the same memory
  return std::nullopt;
}

bool same_moe(const MlpSpec& a, const MlpSpec& b) {
  MlpSpec x = a, y = b;
  x.ffn_hidden_size = y.ffn_hidden_size = 0;  // the nominal width of an MoE layer is not used
  return x == y;
}

// A MoE layer pattern the way moe_layer_freq writes it: 1, N, or Megatron's string.
OJ layer_freq_of(const std::vector<int>& pattern) {
  const auto L = pattern.size();
  for (std::size_t every = 1; every <= L; ++every) {
    bool ok = true;
    for (std::size_t i = 0; i < L && ok; ++i) ok = pattern[i] == (i % every == 0 ? 1 : 0);
    if (ok) return OJ(static_cast<std::int64_t>(every));
  }
  std::string text = "(";
  for (std::size_t i = 0; i < L;) {
    std::size_t j = i;
    while (j < L && pattern[j] == pattern[i]) ++j;
    text += fmt::format("{}[{}]*{}", i == 0 ? "" : "+", pattern[i], j - i);
    i = j;
  }
  return OJ(text + ")");
}

// The attention the spec's fields describe: a hybrid model's attention layer's, else the first
// layer's (every layer of a hybrid model carries the model's heads).
const AttentionSpec& described_attention(const ModelSpec& m) {
  for (const auto& l : m.layers)
    if (l.attention.kind == "gqa" || l.attention.kind == "mla") return l.attention;
  return m.layers.front().attention;
}

}  // namespace

void SpecFileAdapter::apply_overrides(ModelSpec& m, SpecModelReader& r, const std::string& hf) const {
  for (const char* fixed : {"multi_latent_attention", "moe_layer_freq"})
    if (r.given(fixed))
      r.fail(fixed, fmt::format("cannot be overridden on a Hugging Face base (hf: {}); write the model out in full "
                                "(`mme init {}` prints every field)",
                                hf, hf));
  bool any_gqa = false, any_mla = false, any_dense = false, any_moe = false;
  for (const auto& l : m.layers) {
    any_gqa = any_gqa || l.attention.kind == "gqa";
    any_mla = any_mla || l.attention.kind == "mla";
    any_dense = any_dense || l.mlp.kind == "dense";
    any_moe = any_moe || l.mlp.kind == "moe";
  }
  auto need = [&](std::string_view field, bool ok, const char* what) {
    if (r.has(field) && !ok) r.fail(field, fmt::format("{} has no {} to override", hf, what));
  };
  for (const char* f : {"num_query_groups", "kv_channels"}) need(f, any_gqa, "GQA attention layers");
  for (const char* f : {"q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"})
    need(f, any_mla, "multi-latent attention layers");
  if (r.given("q_lora_rank") && !any_mla)
    r.fail("q_lora_rank", fmt::format("{} has no multi-latent attention layers to override", hf));
  need("ffn_hidden_size", any_dense, "dense MLP layers");
  for (const char* f : {"num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size",
                        "moe_shared_expert_gate", "moe_router_enable_expert_bias", "moe_router_dtype"})
    need(f, any_moe, "MoE layers");

  // A hybrid model's layers are its pattern's symbols (one block each): more or fewer of them is
  // another pattern, which no field says.
  const bool hybrid = is_hybrid_model(m);
  for (const char* f :
       {"hybrid_layer_pattern", "mamba_num_heads", "mamba_head_dim", "mamba_state_dim", "mamba_num_groups"})
    if (r.given(f))
      r.fail(f, fmt::format("cannot be overridden on a Hugging Face base (hf: {}); write the model out in full "
                            "(`mme init {}` prints every field)",
                            hf, hf));
  if (hybrid && r.given("num_layers"))
    r.fail("num_layers", fmt::format("{} is a hybrid model whose layers its pattern names one by one; a spec file "
                                     "cannot change their number",
                                     hf));
  if (auto n = r.optional_int("num_layers")) {
    const auto count = static_cast<std::size_t>(*n);
    if (count < m.layers.size()) m.layers.resize(count);
    while (m.layers.size() < count) m.layers.push_back(m.layers.back());
    m.num_layers = *n;
  }
  m.hidden_size = r.int_or("hidden_size", m.hidden_size);
  m.vocab_size = r.int_or("vocab_size", m.vocab_size);
  m.max_position_embeddings = r.int_or("max_position_embeddings", m.max_position_embeddings);
  m.mtp_num_layers = r.int_or("mtp_num_layers", m.mtp_num_layers);
  m.tie_embeddings = r.bool_or("share_embeddings_and_output_weights", m.tie_embeddings);
  m.add_bias_linear = r.bool_or("add_bias_linear", m.add_bias_linear);
  m.hidden_dropout = r.number_or("hidden_dropout", m.hidden_dropout);
  m.attention_dropout = r.number_or("attention_dropout", m.attention_dropout);
  (void)r.number_or("layernorm_epsilon", 1e-5);
  if (r.has("normalization"))
    m.normalization =
        r.string_or("normalization", "") == "LayerNorm" ? Normalization::kLayerNorm : Normalization::kRMSNorm;
  if (r.has("position_embedding_type")) {
    const std::string p = r.string_or("position_embedding_type", "rope");
    m.position_embedding = p == "learned_absolute" ? PositionEmbedding::kLearnedAbsolute
                           : p == "none"           ? PositionEmbedding::kNone
                                                   : PositionEmbedding::kRope;
  }
  m.gated_linear_unit = r.bool_or("gated_linear_unit", m.gated_linear_unit);
  if (r.has("activation_func")) {
    const std::string act = r.string_or("activation_func", "swiglu");
    if (act == "swiglu" && !m.gated_linear_unit)
      r.fail(r.given("gated_linear_unit") ? "gated_linear_unit" : "activation_func",
             "SwiGLU requires gated_linear_unit: true");
    m.activation = activation_for(act);
  }
  for (auto& l : m.layers) {
    auto& a = l.attention;
    a.num_heads = r.int_or("num_attention_heads", a.num_heads);
    a.qk_norm = r.bool_or("qk_layernorm", a.qk_norm);
    a.qkv_bias = r.bool_or("add_qkv_bias", a.qkv_bias);
    if (a.kind == "gqa") {
      a.num_query_groups = r.int_or("num_query_groups", a.num_query_groups);
      a.kv_channels = r.int_or("kv_channels", a.kv_channels);
    } else if (a.kind == "mla") {
      a.num_query_groups = a.num_heads;
      if (r.given("q_lora_rank")) a.q_lora_rank = r.optional_int("q_lora_rank");
      a.kv_lora_rank = r.int_or("kv_lora_rank", a.kv_lora_rank);
      a.qk_head_dim = r.int_or("qk_head_dim", a.qk_head_dim);
      a.qk_pos_emb_head_dim = r.int_or("qk_pos_emb_head_dim", a.qk_pos_emb_head_dim);
      a.v_head_dim = r.int_or("v_head_dim", a.v_head_dim);
    }
    if (a.kind == "gqa" && (a.num_query_groups > a.num_heads || a.num_heads % a.num_query_groups != 0))
      r.fail(r.has("num_query_groups") ? "num_query_groups" : "num_attention_heads",
             fmt::format("num_query_groups must divide num_attention_heads (num_query_groups {}, "
                         "num_attention_heads {})",
                         a.num_query_groups, a.num_heads));
    auto& f = l.mlp;
    if (f.kind == "dense") {
      f.ffn_hidden_size = r.int_or("ffn_hidden_size", f.ffn_hidden_size);
    } else if (f.kind == "moe") {
      f.num_experts = r.int_or("num_experts", f.num_experts);
      f.top_k = r.int_or("moe_router_topk", f.top_k);
      f.expert_ffn_hidden_size = r.int_or("moe_ffn_hidden_size", f.expert_ffn_hidden_size);
      if (r.given("moe_shared_expert_intermediate_size"))
        f.shared_expert_ffn_hidden_size = r.optional_int("moe_shared_expert_intermediate_size").value_or(0);
      f.shared_expert_gate = r.bool_or("moe_shared_expert_gate", f.shared_expert_gate);
      f.router_expert_bias = r.bool_or("moe_router_enable_expert_bias", f.router_expert_bias);
      if (r.given("moe_router_dtype")) f.router_fp32 = r.has("moe_router_dtype");
      if (f.top_k > f.num_experts)
        r.fail(r.has("moe_router_topk") ? "moe_router_topk" : "num_experts",
               fmt::format("moe_router_topk {} is more than num_experts {}", f.top_k, f.num_experts));
    }
  }
}

std::string SpecFileAdapter::inexpressible(const ModelSpec& m) const {
  if (m.layers.empty()) return "it has no layers";
  if (m.max_position_embeddings <= 0) return "its config does not give max_position_embeddings";
  const bool hybrid = is_hybrid_model(m);
  const AttentionSpec& a0 = hybrid ? described_attention(m) : m.layers.front().attention;
  if (a0.kind != "gqa" && a0.kind != "mla") return fmt::format("its attention kind '{}' has no spec fields", a0.kind);
  if (hybrid && a0.kind != "gqa") return "its hybrid layers' attention is not GQA";
  const MlpSpec* dense = nullptr;
  const MlpSpec* moe = nullptr;
  const AttentionSpec* mixer = nullptr;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    if (l.post_attention_norm || l.post_mlp_norm) return "its layers have post-attention / post-MLP norms";
    if (hybrid) {
      // A hybrid layer: one block of a kind the fields name; the others carry the model's heads.
      const char symbol = hybrid_symbol(l);
      if (symbol == 0)
        return fmt::format("its layer {} (attention '{}', MLP '{}') is no hybrid_layer_pattern symbol", i,
                           l.attention.kind, l.mlp.kind);
      AttentionSpec as_attention = l.attention;
      as_attention.kind = a0.kind;
      if (symbol == 'M') {
        if (mixer && !(*mixer == l.attention)) return "its Mamba mixers differ";
        mixer = &l.attention;
        as_attention.mamba_num_heads = as_attention.mamba_head_dim = 0;
        as_attention.mamba_state_dim = as_attention.mamba_num_groups = 0;
      }
      if (!(as_attention == a0)) return fmt::format("its layers differ in their attention heads (layer {})", i);
      if (symbol == 'M' || symbol == '*') continue;
    } else if (!(l.attention == a0)) {
      return fmt::format("its layers differ in their attention (layer 0 and layer {})", i);
    }
    if (l.mlp.kind == "dense") {
      MlpSpec plain;
      plain.kind = "dense";
      plain.ffn_hidden_size = l.mlp.ffn_hidden_size;
      if (!(l.mlp == plain)) return fmt::format("layer {} is a dense MLP with expert settings", i);
      if (dense && !(*dense == l.mlp)) return "its dense layers differ in width";
      dense = &l.mlp;
    } else if (l.mlp.kind == "moe") {
      if (moe && !same_moe(*moe, l.mlp)) return "its MoE layers differ";
      moe = &l.mlp;
    } else {
      return fmt::format("its MLP kind '{}' has no spec fields", l.mlp.kind);
    }
  }
  if (!activation_func_of(m)) return fmt::format("its activation '{}' has no activation_func value", m.activation);
  // GPT-OSS's settings have no spec fields (yet): such a model is written with its `hf:` base.
  if (a0.window > 0) return "its attention has a sliding window";
  if (a0.softmax_type != SoftmaxType::kVanilla) return "its attention has a softmax other than vanilla";
  if (m.glu_linear_offset != 0 || m.activation_clamp_value > 0) return "its gated unit is clamped or offset";
  if (m.rope_yarn_factor > 1) return "its RoPE is scaled by YaRN";
  return "";
}

std::vector<SpecModelField> SpecFileAdapter::model_section(const ModelSpec& m, const TrainingSetup& s) const {
  std::vector<SpecModelField> out;
  auto add = [&](const char* name, OJ v, bool commented = false) { out.push_back({name, std::move(v), commented}); };
  const bool hybrid = is_hybrid_model(m);
  const auto& a = described_attention(m);
  const bool mla = a.kind == "mla";
  const MlpSpec* dense = nullptr;
  const MlpSpec* moe = nullptr;
  const AttentionSpec* mixer = nullptr;
  std::vector<int> pattern;
  std::string symbols;
  for (const auto& l : m.layers) {
    if (l.mlp.kind == "moe")
      moe = &l.mlp;
    else if (l.mlp.kind == "dense")
      dense = &l.mlp;
    if (l.attention.kind == "mamba") mixer = &l.attention;
    pattern.push_back(l.mlp.kind == "moe" ? 1 : 0);
    symbols += hybrid_symbol(l);
  }
  add("name", m.name);
  add("num_layers", m.num_layers);
  add("hidden_size", m.hidden_size);
  add("num_attention_heads", a.num_heads);
  add("num_query_groups", mla ? OJ() : OJ(a.num_query_groups), mla);
  add("kv_channels", mla ? OJ() : OJ(a.kv_channels), mla);
  // (A hybrid model without MLP layers: Megatron-LM's default 4h, which sizes nothing.)
  add("ffn_hidden_size", dense ? dense->ffn_hidden_size : moe ? moe->expert_ffn_hidden_size : 4 * m.hidden_size);
  add("vocab_size", m.vocab_size);
  add("max_position_embeddings", m.max_position_embeddings);
  add("position_embedding_type", m.position_embedding == PositionEmbedding::kLearnedAbsolute ? "learned_absolute"
                                 : m.position_embedding == PositionEmbedding::kNone          ? "none"
                                                                                             : "rope");
  add("normalization", m.normalization == Normalization::kLayerNorm ? "LayerNorm" : "RMSNorm");
  add("layernorm_epsilon", 1e-5, true);
  add("activation_func", *activation_func_of(m));
  add("gated_linear_unit", m.gated_linear_unit);
  add("add_bias_linear", m.add_bias_linear);
  add("add_qkv_bias", a.qkv_bias);
  add("qk_layernorm", a.qk_norm);
  add("share_embeddings_and_output_weights", m.tie_embeddings);
  add("hidden_dropout", s.hidden_dropout.value_or(m.hidden_dropout));
  add("attention_dropout", s.attention_dropout.value_or(m.attention_dropout));
  add("multi_latent_attention", mla);
  add("q_lora_rank", mla ? (a.q_lora_rank ? OJ(*a.q_lora_rank) : OJ()) : OJ(512), !mla);
  add("kv_lora_rank", mla ? a.kv_lora_rank : 512, !mla);
  add("qk_head_dim", mla ? a.qk_head_dim : 128, !mla);
  add("qk_pos_emb_head_dim", mla ? a.qk_pos_emb_head_dim : 64, !mla);
  add("v_head_dim", mla ? a.v_head_dim : 128, !mla);
  add("num_experts", moe ? OJ(moe->num_experts) : OJ());
  add("moe_router_topk", moe ? moe->top_k : 2, !moe);
  add("moe_ffn_hidden_size", moe ? OJ(moe->expert_ffn_hidden_size) : OJ(), !moe);
  add("moe_shared_expert_intermediate_size",
      moe && moe->shared_expert_ffn_hidden_size > 0 ? OJ(moe->shared_expert_ffn_hidden_size) : OJ(), !moe);
  add("moe_shared_expert_gate", moe ? moe->shared_expert_gate : false, !moe);
  add("moe_router_enable_expert_bias", moe ? moe->router_expert_bias : false, !moe);
  add("moe_router_dtype", moe && moe->router_fp32 ? OJ("fp32") : OJ(), !moe);
  add("moe_layer_freq", moe && !hybrid ? layer_freq_of(pattern) : OJ(1), !moe || hybrid);
  add("mtp_num_layers", m.mtp_num_layers);
  add("hybrid_layer_pattern", hybrid ? OJ(symbols) : OJ(), !hybrid);
  add("mamba_num_heads", mixer ? OJ(mixer->mamba_num_heads) : OJ(), !mixer);
  add("mamba_head_dim", mixer ? mixer->mamba_head_dim : 64, !mixer);
  add("mamba_state_dim", mixer ? mixer->mamba_state_dim : 128, !mixer);
  add("mamba_num_groups", mixer ? mixer->mamba_num_groups : 8, !mixer);
  return out;
}

}  // namespace mme::plugins
