// Layer-memory models of hybrid models (megatron/core/models/hybrid, --hybrid-layer-pattern): the
// Mamba-2 mixer of a Mamba layer ("mamba") and the identity blocks of the layers that have one
// block only ("no_attention": the MLP and MoE layers '-' and 'E'; "no_mlp": the Mamba and attention
// layers 'M' and '*'). The attention, MLP and MoE blocks of those layers are the gqa, dense and moe
// plugins' (hybrid_layer_specs.py builds them from the same modules as the GPT spec).
#pragma once

#include <mme/sdk/layer_model.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

// megatron/core/ssm/mamba_layer.py MambaLayer with mamba_mixer.py MambaMixer, as hybrid_layer_specs.py
// hybrid_stack_spec builds it: the input norm fused into in_proj (TELayerNormColumnParallelLinear),
// the causal conv1d and the SSD scan in one kernel (mamba_ssm mamba_split_conv1d_scan_combined, the
// training path, use_mem_eff_path), the gated RMSNorm, out_proj (TERowParallelLinear), the
// bias-dropout-add.
class MambaMixerModel final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "mamba"; }
  BlockRole role() const override { return BlockRole::kAttention; }
  MegatronBlock megatron_block() const override { return MegatronBlock::kMambaMixer; }
  std::string_view description() const override {
    return "Mamba-2 mixer of a hybrid model's Mamba layer (in_proj with its norm, conv1d, SSD scan, gated norm, "
           "out_proj)";
  }
  void validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const override;
  void validate(const BlockContext& ctx) const override;
  void parameters(const BlockContext& ctx, BlockParams& out) const override;
  void activations(const BlockContext& ctx, BlockActivations& out) const override;
  void costs(const BlockContext& ctx, BlockCosts& out) const override;
};

// The block a hybrid layer does not have (IdentityOp in the layer's spec): no parameters, nothing
// kept, no cost. One class for both roles.
class IdentityBlockModel final : public LayerMemoryModel {
 public:
  explicit IdentityBlockModel(BlockRole role) : role_(role) {}
  std::string_view kind() const override { return role_ == BlockRole::kAttention ? "no_attention" : "no_mlp"; }
  BlockRole role() const override { return role_; }
  MegatronBlock megatron_block() const override { return MegatronBlock::kIdentity; }
  std::string_view description() const override {
    return role_ == BlockRole::kAttention ? "no attention block (a hybrid model's MLP or MoE layer)"
                                          : "no MLP block (a hybrid model's Mamba or attention layer)";
  }
  void validate_spec(const ModelSpec&, const LayerSpec&, std::size_t) const override {}
  void validate(const BlockContext&) const override {}
  void parameters(const BlockContext&, BlockParams&) const override {}
  void activations(const BlockContext&, BlockActivations&) const override {}
  void costs(const BlockContext&, BlockCosts&) const override {}

 private:
  BlockRole role_;
};

void register_hybrid_layers(Registrar& registry);

}  // namespace mme::plugins
