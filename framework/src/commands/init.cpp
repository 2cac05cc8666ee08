#include "mme/commands/init.hpp"

#include <fmt/core.h>

#include <mme/inputs/json_schema.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>

#include "resolve.hpp"

namespace mme::commands {

namespace {

// The model of `mme init` without MODEL: the shape of Llama-3-8B, every other field at the
// guide's defaults. Read through the spec reader and the spec_file adapter like any spec file.
constexpr const char* kExampleModel = R"(model:
  name: my-model
  num_layers: 32
  hidden_size: 4096
  num_attention_heads: 32
  num_query_groups: 8
  ffn_hidden_size: 14336
  vocab_size: 128256
  max_position_embeddings: 8192
)";

}  // namespace

std::string init_spec(const InitRequest& request, const Context& context) {
  using namespace detail;
  const RequestLog log(context);
  // MODEL (or none: the example) and the layout flags with the seed's defaults, as `mme estimate
  // MODEL` reads them.
  const ReadInputs read = read_inputs(request.input, request.setup, InputRules{"init", false, true});
  const TrainingSetup& setup = read.setup;
  const auto registry = load_registry(context);
  const HardwareProfile* gpu = request_gpu(read, request.gpu, *registry);
  const bool example = !read.model_name;
  const SourceOptions sources = source_options(context, request.input.revision);
  std::vector<std::string> assumptions;  // only launch flags make any, and init takes none
  const ModelSpec model =
      example ? load_spec_model(parse_spec_text(kExampleModel, "my-model.yaml", SpecFormat::kYaml), *registry, sources)
              : load_request_model(read, *registry, sources, assumptions);

  // The layout is checked the way an estimate checks it, so the template always estimates.
  Estimator estimator(model, *registry);
  EstimateOptions eo;
  if (gpu) eo.compute_capability = gpu->compute_capability;
  const Estimate est = estimator.run(setup, eo);
  try {
    check_spec_layout(nullptr, model, est.setup);
  } catch (const LayoutError& e) {
    throw LayoutError(fmt::format("the spec would break a rule of spec files: {}", e.what()));
  }

  SpecWriteOptions wo;
  wo.header = {
      // First: editors that speak the YAML language server complete and check the fields.
      "yaml-language-server: $schema=" + spec_file_schema_reference(),
      "mme spec file (docs/spec-files.md): a model, its parallel layout and its training settings,",
      "in Megatron-LM's TransformerConfig names and the sections of the configuration guide.",
      "  mme estimate --config FILE [flags]         estimate it; command-line flags override the file",
      "  mme estimate --config FILE --dump-config   print it back with every default filled in",
      example ? "Written by `mme init`: an example model in the shape of Llama-3-8B."
              : fmt::format("Written by `mme init {}`.", shell_quote(*read.model_name)),
      "Each line's comment gives the field's meaning and default; a line that starts with",
      "\"# field:\" is a field this model does not use, shown with its default.",
  };
  if (gpu) wo.gpu = gpu->name;
  return request.json ? write_spec_json(model, est.setup, *registry, wo)
                      : write_spec_yaml(model, est.setup, *registry, wo);
}

}  // namespace mme::commands
