// Layer-memory model "gqa": the self-attention block of a decoder layer with multi-head,
// grouped-query or multi-query attention (megatron/core/transformer/attention.py
// SelfAttention with the TE spec: fused input norm + linear_qkv, core attention, linear_proj,
// bias-dropout-add).
#pragma once

#include <mme/sdk/layer_model.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class GqaAttentionModel final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "gqa"; }
  BlockRole role() const override { return BlockRole::kAttention; }
  MegatronBlock megatron_block() const override { return MegatronBlock::kSelfAttention; }
  std::string_view description() const override {
    return "multi-head / grouped-query attention block (input norm, QKV, core attention, output projection)";
  }
  void validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const override;
  void validate(const BlockContext& ctx) const override;
  void parameters(const BlockContext& ctx, BlockParams& out) const override;
  void activations(const BlockContext& ctx, BlockActivations& out) const override;
  void costs(const BlockContext& ctx, BlockCosts& out) const override;
};

void register_gqa(Registrar& registry);

}  // namespace mme::plugins
