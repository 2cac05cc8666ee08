#include "qwen_adapter.hpp"

#include <set>

#include <mme/sdk/config_reader.hpp>

#include "hf_common.hpp"

namespace mme::plugins {

namespace {

constexpr int kOwnModelType = 100;

bool is_qwen_type(const std::string& t) { return t == "qwen2" || t == "qwen2_moe" || t == "qwen3" || t == "qwen3_moe"; }

}  // namespace

int QwenAdapter::match(const nlohmann::json& config) const {
  return is_qwen_type(hf::model_type(config)) ? kOwnModelType : 0;
}

ModelSpec QwenAdapter::adapt(const ConfigInput& input) const {
  const std::string type = hf::model_type(input.config);
  const bool qwen3 = type == "qwen3" || type == "qwen3_moe";
  const bool moe_family = type == "qwen2_moe" || type == "qwen3_moe";
  ConfigReader r(input.config, input.source);
  ModelSpec spec = hf::start_spec(input, type, name());
  // Qwen2Config / Qwen3Config (and the MoE ones): tie_word_embeddings defaults to false.
  hf::read_common(r, spec, /*tie_default=*/false);
  spec.normalization = Normalization::kRMSNorm;  // Qwen2RMSNorm / Qwen3RMSNorm only
  spec.position_embedding = PositionEmbedding::kRope;
  // Qwen MLPs are always gated (gate_proj, up_proj, down_proj); hidden_act picks the function.
  spec.activation = hf::read_activation(r, {"hidden_act"}, "silu");
  spec.gated_linear_unit = true;
  spec.add_bias_linear = false;

  // Attention. Qwen3 configs always state head_dim (128, not hidden/heads for several sizes).
  AttentionSpec attention = hf::read_gqa_attention(r, spec.hidden_size, /*require_head_dim=*/qwen3);
  if (qwen3) {
    // Qwen3Attention: q/k/v (and o_proj) bias = attention_bias; q_norm / k_norm over head_dim.
    attention.qkv_bias = r.bool_or("attention_bias", false);
    if (attention.qkv_bias)
      spec.warnings.push_back("attention_bias is true: the o_proj bias (hidden_size per layer) is not modelled");
    attention.qk_norm = true;
  } else {
    // Qwen2Attention: q/k/v projections always have a bias (no config key), o_proj none.
    attention.qkv_bias = true;
    attention.qk_norm = false;
  }
  if (r.bool_or("use_sliding_window", false))
    spec.warnings.push_back(
        "use_sliding_window is true: sliding-window attention is not modelled; attention "
        "memory is estimated for full causal attention");

  // MoE: layer i is sparse iff num_experts > 0, i is not in mlp_only_layers and
  // (i + 1) % decoder_sparse_step == 0 (Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer).
  MlpSpec moe;
  moe.kind = "moe";
  std::int64_t experts = 0, step = 1;
  std::set<std::int64_t> mlp_only;
  if (moe_family) {
    experts = hf::count_at_most(r, "num_experts", ConfigReader::kMaxCount, 0);
    if (experts > 0) {
      moe.num_experts = experts;
      moe.top_k = hf::read_top_k(r, "num_experts_per_tok", experts, "num_experts");
      moe.expert_ffn_hidden_size = r.require_size("moe_intermediate_size");
      if (type == "qwen2_moe") {
        // Qwen2MoeSparseMoeBlock: one shared expert of shared_expert_intermediate_size, scaled
        // by sigmoid(shared_expert_gate(x)), a Linear(h -> 1).
        if (!r.has("shared_expert_intermediate_size"))
          r.fail("shared_expert_intermediate_size", "required key is missing (0 means no shared expert)");
        moe.shared_expert_ffn_hidden_size =
            hf::count_at_most(r, "shared_expert_intermediate_size", ConfigReader::kMaxDimension, 0);
        moe.shared_expert_gate = moe.shared_expert_ffn_hidden_size > 0;
      }
      step = r.size_or("decoder_sparse_step", 1);
      mlp_only = hf::read_mlp_only_layers(r, spec.num_layers);
    }
  }
  // Dense layers (all of them in qwen2/qwen3) use intermediate_size.
  hf::build_layers(r, spec, attention, moe,
                   [&](std::int64_t i) { return experts > 0 && !mlp_only.count(i) && (i + 1) % step == 0; });
  hf::finish_spec(spec, r);
  return spec;
}

void register_qwen_adapter(Registrar& registry) { registry.add_adapter(std::make_shared<QwenAdapter>()); }

}  // namespace mme::plugins
