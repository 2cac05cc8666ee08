// Layer-memory model "dense": the MLP block of a dense decoder layer
// (megatron/core/transformer/mlp.py MLP with the TE spec: pre-MLP norm fused into linear_fc1,
// activation (SwiGLU/GeGLU gated or plain), linear_fc2, bias-dropout-add).
#pragma once

#include <mme/sdk/layer_model.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class DenseMlpModel final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "dense"; }
  BlockRole role() const override { return BlockRole::kMlp; }
  MegatronBlock megatron_block() const override { return MegatronBlock::kMlp; }
  std::string_view description() const override {
    return "dense MLP block (pre-MLP norm, fc1, gated or plain activation, fc2)";
  }
  void validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const override;
  void validate(const BlockContext& ctx) const override;
  void parameters(const BlockContext& ctx, BlockParams& out) const override;
  void activations(const BlockContext& ctx, BlockActivations& out) const override;
  void costs(const BlockContext& ctx, BlockCosts& out) const override;
};

void register_dense_mlp(Registrar& registry);

}  // namespace mme::plugins
