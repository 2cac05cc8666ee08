#include "gpt_oss_adapter.hpp"

#include <fmt/core.h>

#include <mme/sdk/config_reader.hpp>
#include <mme/sdk/error.hpp>

#include "hf_common.hpp"

namespace mme::plugins {

namespace {

constexpr int kOwnModelType = 100;

// transformers' GptOssExperts: glu = gate * sigmoid(gate * alpha), alpha = 1.702, the gate clamped
// from above and the linear half on both sides at swiglu_limit, then (up + 1) * glu. Megatron-LM
// writes it as a gated quick_gelu (fusions/fused_bias_geglu.py quick_gelu: x * sigmoid(1.702 x))
// with glu_linear_offset 1 and activation_func_clamp_value = the limit.
constexpr double kGluLinearOffset = 1.0;

}  // namespace

int GptOssAdapter::match(const nlohmann::json& config) const {
  return hf::model_type(config) == "gpt_oss" ? kOwnModelType : 0;
}

ModelSpec GptOssAdapter::adapt(const ConfigInput& input) const {
  ConfigReader r(input.config, input.source);
  ModelSpec spec = hf::start_spec(input, "gpt_oss", name());
  // GptOssConfig: tie_word_embeddings defaults to false; GptOssRMSNorm everywhere.
  hf::read_common(r, spec, /*tie_default=*/false);
  spec.normalization = Normalization::kRMSNorm;
  spec.position_embedding = PositionEmbedding::kRope;  // YaRN-scaled: rope_yarn_factor below
  spec.gated_linear_unit = true;
  spec.activation = "quick_gelu";
  spec.glu_linear_offset = kGluLinearOffset;
  // GptOssConfig swiglu_limit (default 7.0).
  spec.activation_clamp_value = r.number_or("swiglu_limit", 7.0);
  if (!(spec.activation_clamp_value > 0))
    r.fail("swiglu_limit", fmt::format("must be greater than zero, got {}", spec.activation_clamp_value));
  // GptOssExperts has gate_up_proj_bias and down_proj_bias, GptOssTopKRouter a bias: every linear
  // of the MLP has one, so Megatron-LM's add_bias_linear (which also gives linear_proj its bias).
  spec.add_bias_linear = true;

  // GptOssAttention: q/k/v/o projections with bias = attention_bias (default true), head_dim
  // explicit (64: the query width 4096 is not hidden_size), and the sinks: one learnable logit per
  // head in the softmax's denominator.
  AttentionSpec attention = hf::read_gqa_attention(r, spec.hidden_size, /*require_head_dim=*/false);
  if (!r.bool_or("attention_bias", true))
    r.fail("attention_bias", "false is not modelled: Megatron-LM's add_bias_linear gives every linear a bias");
  attention.qkv_bias = true;
  attention.softmax_type = SoftmaxType::kLearnable;

  // GptOssSparseMoeBlock in every layer: num_local_experts experts, num_experts_per_tok of them per
  // token (experts_per_token, where present, must agree), intermediate_size wide; no shared expert.
  MlpSpec moe;
  moe.kind = "moe";
  moe.num_experts = r.require_size("num_local_experts");
  moe.top_k = hf::read_top_k(r, "num_experts_per_tok", moe.num_experts, "num_local_experts");
  if (r.has("experts_per_token") && r.require_size("experts_per_token") != moe.top_k)
    r.fail("experts_per_token", fmt::format("must equal num_experts_per_tok ({})", moe.top_k));
  moe.expert_ffn_hidden_size = r.require_size("intermediate_size");
  hf::build_layers(r, spec, attention, moe, [](std::int64_t) { return true; });

  // layer_types: "sliding_attention" or "full_attention" per layer; GptOssConfig's default
  // alternates, starting with a sliding one. A sliding layer attends to sliding_window tokens
  // including itself (transformers masking_utils sliding_window_overlay: kv > q - window), i.e.
  // Megatron-LM's window_size (sliding_window - 1, 0).
  const std::int64_t window = r.size_or("sliding_window", 128);
  const auto types = r.optional_string_list("layer_types");
  if (types && static_cast<std::int64_t>(types->size()) != spec.num_layers)
    r.fail("layer_types", fmt::format("lists {} layer types for {} layers", types->size(), spec.num_layers));
  for (std::int64_t i = 0; i < spec.num_layers; ++i) {
    bool sliding = i % 2 == 0;
    if (types) {
      const std::string& t = (*types)[static_cast<std::size_t>(i)];
      if (t != "sliding_attention" && t != "full_attention")
        r.fail("layer_types", fmt::format("entry {} is \"{}\", not \"sliding_attention\" or \"full_attention\"", i, t));
      sliding = t == "sliding_attention";
    }
    if (sliding) spec.layers[static_cast<std::size_t>(i)].attention.window = window - 1;
  }
  // YaRN (rope_scaling {rope_type: yarn, factor}): transformers' attention factor without mscale
  // keys is 0.1 ln(factor) + 1, Megatron-LM's concentration factor with its default mscale 1 and
  // mscale_all_dim 0 (yarn_rotary_pos_embedding.py _yarn_get_concentration_factor); above 1 the
  // unfused RoPE runs (ModelSpec::rope_yarn_factor). Other YaRN settings are refused.
  if (const auto it = input.config.find("rope_scaling"); it != input.config.end() && it->is_object()) {
    const auto type = it->find("rope_type");
    if (type != it->end() && *type == "yarn") {
      const auto factor = it->find("factor");
      if (factor == it->end() || !factor->is_number() || !(factor->get<double>() >= 1))
        r.fail("rope_scaling", "a YaRN factor must be a number of at least 1");
      for (const char* key : {"attention_factor", "mscale", "mscale_all_dim"})
        if (it->contains(key))
          r.fail("rope_scaling",
                 fmt::format("'{}' is not modelled (the attention factor would not be YaRN's default)", key));
      spec.rope_yarn_factor = factor->get<double>();
    }
  }
  hf::finish_spec(spec, r);
  return spec;
}

void register_gpt_oss_adapter(Registrar& registry) { registry.add_adapter(std::make_shared<GptOssAdapter>()); }

}  // namespace mme::plugins
