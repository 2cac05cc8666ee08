// Layer-memory model "moe": the mixture-of-experts MLP block of a decoder layer
// (megatron/core/transformer/moe/moe_layer.py MoELayer: pre-MLP norm, TopKRouter, token
// dispatcher, grouped routed experts (TEGroupedMLP), optional shared experts and gate).
#pragma once

#include <mme/sdk/checked.hpp>
#include <mme/sdk/layer_model.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class MoeModel final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "moe"; }
  BlockRole role() const override { return BlockRole::kMlp; }
  MegatronBlock megatron_block() const override { return MegatronBlock::kMoeLayer; }
  std::string_view description() const override {
    return "mixture-of-experts block (router, token dispatcher, routed and shared experts)";
  }
  void validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const override;
  void validate(const BlockContext& ctx) const override;
  void parameters(const BlockContext& ctx, BlockParams& out) const override;
  void activations(const BlockContext& ctx, BlockActivations& out) const override;
  void costs(const BlockContext& ctx, BlockCosts& out) const override;

  // Tokens the routed experts of one rank process per micro-batch (balanced routing):
  // every local token is sent to top-k experts, the ETP group all-gathers its tokens; a
  // capacity factor drops what exceeds the capacity, and with
  // --moe-pad-expert-input-to-capacity each expert's input is padded to it.
  static CheckedInt expert_tokens(const BlockContext& ctx);
  // With --moe-capacity-factor: the tokens each expert takes from one routing rank.
  static CheckedInt expert_capacity(const BlockContext& ctx);
};

void register_moe(Registrar& registry);

}  // namespace mme::plugins
