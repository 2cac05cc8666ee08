// Layer-memory models of the blocks around the decoder layers of a GPT model
// (megatron/core/models/gpt/gpt_model.py): "embedding" (LanguageModelEmbedding, on the first
// pipeline stage), "output_head" (the final norm, the output layer and the loss, on the last
// stage) and "mtp_projection" (a multi-token-prediction depth beyond its transformer layer:
// enorm, hnorm, eh_proj and its final norm, multi_token_prediction.py).
#pragma once

#include <mme/sdk/layer_model.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class EmbeddingModel final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "embedding"; }
  BlockRole role() const override { return BlockRole::kEmbedding; }
  std::string_view description() const override {
    return "word embedding (vocab-parallel) and learned position embedding, with embedding dropout";
  }
  void validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const override;
  void validate(const BlockContext& ctx) const override;
  void parameters(const BlockContext& ctx, BlockParams& out) const override;
  void activations(const BlockContext& ctx, BlockActivations& out) const override;
  void costs(const BlockContext& ctx, BlockCosts& out) const override;
};

class OutputHeadModel final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "output_head"; }
  BlockRole role() const override { return BlockRole::kOutputHead; }
  std::string_view description() const override {
    return "final norm, output layer (vocab-parallel, tied or not) and cross-entropy loss";
  }
  void validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const override;
  void validate(const BlockContext& ctx) const override;
  void parameters(const BlockContext& ctx, BlockParams& out) const override;
  // One loss computation (the engine counts it once more per MTP depth on the same stage).
  void activations(const BlockContext& ctx, BlockActivations& out) const override;
  void costs(const BlockContext& ctx, BlockCosts& out) const override;
};

class MtpProjectionModel final : public LayerMemoryModel {
 public:
  std::string_view kind() const override { return "mtp_projection"; }
  BlockRole role() const override { return BlockRole::kMtpProjection; }
  std::string_view description() const override {
    return "multi-token-prediction depth: re-embedded shifted tokens, enorm, hnorm, eh_proj, final norm";
  }
  void validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const override;
  void validate(const BlockContext& ctx) const override;
  void parameters(const BlockContext& ctx, BlockParams& out) const override;
  void activations(const BlockContext& ctx, BlockActivations& out) const override;
  void costs(const BlockContext& ctx, BlockCosts& out) const override;
};

void register_language_model(Registrar& registry);

}  // namespace mme::plugins
