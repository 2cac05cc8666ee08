// `mme init [MODEL] [layout flags]`: a commented spec file to start from.
#include <iostream>

#include <fmt/core.h>

#include <mme/engine/estimator.hpp>
#include <mme/inputs/json_schema.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>

#include "command.hpp"
#include "context.hpp"
#include "estimate_inputs.hpp"
#include "estimate_options.hpp"

namespace mme::cli {

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

po::options_description visible_options() {
  po::options_description d("Options");
  po::options_description hidden;
  d.add_options()("json", po::bool_switch(), "write the spec as JSON (no comments) instead of commented YAML")(
      "gpu", po::value<std::string>(), "the GPU to judge the fit on (infrastructure.gpu; see `mme hardware`)")(
      "revision", po::value<std::string>(), "hub revision to download (default main)");
  add_setup_options(d, hidden);
  add_hardware_file_option(d);
  d.add(common_options());
  return d;
}

}  // namespace

void help_init(std::ostream& out) {
  out << "Usage: mme init [MODEL] [layout flags] > spec.yaml\n\n"
         "Prints a commented spec file (docs/spec-files.md) to start from: the model section of\n"
         "MODEL (a bundled model, a hub id, a config.json or a folder) field by field, or without\n"
         "MODEL an example in the shape of Llama-3-8B, and the parallelism, training,\n"
         "infrastructure and precision sections from the layout flags (those of `mme estimate`).\n"
         "`mme estimate --config spec.yaml` then gives the same estimate as MODEL with the same flags.\n\n"
      << visible_options()
      << "\nExample:\n  mme init Qwen/Qwen3-8B --tp 2 --num-gpus 16 > qwen3-8b.yaml\n"
         "  mme estimate --config qwen3-8b.yaml --micro-batch-size 2\n";
}

int run_init(const std::vector<std::string>& args) {
  po::positional_options_description pos;
  pos.add("model", 1);
  const auto vm = parse("init", args, visible_options(), model_and_setup_hidden_options(), pos);
  const CommonSettings common = read_common(vm);
  // MODEL (or none: the example) and the layout flags with the seed's defaults, as `mme estimate
  // MODEL` reads them (estimate_inputs.hpp).
  const EstimateRequest request = read_estimate_request(vm, model_argument(vm), InputRules{"init", false, true});
  const TrainingSetup& setup = request.setup;

  Registry registry;
  use_hardware_files(vm);
  load_registry(registry, common);
  const HardwareProfile* gpu = request_gpu(request, vm, registry);
  const bool example = !request.model_name;
  std::vector<std::string> assumptions;  // only launch flags make any, and init takes none
  const ModelSpec model = example ? load_spec_model(parse_spec_text(kExampleModel, "my-model.yaml", SpecFormat::kYaml),
                                                    registry, source_options(vm))
                                  : load_request_model(request, vm, registry, assumptions);

  // The layout is checked the way an estimate checks it, so the template always estimates.
  Estimator estimator(model, registry);
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
              : fmt::format("Written by `mme init {}`.", shell_quote(*request.model_name)),
      "Each line's comment gives the field's meaning and default; a line that starts with",
      "\"# field:\" is a field this model does not use, shown with its default.",
  };
  if (gpu) wo.gpu = gpu->name;
  std::cout << (vm["json"].as<bool>() ? write_spec_json(model, est.setup, registry, wo)
                                      : write_spec_yaml(model, est.setup, registry, wo));
  return 0;
}

po::options_description options_init() { return visible_options(); }

}  // namespace mme::cli
