// Config adapter "spec_file": builds the model from the model section of a spec file
// (docs/spec-files.md), in Megatron-LM's TransformerConfig names with the configuration
// guide's defaults: RMSNorm, SwiGLU (gated), rotary positions, no linear biases, untied
// embeddings, no dropout. libmme reads the file (mme/inputs/spec_file.hpp) and hands the section over
// as a config document marked {"mme_source": "spec-file"}; every error names the file, the line
// and the field. It is also the host's SpecModelMapping: the fields over a Hugging Face base,
// and a model written back as a model section (spec_model_mapping.cpp).
#pragma once

#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class SpecFileAdapter final : public SpecModelMapping {
 public:
  std::string_view name() const override { return "spec_file"; }
  std::string_view description() const override {
    return "the model section of a spec file (mme estimate --config SPEC.yaml|SPEC.json)";
  }
  std::vector<std::string> model_types() const override { return {"spec-file"}; }
  int match(const nlohmann::json& config) const override;
  ModelSpec adapt(const ConfigInput& input) const override;

  // SpecModelMapping (spec_model_mapping.cpp).
  void apply_overrides(ModelSpec& model, SpecModelReader& reader, const std::string& hf) const override;
  std::string inexpressible(const ModelSpec& model) const override;
  std::vector<SpecModelField> model_section(const ModelSpec& model, const TrainingSetup& setup) const override;
};

void register_spec_file_adapter(Registrar& registry);

}  // namespace mme::plugins
