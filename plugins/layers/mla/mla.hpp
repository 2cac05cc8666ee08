// Layer-memory model "mla": the multi-latent attention block of DeepSeek-V2/V3-style layers
// (megatron/core/transformer/multi_latent_attention.py MLASelfAttention: separate input
// norm, TP-duplicated down-projections, latent norms fused into the up-projections, core
// attention over n full heads, linear_proj, bias-dropout-add).
#pragma once

#include <mme/sdk/layer_model.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class MlaAttentionModel final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "mla"; }
  BlockRole role() const override { return BlockRole::kAttention; }
  MegatronBlock megatron_block() const override { return MegatronBlock::kMlaSelfAttention; }
  std::string_view description() const override {
    return "multi-latent attention block (q/kv down-projections, latent norms, up-projections, core attention)";
  }
  void validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const override;
  void validate(const BlockContext& ctx) const override;
  void parameters(const BlockContext& ctx, BlockParams& out) const override;
  void activations(const BlockContext& ctx, BlockActivations& out) const override;
  void costs(const BlockContext& ctx, BlockCosts& out) const override;
};

void register_mla(Registrar& registry);

}  // namespace mme::plugins
