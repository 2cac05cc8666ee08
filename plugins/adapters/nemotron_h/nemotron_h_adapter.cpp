#include "nemotron_h_adapter.hpp"

#include <optional>

#include <fmt/core.h>

#include <mme/sdk/config_reader.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/hybrid_layers.hpp>

#include "hf_common.hpp"

namespace mme::plugins {

namespace {

constexpr int kOwnModelType = 100;

// Megatron-LM's MambaMixer runs a causal conv1d of width 4 (d_conv; the hybrid stack passes no
// other), its activation SiLU, a conv1d bias and no in_proj / out_proj bias (mamba_mixer.py).
constexpr std::int64_t kMegatronConvKernel = 4;

}  // namespace

int NemotronHAdapter::match(const nlohmann::json& config) const {
  return hf::model_type(config) == "nemotron_h" ? kOwnModelType : 0;
}

ModelSpec NemotronHAdapter::adapt(const ConfigInput& input) const {
  ConfigReader r(input.config, input.source);
  ModelSpec spec = hf::start_spec(input, "nemotron_h", name());
  // NemotronHConfig: tie_word_embeddings defaults to false; its norms are NemotronHRMSNorm (the
  // layer_norm_epsilon key names an RMSNorm's epsilon here).
  hf::read_common(r, spec, /*tie_default=*/false);
  spec.normalization = Normalization::kRMSNorm;
  // NemotronHAttention applies no rotary embedding: the Mamba layers carry the positions
  // (Megatron-LM's --position-embedding-type none).
  spec.position_embedding = PositionEmbedding::kNone;
  if (r.bool_or("residual_in_fp32", false))
    r.fail("residual_in_fp32", "true is not modelled (Megatron-LM's --fp32-residual-connection)");
  // The MLPs and experts: up_proj, relu2, down_proj (NemotronHMLP): Megatron-LM's --squared-relu.
  const std::string act = r.string_or("mlp_hidden_act", "relu2");
  if (act != "relu2") r.fail("mlp_hidden_act", fmt::format("\"{}\" is not modelled (relu2 is)", act));
  spec.gated_linear_unit = false;
  spec.activation = "squared_relu";
  for (const char* key : {"attention_bias", "mlp_bias", "use_bias"})
    if (r.bool_or(key, false))
      r.fail(key, "true is not modelled: Megatron-LM's hybrid layers have no linear biases here");
  spec.add_bias_linear = false;
  if (!r.bool_or("use_conv_bias", true)) r.fail("use_conv_bias", "false: Megatron-LM's MambaMixer asserts a conv bias");
  if (r.string_or("mamba_hidden_act", "silu") != "silu")
    r.fail("mamba_hidden_act", "only silu: Megatron-LM's MambaMixer runs SiLU");
  if (r.size_or("conv_kernel", kMegatronConvKernel) != kMegatronConvKernel)
    r.fail("conv_kernel", fmt::format("only {}: Megatron-LM's MambaMixer runs d_conv 4", kMegatronConvKernel));

  const AttentionSpec attention = hf::read_gqa_attention(r, spec.hidden_size, /*require_head_dim=*/false);
  // NemotronHMamba2Mixer: mamba_num_heads heads of mamba_head_dim, n_groups groups of
  // ssm_state_size (the expand key sizes d_inner only where the heads are not given).
  AttentionSpec mixer = attention;
  mixer.kind = "mamba";
  mixer.mamba_num_heads = r.require_size("mamba_num_heads");
  mixer.mamba_head_dim = r.require_size("mamba_head_dim");
  mixer.mamba_state_dim = r.size_or("ssm_state_size", 128);
  mixer.mamba_num_groups = r.size_or("n_groups", 8);

  // hybrid_override_pattern, one symbol per layer (the keys of the other blocks are read only
  // where a layer uses them).
  const std::string pattern = r.string_or("hybrid_override_pattern", "");
  if (static_cast<std::int64_t>(pattern.size()) != spec.num_layers)
    r.fail("hybrid_override_pattern",
           fmt::format("has {} symbols for {} layers (num_hidden_layers)", pattern.size(), spec.num_layers));
  MlpSpec dense, moe;
  if (pattern.find('-') != std::string::npos) {
    dense.kind = "dense";
    dense.ffn_hidden_size = r.require_size("intermediate_size");
  }
  if (pattern.find('E') != std::string::npos) {
    // NemotronHMoE: n_routed_experts of moe_intermediate_size, num_experts_per_tok per token, one
    // shared MLP of moe_shared_expert_intermediate_size, a sigmoid router with
    // e_score_correction_bias (Megatron-LM's --moe-router-enable-expert-bias, its scores in fp32).
    moe.kind = "moe";
    moe.num_experts = r.require_size("n_routed_experts");
    moe.top_k = hf::read_top_k(r, "num_experts_per_tok", moe.num_experts, "n_routed_experts");
    moe.expert_ffn_hidden_size = r.require_size("moe_intermediate_size");
    moe.shared_expert_ffn_hidden_size = r.size_or("moe_shared_expert_intermediate_size", 0);
    moe.router_expert_bias = true;
    moe.router_fp32 = true;
  }
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const std::optional<LayerSpec> layer = hybrid_layer(pattern[i], mixer, attention, dense, moe);
    if (!layer)
      r.fail("hybrid_override_pattern",
             fmt::format("symbol {} is '{}', not M (Mamba), * (attention), - (MLP) or E (MoE)", i, pattern[i]));
    spec.layers.push_back(*layer);
  }
  hf::finish_spec(spec, r);
  return spec;
}

void register_nemotron_h_adapter(Registrar& registry) { registry.add_adapter(std::make_shared<NemotronHAdapter>()); }

}  // namespace mme::plugins
