// What every use case that takes a model shares (estimate, compare, validate --from-log, plan,
// init): reading the model source and the setup from a request, resolving them through the
// registry, running the engine. Private to libmme_commands.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <mme/commands/estimate.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/spec_file.hpp>

namespace mme::commands::detail {

// What the request says, read before any plugin is loaded: the flags' own errors come first.
struct ReadInputs {
  std::optional<std::string> model_name;  // MODEL
  std::optional<MegatronArgs> megatron;
  std::string megatron_source;  // "--megatron-args" or the file
  std::optional<SpecFile> spec;
  TrainingSetup setup;  // from the Megatron flags or the spec, with the mme flags on top
  // The seed tool's defaults that mme filled in (the report names them): ETP = 1 for the
  // seed-style flags (Megatron-LM launch lines keep ETP = TP), and the GPU count when
  // --num-gpus is not given (8, or the smallest count the layout allows).
  bool etp_defaulted = false;
  bool gpus_defaulted = false;
  std::string launch_gpus_unknown;  // why the launcher's GPU count is not known ("" if it is or is not said)
  std::string launch_gpus_unsaid;   // where the launch that says no GPU count is ("" if it says one)
  std::string launch_gpus_from;     // how the launch says its GPU count ("torchrun --nproc_per_node 8 x --nnodes 1")
  // What reading the launch assumed (defaults of unset variables) and the Megatron-LM flags with
  // a memory effect mme does not model, one line each, for the report's assumptions; and what
  // may change the estimate (flags mme does not know the effect of): warnings, also in the JSON
  // document's `warnings` (check_launch_script).
  std::vector<std::string> assumptions;
  std::vector<std::string> warnings;
};

// Where the model and the setup come from, and which wins:
//   the model: MODEL, or Megatron-LM flags (--megatron-args or --megatron-args-file, not both),
//     or a spec file's model section (--config); exactly one (UsageError: two of them, or none
//     where the command needs a model; ConfigError: a spec without a model section and no MODEL);
//   the setup: the launch flags' or the spec's setup (else the defaults), with the mme flags on
//     top; with neither, the seed tool's defaults ETP = 1 and 8 GPUs (or the smallest count the
//     layout allows) for what the flags leave unset.
// `command` names the use case in the "needs a MODEL" error; one without launch flags and spec
// files (plan, init) says so by `launch_flags_and_spec` = false, and one that has a model of its
// own when none is given (init's example) by `model_optional`.
struct InputRules {
  std::string command;
  bool launch_flags_and_spec = true;
  bool model_optional = false;
};
ReadInputs read_model_source(const ModelInput& input, const SetupFlags& flags, const InputRules& rules);
void read_request_setup(const SetupFlags& flags, ReadInputs& read);
ReadInputs read_inputs(const ModelInput& input, const SetupFlags& flags, const InputRules& rules);

// The GPU count when --num-gpus is not given: the seed's 8 when TP x PP x CP and ETP x EP x PP
// divide it, else the smallest count both divide.
std::int64_t default_world_size(const ParallelLayout& p);

// The model, the setup and the GPU (--gpu or the spec's), resolved through the registry.
struct ResolvedInputs {
  ModelSpec model;
  TrainingSetup setup;
  const HardwareProfile* gpu = nullptr;
  // What resolving the inputs assumed (a vocabulary taken from --tokenizer-model's config);
  // run_estimator adds them to the estimate's assumptions.
  std::vector<std::string> assumptions;
};
// The request's model through the registry: the launch flags (with --tokenizer-model's
// vocabulary, whose assumption goes to `assumptions`), MODEL, or the spec's model section.
ModelSpec load_request_model(const ReadInputs& read, const Registry& registry, const SourceOptions& sources,
                             std::vector<std::string>& assumptions);
// --gpu (or the spec's infrastructure.gpu) through the registry (find_gpu).
const HardwareProfile* request_gpu(const ReadInputs& read, const std::optional<std::string>& gpu,
                                   const Registry& registry);
ResolvedInputs resolve_inputs(const ReadInputs& read, const std::optional<std::string>& gpu, const Registry& registry,
                              const SourceOptions& sources);
// Runs the engine (the GPU's architecture for the workspaces); layout errors of a spec name the file.
Estimate run_estimator(const ReadInputs& read, const ResolvedInputs& inputs, const Registry& registry,
                       EstimateOptions options);

// Every GPU profile, smallest memory first (stable: the registry's order among equals).
std::vector<const HardwareProfile*> profiles_by_memory(const Registry& registry);

// The report's notes on the defaults of `read` (EstimateResult::etp_note, gpus_note).
void default_notes(const ReadInputs& read, const ModelSpec& model, const TrainingSetup& setup, EstimateResult& out);

// Lists in flags: "1,2,4" -> {"1", "2", "4"} with the spaces around each item trimmed.
std::vector<std::string> split_list(const std::string& text);

}  // namespace mme::commands::detail
