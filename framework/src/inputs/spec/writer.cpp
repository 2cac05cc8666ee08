// Writing spec files (`mme init`, --dump-config): a resolved model and setup as a commented
// YAML spec file or a JSON document with the same fields.
#include <algorithm>
#include <cctype>

#include <fmt/core.h>

#include "mme/inputs/spec_file.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/json_text.hpp"
#include "spec_internal.hpp"

namespace mme {

using namespace spec_detail;

namespace {

struct OutField {
  std::string name;
  OJ value;
  bool commented = false;
};

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

std::string inexpressible(const ModelSpec& m) {
  if (m.layers.empty()) return "it has no layers";
  if (m.max_position_embeddings <= 0) return "its config does not give max_position_embeddings";
  const AttentionSpec& a0 = m.layers.front().attention;
  if (a0.kind != "gqa" && a0.kind != "mla") return fmt::format("its attention kind '{}' has no spec fields", a0.kind);
  const MlpSpec* dense = nullptr;
  const MlpSpec* moe = nullptr;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    if (!(l.attention == a0)) return fmt::format("its layers differ in their attention (layer 0 and layer {})", i);
    if (l.post_attention_norm || l.post_mlp_norm) return "its layers have post-attention / post-MLP norms";
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
  return "";
}

std::vector<OutField> model_fields(const ModelSpec& m, const TrainingSetup& s) {
  std::vector<OutField> out;
  auto add = [&](const char* name, OJ v, bool commented = false) { out.push_back({name, std::move(v), commented}); };
  const auto& a = m.layers.front().attention;
  const bool mla = a.kind == "mla";
  const MlpSpec* dense = nullptr;
  const MlpSpec* moe = nullptr;
  std::vector<int> pattern;
  for (const auto& l : m.layers) {
    if (l.mlp.kind == "moe") moe = &l.mlp;
    else dense = &l.mlp;
    pattern.push_back(l.mlp.kind == "moe" ? 1 : 0);
  }
  add("name", m.name);
  add("num_layers", m.num_layers);
  add("hidden_size", m.hidden_size);
  add("num_attention_heads", a.num_heads);
  add("num_query_groups", mla ? OJ() : OJ(a.num_query_groups), mla);
  add("kv_channels", mla ? OJ() : OJ(a.kv_channels), mla);
  add("ffn_hidden_size", dense ? dense->ffn_hidden_size : moe->expert_ffn_hidden_size);
  add("vocab_size", m.vocab_size);
  add("max_position_embeddings", m.max_position_embeddings);
  add("position_embedding_type", m.position_embedding == PositionEmbedding::kLearnedAbsolute ? "learned_absolute"
                                 : m.position_embedding == PositionEmbedding::kNone           ? "none"
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
  add("moe_layer_freq", moe ? layer_freq_of(pattern) : OJ(1), !moe);
  add("mtp_num_layers", m.mtp_num_layers);
  return out;
}

// The model section of a model that cannot be written field by field: its name as `hf`, plus
// the origin spec's own overrides.
std::vector<OutField> hf_model_fields(const ModelSpec& m, const TrainingSetup& s, const SpecWriteOptions& o) {
  std::vector<OutField> out;
  if (o.origin && o.origin->hf) {
    const auto& fields = o.origin->model_document.at("model");
    std::vector<std::pair<int, std::string>> ordered;
    for (const auto& [k, v] : fields.items()) ordered.emplace_back(o.origin->line_of("model." + k), k);
    std::sort(ordered.begin(), ordered.end());
    for (const auto& [line, k] : ordered) out.push_back({k, OJ::parse(json_text(fields.at(k)))});
  } else {
    out.push_back({"hf", OJ(m.name)});
  }
  auto set = [&](const char* name, OJ v) {
    for (auto& f : out)
      if (f.name == name) {
        f.value = std::move(v);
        return;
      }
    out.push_back({name, std::move(v)});
  };
  if (s.hidden_dropout) set("hidden_dropout", *s.hidden_dropout);
  if (s.attention_dropout) set("attention_dropout", *s.attention_dropout);
  return out;
}

std::vector<OutField> section_fields(const std::string& section, const TrainingSetup& s, const SpecWriteOptions& o) {
  std::vector<OutField> out;
  for (const auto& f : field_defs()) {
    if (section != f.section) continue;
    if (std::string_view(f.name) == "gpu") {
      out.push_back({f.name, o.gpu ? OJ(*o.gpu) : OJ()});
      continue;
    }
    out.push_back({f.name, OJ::parse(json_text(setup_value(f, s)))});
  }
  return out;
}

bool plain_yaml_string(const std::string& s) {
  if (s.empty()) return false;
  // ^[A-Za-z_][A-Za-z0-9_./@+-]*$, by hand (std::regex recurses once per character).
  if (!std::isalpha(static_cast<unsigned char>(s[0])) && s[0] != '_') return false;
  for (const char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view("_./@+-").find(c) == std::string_view::npos)
      return false;
  return typed_plain_scalar(s).kind == Node::Kind::kString;
}

std::string yaml_scalar(const OJ& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number_float()) return number_text(v.get<double>());
  if (v.is_string()) return plain_yaml_string(v.get<std::string>()) ? v.get<std::string>() : json_text(v);
  if (v.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + yaml_scalar(v[i]);
    return out + "]";
  }
  return json_text(v);
}

std::string field_comment(const std::string& section, const std::string& name) {
  const FieldDef* f = find_def(section, name);
  if (!f) return "";
  const std::string d = f->default_text;
  return fmt::format("{} ({})", f->summary, d == "required" ? "required" : "default: " + d);
}

struct WrittenSpec {
  std::vector<std::pair<std::string, std::vector<OutField>>> sections;
  std::string hf_reason;  // why the model is written as `hf:`
};

WrittenSpec build_written(const ModelSpec& m, const TrainingSetup& setup, const SpecWriteOptions& o) {
  // The interleaved schedule is written the way it was asked for: a layout string or layers per
  // chunk fix the chunks themselves, so the resolved count stays out.
  TrainingSetup s = setup;
  if (s.pipeline.layers_per_virtual_stage || !s.pipeline.layout.empty()) s.parallel.vpp = 1;
  WrittenSpec w;
  w.hf_reason = inexpressible(m);
  w.sections.emplace_back("model", w.hf_reason.empty() ? model_fields(m, s) : hf_model_fields(m, s, o));
  for (const auto& sec : sections())
    if (sec != "model") w.sections.emplace_back(sec, section_fields(sec, s, o));
  return w;
}

}  // namespace

std::string spec_model_inexpressible(const ModelSpec& model) { return inexpressible(model); }

std::string write_spec_yaml(const ModelSpec& model, const TrainingSetup& setup, const SpecWriteOptions& options) {
  const WrittenSpec w = build_written(model, setup, options);
  std::string out;
  // A header line may hold input (`mme init MODEL`): a newline in it would end the comment.
  for (const auto& h : options.header) out += h.empty() ? "#\n" : "# " + printable(h) + "\n";
  if (!w.hf_reason.empty())
    out += fmt::format("# The model is written as `hf:` (its own config) because {};\n"
                       "# docs/spec-files.md lists the fields that may override such a base.\n",
                       w.hf_reason);
  for (const auto& [section, fields] : w.sections) {
    if (!out.empty()) out += "\n";
    out += section + ":\n";
    for (const auto& f : fields) {
      std::string line = (f.commented ? "  # " : "  ") + f.name + ": " + yaml_scalar(f.value);
      const std::string comment = field_comment(section, f.name);
      if (!comment.empty()) {
        const std::size_t column = 44;
        line += line.size() + 1 < column ? std::string(column - line.size(), ' ') : std::string("  ");
        line += "# " + comment;
      }
      out += line + "\n";
    }
  }
  return out;
}

std::string write_spec_json(const ModelSpec& model, const TrainingSetup& setup, const SpecWriteOptions& options) {
  const WrittenSpec w = build_written(model, setup, options);
  OJ doc = OJ::object();
  for (const auto& [section, fields] : w.sections) {
    OJ sec = OJ::object();
    for (const auto& f : fields)
      if (!f.commented) sec[f.name] = f.value;
    doc[section] = sec;
  }
  return json_text(doc, 2) + "\n";
}

}  // namespace mme
