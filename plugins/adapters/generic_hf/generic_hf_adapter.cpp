#include "generic_hf_adapter.hpp"

#include <array>
#include <set>

#include <fmt/core.h>

#include <mme/sdk/config_reader.hpp>
#include <mme/sdk/error.hpp>

#include "hf_common.hpp"

namespace mme::plugins {

namespace {

constexpr int kFallback = 10;
constexpr std::array<std::string_view, 4> kEssentialKeys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                                            "vocab_size"};

// Facts of a family that its config.json does not state (the HF modeling code hard-codes them).
struct FamilyTraits {
  // The config class's tie_word_embeddings default. Unknown families: PretrainedConfig's
  // default, true; transformers leaves the key out of config.json exactly when it is true.
  bool tie_default = true;
  bool known_family = false;
  bool gelu_gated = false;       // a gelu-family activation in a gated MLP (GeGLU)
  bool sandwich_norms = false;   // post_attention_layernorm + post_feedforward_layernorm
  bool qk_norm = false;          // q_norm / k_norm over the head dim
  bool all_linear_bias = false;  // every linear layer has a bias
  const char* caveat = nullptr;  // what the ModelSpec cannot represent exactly
};

FamilyTraits traits_for(const std::string& type) {
  FamilyTraits t;
  t.known_family = true;
  if (type == "llama" || type == "mistral" || type == "mixtral" || type == "phi3") {
    t.tie_default = false;  // LlamaConfig, MistralConfig, MixtralConfig, Phi3Config
  } else if (type == "gemma") {
    // GemmaConfig: tied by default; GemmaMLP gate_proj/up_proj/down_proj with gelu (GeGLU).
    t.tie_default = true;
    t.gelu_gated = true;
  } else if (type == "gemma2") {
    // Gemma2DecoderLayer: input, post_attention, pre_feedforward and post_feedforward norms.
    t.tie_default = true;
    t.gelu_gated = true;
    t.sandwich_norms = true;
  } else if (type == "gemma3_text" || type == "gemma3") {
    // Gemma3: Gemma-2's four norms plus q_norm / k_norm.
    t.tie_default = true;
    t.gelu_gated = true;
    t.sandwich_norms = true;
    t.qk_norm = true;
  } else if (type == "phi") {
    // PhiDecoderLayer: biases on q/k/v/dense and fc1/fc2, attention and MLP in parallel.
    t.tie_default = false;  // PhiConfig
    t.all_linear_bias = true;
    t.caveat =
        "phi: attention and MLP run in parallel on one input LayerNorm and lm_head has a bias; the estimate models "
        "a sequential block with its own pre-MLP norm";
  } else if (type == "starcoder2") {
    t.tie_default = true;  // Starcoder2Config keeps PretrainedConfig's default
  } else {
    t.known_family = false;
  }
  return t;
}

bool is_gelu_family(std::string_view act) { return act.rfind("gelu", 0) == 0; }

// Keys containing "expert" that this adapter understands; any other one gets a warning.
const std::set<std::string, std::less<>>& known_expert_keys() {
  static const std::set<std::string, std::less<>> keys = {"num_experts",      "num_local_experts",
                                                          "n_routed_experts", "num_experts_per_tok",
                                                          "n_shared_experts", "shared_expert_intermediate_size"};
  return keys;
}

}  // namespace

std::vector<std::string> GenericHfAdapter::model_types() const {
  return {"llama", "mistral", "mixtral", "gemma", "gemma2", "gemma3_text", "phi", "phi3", "starcoder2", "(any)"};
}

int GenericHfAdapter::match(const nlohmann::json& config) const {
  if (!config.is_object()) return 0;
  for (auto k : kEssentialKeys)
    if (config.contains(k)) return kFallback;
  return 0;
}

