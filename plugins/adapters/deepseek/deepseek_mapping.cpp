#include "deepseek_mapping.hpp"

#include <mme/sdk/config_reader.hpp>

#include "hf_common.hpp"

namespace mme::plugins::deepseek {

ModelSpec map_deepseek_config(const ConfigInput& in, const DeepSeekStyle& style) {
  ConfigReader r(in.config, in.source);
  ModelSpec spec = hf::start_spec(in, style.family, style.adapter);
  // DeepseekV2Config / DeepseekV3Config: tie_word_embeddings defaults to false.
  hf::read_common(r, spec, /*tie_default=*/false);
  // modeling_deepseek.py has only RMSNorm (DeepseekV3RMSNorm), whatever the epsilon key.
  spec.normalization = Normalization::kRMSNorm;
  spec.position_embedding = PositionEmbedding::kRope;
  // DeepseekV3MLP is always gated (gate_proj, up_proj, down_proj); hidden_act picks the function.
  spec.activation = hf::read_activation(r, {"hidden_act"}, "silu");
  spec.gated_linear_unit = true;
  spec.add_bias_linear = false;
  if (r.bool_or("attention_bias", false))
    spec.warnings.push_back("attention_bias is true: the biases of the MLA projections are not modelled");

  const AttentionSpec attention = hf::read_mla_attention(r, in.config);

  // DeepSeekMoE. n_routed_experts null (or 0) is a dense model (HF: `n_routed_experts is not None`).
  const std::int64_t experts = hf::count_at_most(r, "n_routed_experts", ConfigReader::kMaxCount, 0);
  MlpSpec moe;
  moe.kind = "moe";
  std::int64_t first_dense = 0, freq = 1;
  if (experts > 0) {
    moe.num_experts = experts;
    moe.top_k = hf::read_top_k(r, "num_experts_per_tok", experts, "n_routed_experts");
    moe.expert_ffn_hidden_size = r.require_size("moe_intermediate_size");
    // Shared experts: n_shared_experts x moe_intermediate_size, no gate.
    moe.shared_expert_ffn_hidden_size = hf::read_shared_experts_width(r, moe.expert_ffn_hidden_size);
    // noaux_tc routing adds e_score_correction_bias [E] to the gate (HF MoEGate).
    const std::string topk_method = r.string_or("topk_method", style.v3 ? "noaux_tc" : "greedy");
    moe.router_expert_bias = topk_method == "noaux_tc";
    moe.router_fp32 = style.v3;
    first_dense = hf::count_at_most(r, "first_k_dense_replace", ConfigReader::kMaxCount, 0);
    freq = r.size_or("moe_layer_freq", 1);
  }
  // Dense layers (the first_k_dense_replace ones) use intermediate_size.
  hf::build_layers(r, spec, attention, moe,
                   [&](std::int64_t i) { return experts > 0 && i >= first_dense && i % freq == 0; });
  // Multi-token prediction (DeepSeek-V3): depth num_nextn_predict_layers (0 or absent: none).
  spec.mtp_num_layers = hf::read_mtp_depth(r, {"num_nextn_predict_layers"});
  hf::finish_spec(spec, r);
  return spec;
}

}  // namespace mme::plugins::deepseek
