// The fields of spec files: the model section's table, the other sections from the setup
// schema's knobs (setup_schema.cpp), and the checks of a value against its field.
#include <cmath>
#include <stdexcept>

#include <fmt/core.h>

#include "mme/inputs/megatron_args.hpp"
#include "mme/inputs/spec_file.hpp"
#include "mme/sdk/config_reader.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/json_text.hpp"

#include "spec_internal.hpp"

namespace mme {
namespace spec_detail {

J setup_value(const FieldDef& f, const TrainingSetup& s) {
  if (f.knob) return knob_spec_value(*f.knob, s);
  return f.get ? f.get(s) : J();
}
bool has_setup_value(const FieldDef& f) { return f.knob || f.get; }

namespace {

Ty type_of(KnobKind k) {
  switch (k) {
    case KnobKind::kInt: return Ty::kInt;
    case KnobKind::kNumber: return Ty::kNumber;
    case KnobKind::kBool: return Ty::kBool;
    case KnobKind::kEnum: return Ty::kEnum;
    case KnobKind::kString: return Ty::kString;
    case KnobKind::kModules: return Ty::kModules;
    case KnobKind::kEnv: return Ty::kEnvList;
  }
  return Ty::kString;
}

FieldDef field_of(const SetupKnob& k) {
  FieldDef f{.section = k.spec_section, .name = k.spec_name, .type = type_of(k.kind)};
  f.required = k.spec_required;
  f.min = k.spec_min.value_or(k.min);
  f.max = k.max;
  f.lo = k.lo;
  f.hi = k.hi;
  f.lo_open = k.lo_open;
  f.hi_open = k.hi_open;
  for (const char* v : k.spec_values.empty() ? k.values : k.spec_values) f.values.emplace_back(v);
  f.default_text = k.spec_default;
  f.summary = k.spec_summary;
  f.flag = k.flag ? k.flag : k.off_flag ? k.off_flag : "";
  f.knob = &k;
  return f;
}

}  // namespace

namespace {

// The model section: the base model, sizes, attention shape, norms, embeddings, dropout.
std::vector<FieldDef> model_core_fields() {
  return {{.section = "model",
           .name = "hf",
           .type = Ty::kString,
           .default_text = "null",
           .summary = "base the model on this Hugging Face model (hub id, config.json, folder or bundled model); the "
                      "other model fields override it"},
          {.section = "model",
           .name = "name",
           .type = Ty::kString,
           .default_text = "the file name",
           .summary = "the name reports show"},
          {.section = "model",
           .name = "num_layers",
           .type = Ty::kInt,
           .required = true,
           .max = ConfigReader::kMaxLayers,
           .default_text = "required",
           .summary = "transformer layers"},
          {.section = "model",
           .name = "hidden_size",
           .type = Ty::kInt,
           .required = true,
           .max = ConfigReader::kMaxDimension,
           .default_text = "required",
           .summary = "hidden dimension; must be divisible by num_attention_heads"},
          {.section = "model",
           .name = "num_attention_heads",
           .type = Ty::kInt,
           .required = true,
           .max = ConfigReader::kMaxDimension,
           .default_text = "required",
           .summary = "attention heads"},
          {.section = "model",
           .name = "num_query_groups",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "num_attention_heads",
           .summary = "query groups (KV heads) for GQA; must divide num_attention_heads"},
          {.section = "model",
           .name = "kv_channels",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "hidden_size / num_attention_heads",
           .summary = "head dimension"},
          {.section = "model",
           .name = "ffn_hidden_size",
           .type = Ty::kInt,
           .required = true,
           .max = ConfigReader::kMaxDimension,
           .default_text = "required",
           .summary = "MLP intermediate dimension"},
          {.section = "model",
           .name = "vocab_size",
           .type = Ty::kInt,
           .required = true,
           .max = ConfigReader::kMaxDimension,
           .default_text = "required",
           .summary = "vocabulary size (padded like Megatron-LM: make_vocab_size_divisible_by x TP)"},
          {.section = "model",
           .name = "max_position_embeddings",
           .type = Ty::kInt,
           .required = true,
           .max = ConfigReader::kMaxDimension,
           .default_text = "required",
           .summary = "longest supported sequence; must be >= seq_length"},
          {.section = "model",
           .name = "position_embedding_type",
           .type = Ty::kEnum,
           .values = {"rope", "learned_absolute", "none"},
           .default_text = "rope",
           .summary = "rotary positions, or a learned absolute position table"},
          {.section = "model",
           .name = "normalization",
           .type = Ty::kEnum,
           .values = {"RMSNorm", "LayerNorm"},
           .default_text = "RMSNorm",
           .summary = "layer normalization type"},
          {.section = "model",
           .name = "layernorm_epsilon",
           .type = Ty::kNumber,
           .lo = 0,
           .hi = 1,
           .lo_open = true,
           .hi_open = true,
           .default_text = "1e-5",
           .summary = "norm epsilon (no effect on memory)"},
          {.section = "model",
           .name = "activation_func",
           .type = Ty::kEnum,
           .values = {"swiglu", "gelu", "silu", "relu", "squared_relu"},
           .default_text = "swiglu",
           .summary = "MLP activation; SwiGLU requires gated_linear_unit: true"},
          {.section = "model",
           .name = "gated_linear_unit",
           .type = Ty::kBool,
           .default_text = "true",
           .summary = "gated MLP (SwiGLU, GeGLU)"},
          {.section = "model",
           .name = "add_bias_linear",
           .type = Ty::kBool,
           .default_text = "false",
           .summary = "biases on every linear layer"},
          {.section = "model",
           .name = "add_qkv_bias",
           .type = Ty::kBool,
           .default_text = "false",
           .summary = "biases on the QKV projection only (Qwen2)"},
          {.section = "model",
           .name = "qk_layernorm",
           .type = Ty::kBool,
           .default_text = "false",
           .summary = "layernorm on queries and keys (MLA: the q/kv latent norms)"},
          {.section = "model",
           .name = "share_embeddings_and_output_weights",
           .type = Ty::kBool,
           .default_text = "false",
           .summary = "tie the output layer to the word embedding"},
          {.section = "model",
           .name = "hidden_dropout",
           .type = Ty::kNumber,
           .lo = 0,
           .hi = 1,
           .hi_open = true,
           .default_text = "0.0",
           .summary = "dropout after attention and MLP (masks are kept for backward)"},
          {.section = "model",
           .name = "attention_dropout",
           .type = Ty::kNumber,
           .lo = 0,
           .hi = 1,
           .hi_open = true,
           .default_text = "0.0",
           .summary = "dropout on attention probabilities"}};
}

// The model section: multi-latent attention and the mixture of experts.
std::vector<FieldDef> model_mla_moe_fields() {
  return {{.section = "model",
           .name = "multi_latent_attention",
           .type = Ty::kBool,
           .default_text = "false",
           .summary = "multi-latent attention (DeepSeek-V2/V3) with the ranks below"},
          {.section = "model",
           .name = "q_lora_rank",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "512",
           .summary = "MLA query compression rank; null = one query projection"},
          {.section = "model",
           .name = "kv_lora_rank",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "512",
           .summary = "MLA key/value compression rank"},
          {.section = "model",
           .name = "qk_head_dim",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "128",
           .summary = "MLA query/key head dimension without positions"},
          {.section = "model",
           .name = "qk_pos_emb_head_dim",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "64",
           .summary = "MLA rotary query/key head dimension"},
          {.section = "model",
           .name = "v_head_dim",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "128",
           .summary = "MLA value head dimension"},
          {.section = "model",
           .name = "num_experts",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxCount,
           .default_text = "null",
           .summary = "experts per MoE layer; null = a dense model"},
          {.section = "model",
           .name = "moe_router_topk",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxCount,
           .default_text = "2",
           .summary = "experts each token is routed to"},
          {.section = "model",
           .name = "moe_ffn_hidden_size",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "ffn_hidden_size",
           .summary = "intermediate dimension of each expert"},
          {.section = "model",
           .name = "moe_shared_expert_intermediate_size",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "null",
           .summary = "intermediate dimension of the shared experts together; null = none"},
          {.section = "model",
           .name = "moe_shared_expert_gate",
           .type = Ty::kBool,
           .default_text = "false",
           .summary = "a sigmoid gate on the shared experts (Qwen2-MoE)"},
          {.section = "model",
           .name = "moe_router_enable_expert_bias",
           .type = Ty::kBool,
           .default_text = "false",
           .summary = "per-expert router bias (DeepSeek-V3 aux-loss-free balancing)"},
          {.section = "model",
           .name = "moe_router_dtype",
           .type = Ty::kEnum,
           .values = {"fp32"},
           .default_text = "null",
           .summary = "router computed in fp32; null = the training dtype"},
          {.section = "model",
           .name = "moe_layer_freq",
           .type = Ty::kLayerFreq,
           .default_text = "1",
           .summary = "which layers are MoE: N = every N-th, a list of 0/1, or \"([0]*3+[1]*58)\""},
          {.section = "model",
           .name = "mtp_num_layers",
           .type = Ty::kInt,
           .min = 0,
           .max = ConfigReader::kMaxLayers,
           .default_text = "0",
           .summary = "multi-token-prediction layers (DeepSeek-V3), on the last stage"},
          {.section = "model",
           .name = "hybrid_layer_pattern",
           .type = Ty::kString,
           .default_text = "null",
           .summary = "a hybrid model's layers, one symbol each: M Mamba, * attention, - MLP, E MoE; null = every "
                      "layer attention and MLP"},
          {.section = "model",
           .name = "mamba_num_heads",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "2 x hidden_size / mamba_head_dim",
           .summary = "Mamba heads of the hybrid pattern's M layers"},
          {.section = "model",
           .name = "mamba_head_dim",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "64",
           .summary = "a Mamba head's width"},
          {.section = "model",
           .name = "mamba_state_dim",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "128",
           .summary = "the Mamba state's width per group"},
          {.section = "model",
           .name = "mamba_num_groups",
           .type = Ty::kInt,
           .max = ConfigReader::kMaxDimension,
           .default_text = "8",
           .summary = "the Mamba mixer's B and C groups"}};
}

}  // namespace

const std::vector<FieldDef>& field_defs() {
  static const std::vector<FieldDef> model = [] {
    std::vector<FieldDef> fields = model_core_fields();
    for (auto& f : model_mla_moe_fields()) fields.push_back(std::move(f));
    return fields;
  }();
  static const std::vector<FieldDef> defs = [] {
    std::vector<FieldDef> all = model;
    for (const auto& k : setup_knobs()) {
      if (!k.spec_section) continue;
      all.push_back(field_of(k));
      if (std::string_view(k.spec_name) == "world_size")
        all.push_back({.section = "infrastructure",
                       .name = "gpu",
                       .type = Ty::kString,
                       .default_text = "null",
                       .summary = "judge the fit on this GPU only (see `mme hardware`); null = every known GPU",
                       .flag = "gpu"});
      if (std::string_view(k.spec_name) == "params_dtype")
        all.push_back({.section = "precision",
                       .name = "fp8",
                       .type = Ty::kFp8,
                       .default_text = "false",
                       .summary = "FP8 GEMMs (true, or Megatron's e4m3 / hybrid) with bf16 parameters",
                       .flag = "precision",
                       .get = [](const TrainingSetup& s) { return J(s.precision == Precision::kFP8); }});
    }
    return all;
  }();
  return defs;
}

const std::vector<std::string>& sections() {
  static const std::vector<std::string> s = {"model", "parallelism", "training", "infrastructure", "precision", "peft"};
  return s;
}

const FieldDef* find_def(std::string_view section, std::string_view name) {
  for (const auto& f : field_defs())
    if (section == f.section && name == f.name) return &f;
  return nullptr;
}

const FieldDef& def(std::string_view key) {  // "section.field"
  const auto dot = key.find('.');
  const FieldDef* f = find_def(key.substr(0, dot), key.substr(dot + 1));
  if (!f) throw std::logic_error("unknown spec field " + std::string(key));
  return *f;
}

namespace {

std::string type_text(const FieldDef& f) {
  switch (f.type) {
    case Ty::kInt: return f.min > 0 ? "positive integer" : "non-negative integer";
    case Ty::kNumber: return "number";
    case Ty::kBool: return "true or false";
    case Ty::kEnum: {
      std::string out;
      for (const auto& v : f.values) out += (out.empty() ? "" : " | ") + v;
      return out;
    }
    case Ty::kString: return "string";
    case Ty::kModules: return "list of module names";
    case Ty::kLayerFreq: return "integer, list of 0/1, or string";
    case Ty::kFp8: return "true, false, e4m3 or hybrid";
    case Ty::kEnvList: return "list of NAME=VALUE";
  }
  return "";
}

}  // namespace

// How a value reads in a message.
std::string describe(const J& v) {
  if (v.is_array()) return "a list";
  if (v.is_object()) return "a mapping";
  std::string text = json_text(v);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

std::string number_text(double d) {
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

namespace {

std::string range_text(const FieldDef& f) {
  return fmt::format("{}{}, {}{}", f.lo_open ? "(" : "[", number_text(f.lo), number_text(f.hi), f.hi_open ? ")" : "]");
}

std::string join_or(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += i + 1 == v.size() ? " or " : ", ";
    out += v[i];
  }
  return out;
}

}  // namespace

J check_value(const FieldDef& f, const J& v, const std::function<void(const std::string&)>& fail) {
  switch (f.type) {
    case Ty::kInt: {
      // Layer counts (num_layers, mtp_num_layers: the fields bounded by kMaxLayers) say why
      // their bound is so low, in the message every input shares.
      const char* expected = f.min > 0 ? "a positive integer" : "a non-negative integer";
      if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) > 9e15)
          fail(f.max == ConfigReader::kMaxLayers && d > 0 ? too_many_layers(describe(v))
                                                          : fmt::format("{} is larger than {}", describe(v), f.max));
        fail(fmt::format("expected {}, got {}", expected, describe(v)));
      }
      if (!v.is_number_integer()) fail(fmt::format("expected {}, got {}", expected, describe(v)));
      const auto n = v.get<std::int64_t>();
      if (n < f.min) fail(fmt::format("expected {}, got {}", expected, n));
      if (n > f.max)
        fail(f.max == ConfigReader::kMaxLayers ? too_many_layers(std::to_string(n))
                                               : fmt::format("{} is larger than {}", n, f.max));
      return J(n);
    }
    case Ty::kNumber: {
      if (!v.is_number()) fail(fmt::format("expected a number, got {}", describe(v)));
      const double d = v.get<double>();
      const bool low = f.lo_open ? d <= f.lo : d < f.lo;
      const bool high = f.hi_open ? d >= f.hi : d > f.hi;
      if (!std::isfinite(d) || low || high)
        fail(fmt::format("expected a number in {}, got {}", range_text(f), describe(v)));
      return J(d);
    }
    case Ty::kBool:
      if (!v.is_boolean()) fail(fmt::format("expected true or false, got {}", describe(v)));
      return v;
    case Ty::kEnum: {
      if (v.is_string()) {
        const std::string t = lower(v.get<std::string>());
        for (const auto& c : f.values)
          if (lower(c) == t) return J(c);
        // The knob's other spellings ("alltoall_seq", "bfloat16", "none"): its canonical value.
        if (f.knob && f.knob->spec_values.empty()) {
          try {
            return parse_knob_text(*f.knob, f.name, v.get<std::string>());
          } catch (const UsageError&) {
          }
        }
      }
      std::vector<std::string> quoted;
      for (const auto& c : f.values) quoted.push_back(c);
      fail(fmt::format("expected {}, got {}", join_or(quoted), describe(v)));
      return J();
    }
    case Ty::kString:
      if (!v.is_string()) fail(fmt::format("expected a string, got {}", describe(v)));
      if (v.get<std::string>().empty()) fail("expected a non-empty string");
      return v;
    case Ty::kModules: {
      std::string text;
      if (v.is_string()) {
        text = v.get<std::string>();
      } else if (v.is_array()) {
        for (const auto& item : v) {
          if (!item.is_string())
            fail(fmt::format("expected a list of module names, got {} in the list", describe(item)));
          text += item.get<std::string>() + ",";
        }
      } else {
        fail(fmt::format("expected a list of module names, got {}", describe(v)));
      }
      std::uint32_t modules = 0;
      try {
        modules = f.knob ? knob_modules(*f.knob, text) : parse_recompute_modules(text);
      } catch (const UsageError& e) {
        fail(e.what());
      }
      if (modules == 0 && !(f.knob && f.knob->modules_may_be_empty)) fail("expected at least one module");
      return J(split(f.knob ? knob_modules_text(*f.knob, modules) : recompute_modules_to_string(modules), ','));
    }
    case Ty::kLayerFreq:
      if (v.is_number_integer()) {
        if (v.get<std::int64_t>() < 1) fail(fmt::format("expected a positive integer, got {}", describe(v)));
        return v;
      }
      if (v.is_array()) {
        for (const auto& item : v)
          if (!item.is_number_integer() || (item.get<std::int64_t>() != 0 && item.get<std::int64_t>() != 1))
            fail(fmt::format("list items must be 0 or 1, got {}", describe(item)));
        return v;
      }
      if (v.is_string() && !v.get<std::string>().empty()) return v;
      fail(fmt::format("expected an integer, a list of 0/1 or a string such as \"([0]*3+[1]*58)\", got {}",
                       describe(v)));
      return J();
    case Ty::kEnvList: {
      if (!v.is_array()) fail(fmt::format("expected a list of NAME=VALUE, got {}", describe(v)));
      for (const auto& item : v) {
        if (!item.is_string()) fail(fmt::format("expected a list of NAME=VALUE, got {} in the list", describe(item)));
        try {
          const auto [name, value] = split_env_assignment(item.get<std::string>(), "environment");
          TrainingSetup scratch;
          (void)apply_environment(scratch, name, value);  // the values the variable can take
        } catch (const UsageError& e) {
          fail(e.what());
        }
      }
      return v;
    }
    case Ty::kFp8:
      if (v.is_boolean()) return v;
      if (v.is_string()) {
        const std::string t = lower(v.get<std::string>());
        if (t == "e4m3" || t == "hybrid") return J(true);
      }
      fail(fmt::format("expected true, false, e4m3 or hybrid, got {}", describe(v)));
      return J();
  }
  fail("unsupported field type");
  return J();
}

}  // namespace spec_detail

using namespace spec_detail;

const std::vector<SpecFieldInfo>& spec_fields() {
  static const std::vector<SpecFieldInfo> out = [] {
    std::vector<SpecFieldInfo> v;
    for (const auto& f : field_defs())
      v.push_back({f.section, f.name, type_text(f), f.default_text, f.summary, f.flag});
    return v;
  }();
  return out;
}

const std::vector<std::string>& spec_sections() { return sections(); }

}  // namespace mme