ModelSpec GenericHfAdapter::adapt(const ConfigInput& input) const {
  const nlohmann::json& c = input.config;
  ConfigReader r(c, input.source);
  const std::string type = hf::model_type(c);
  // An encoder-decoder config (T5, BART: is_encoder_decoder, or the encoder/decoder layer
  // counts those families use instead of num_hidden_layers) is said to be one, before the
  // decoder-only keys it lacks are listed.
  {
    std::string shape;
    if (r.bool_or("is_encoder_decoder", false)) shape = "is_encoder_decoder is true";
    for (const char* k : {"num_decoder_layers", "decoder_layers", "encoder_layers"})
      if (shape.empty() && c.contains(k)) shape = fmt::format("it has {}", k);
    if (!shape.empty())
      throw ConfigError(
          fmt::format("{}: T5-style encoder-decoder models are not modelled (model_type '{}': {}); mme "
                      "estimates decoder-only models as Megatron-LM's GPT model trains them",
                      input.source, type.empty() ? "(none)" : type, shape));
  }
  std::string missing;
  for (auto k : kEssentialKeys)
    if (!r.has(k)) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", k);
  if (!missing.empty())
    throw ConfigError(
        fmt::format("{}: {}: required {} missing (model_type '{}' is handled by the generic adapter, "
                    "which needs hidden_size, num_hidden_layers, num_attention_heads and vocab_size)",
                    input.source, missing, missing.find(',') == std::string::npos ? "key is" : "keys are",
                    type.empty() ? "(none)" : type));

  const FamilyTraits traits = traits_for(type);
  ModelSpec spec = hf::start_spec(input, type.empty() ? "generic" : type, name());
  if (!hf::read_common(r, spec, traits.tie_default))
    spec.warnings.push_back("no rms_norm_eps or layer_norm_eps key: RMSNorm assumed");
  if (traits.caveat) spec.warnings.emplace_back(traits.caveat);
  if (!traits.known_family && !r.has("tie_word_embeddings"))
    spec.warnings.push_back(
        "no tie_word_embeddings key: tied embeddings assumed (the transformers default, which "
        "config.json omits)");

  // Position embedding: rotary unless the config says otherwise.
  spec.position_embedding = PositionEmbedding::kRope;
  if (auto pe = r.optional_string("position_embedding_type")) {
    if (*pe == "absolute" || *pe == "learned" || *pe == "learned_absolute") {
      spec.position_embedding = PositionEmbedding::kLearnedAbsolute;
      if (spec.max_position_embeddings <= 0)
        r.fail("max_position_embeddings", "required key is missing (learned absolute position embeddings)");
    } else if (*pe == "alibi" || *pe == "none") {
      spec.position_embedding = PositionEmbedding::kNone;
    } else if (*pe != "rope" && *pe != "rotary") {
      r.fail("position_embedding_type", fmt::format("unknown position embedding '{}' (expected rope, rotary, "
                                                    "absolute, alibi or none)",
                                                    *pe));
    }
  } else if (r.bool_or("alibi", false)) {
    spec.position_embedding = PositionEmbedding::kNone;
  }

  // Activation and MLP shape: silu/swish is SwiGLU (gate_proj + up_proj); a gelu variant
  // is gated only for families whose MLP has a gate (Gemma's GeGLU).
  spec.activation = hf::read_activation(r, {"hidden_activation", "hidden_act"}, "silu");
  spec.gated_linear_unit =
      hf::is_swiglu_activation(spec.activation) || (traits.gelu_gated && is_gelu_family(spec.activation));

  // Biases: attention_bias -> add_qkv_bias, mlp_bias / use_bias -> add_bias_linear.
  const bool attention_bias = r.bool_or("attention_bias", false);
  const bool mlp_bias = r.bool_or("mlp_bias", false);
  const bool use_bias = r.bool_or("use_bias", false);
  spec.add_bias_linear = traits.all_linear_bias || use_bias || (attention_bias && mlp_bias);
  if (attention_bias && !spec.add_bias_linear)
    spec.warnings.push_back(
        "attention_bias is true: the q/k/v biases are counted, the o_proj bias "
        "(hidden_size per layer) is not");
  if (mlp_bias && !spec.add_bias_linear)
    spec.warnings.push_back("mlp_bias is true without attention_bias: the MLP biases are not modelled");

  // Attention: MLA when the config has kv_lora_rank, else MHA/GQA/MQA.
  const std::int64_t h = spec.hidden_size;
  AttentionSpec attention;
  if (r.has("kv_lora_rank")) {
    attention = hf::read_mla_attention(r, c);
  } else {
    attention = hf::read_gqa_attention(r, h, /*require_head_dim=*/false);
    attention.qkv_bias = attention_bias;
    bool qk_norm = traits.qk_norm;
    if (auto key = r.first_present({"use_qk_norm", "qk_layernorm"})) qk_norm = r.bool_or(*key, false);
    attention.qk_norm = qk_norm;
  }

  // Mixture of experts: num_experts / num_local_experts / n_routed_experts, first match wins.
  const std::int64_t L = spec.num_layers;
  std::int64_t experts = 0;
  std::string experts_key;
  if (auto key = r.first_present({"num_experts", "num_local_experts", "n_routed_experts"})) {
    experts_key = *key;
    experts = hf::count_at_most(r, *key, ConfigReader::kMaxCount, 0);
  }
  MlpSpec moe;
  moe.kind = "moe";
  std::int64_t first_dense = 0, freq = 1, step = 1;
  std::set<std::int64_t> mlp_only;
  if (experts > 0) {
    moe.num_experts = experts;
    moe.top_k = hf::read_top_k(r, "num_experts_per_tok", experts, experts_key);
    // Expert width: moe_intermediate_size, else intermediate_size (Mixtral's w1/w2/w3).
    auto width_key = r.first_present({"moe_intermediate_size", "intermediate_size"});
    if (!width_key) r.fail("moe_intermediate_size", "required key is missing (nor is there an intermediate_size)");
    moe.expert_ffn_hidden_size = r.require_size(*width_key);
    // Shared experts: an explicit width, or n_shared_experts x the expert width.
    if (r.has("shared_expert_intermediate_size")) {
      moe.shared_expert_ffn_hidden_size =
          hf::count_at_most(r, "shared_expert_intermediate_size", ConfigReader::kMaxDimension, 0);
    } else {
      moe.shared_expert_ffn_hidden_size = hf::read_shared_experts_width(r, moe.expert_ffn_hidden_size);
    }
    // DeepSeek-V3-style noaux_tc routing keeps an expert bias [E] in the router.
    moe.router_expert_bias = r.string_or("topk_method", "") == "noaux_tc";
    // Which layers are MoE: all of them unless first_k_dense_replace / moe_layer_freq
    // (DeepSeek: i >= k and i % freq == 0) or decoder_sparse_step / mlp_only_layers
    // (Qwen-MoE: (i + 1) % step == 0 and i not listed) say otherwise.
    first_dense = hf::count_at_most(r, "first_k_dense_replace", ConfigReader::kMaxCount, 0);
    freq = r.size_or("moe_layer_freq", 1);
    step = r.size_or("decoder_sparse_step", 1);
    mlp_only = hf::read_mlp_only_layers(r, L);
  }
  for (const auto& item : c.items()) {
    const std::string& key = item.key();
    if (key.find("expert") != std::string::npos && !known_expert_keys().count(key) && !item.value().is_null())
      spec.warnings.push_back(
          fmt::format("key '{}' looks like a mixture-of-experts setting this adapter does not "
                      "understand; it is ignored",
                      key));
  }
  hf::build_layers(
      r, spec, attention, moe,
      [&](std::int64_t i) {
        return experts > 0 && i >= first_dense && i % freq == 0 && (i + 1) % step == 0 && !mlp_only.count(i);
      },
      traits.sandwich_norms);
  spec.mtp_num_layers = hf::read_mtp_depth(r, {"num_nextn_predict_layers", "mtp_num_hidden_layers"});

  // Keys seen but not honoured (rope_theta / rope_scaling change no memory and are not listed).
  const bool sliding = r.has("sliding_window") && r.bool_or("use_sliding_window", true);
  if (sliding)
    spec.warnings.push_back(
        "sliding_window is set: sliding-window attention is not modelled; attention memory is "
        "estimated for full causal attention");
  for (auto key : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (r.has(key))
      spec.warnings.push_back(
          fmt::format("{} is set: logit soft-capping is not modelled (no effect on parameters; "
                      "unfused attention may keep one more score-sized tensor)",
                      key));
  hf::finish_spec(spec, r);
  return spec;
}

void register_generic_hf_adapter(Registrar& registry) { registry.add_adapter(std::make_shared<GenericHfAdapter>()); }

}  // namespace mme::plugins
