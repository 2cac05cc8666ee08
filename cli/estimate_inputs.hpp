// What `mme estimate` reads to know what to estimate (MODEL, --megatron-args(-file), --config,
// --revision, --gpu and the layout flags) and how it turns them into an estimate. `estimate`
// and `validate` (its real-runs rows and --from-log) share this, so a row's mme_args and a
// log's launch flags mean exactly what they mean to `mme estimate`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <mme/engine/estimator.hpp>
#include <mme/engine/registry.hpp>
#include <mme/inputs/launch_script.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/model_source.hpp>
#include <mme/inputs/spec_file.hpp>
#include <mme/report/next_steps.hpp>
#include <mme/sdk/model_spec.hpp>
#include <mme/sdk/training_setup.hpp>
#include <mme/validate/validation.hpp>

#include "options.hpp"

namespace mme::cli {

// --gpu, --revision, --megatron-args, --megatron-args-file, --config and the layout flags
// (visible); the layout flags' Megatron-LM alias spellings (hidden).
void add_estimate_input_options(po::options_description& visible, po::options_description& hidden);

// What to estimate, as the flags say, read before any plugin is loaded: the flags' own errors
// come first.
struct EstimateRequest {
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
  // What reading the launch assumed (defaults of unset variables) and the Megatron-LM flags with
  // a memory effect mme does not model, one line each, for the report's assumptions; and what
  // may change the estimate (flags mme does not know the effect of): warnings, also in the JSON
  // document's `warnings` (check_launch_script).
  std::vector<std::string> assumptions;
  std::vector<std::string> warnings;
};
// The GPU count when --num-gpus is not given: the seed's 8 when TP x PP x CP and
// ETP x EP x PP divide it, else the smallest count both divide.
std::int64_t default_world_size(const ParallelLayout& p);
// layout_gpu_multiple (the smallest GPU count the layout allows): mme/report/next_steps.hpp.
// The report's words for the defaults above: `etp` a line of the Parallelism block
// ("ETP=1 (default; ...)"), empty when the default changes nothing (no experts, or TP 1);
// `gpus` what follows "Total GPUs: N".
struct DefaultNotes {
  std::string etp;
  std::string gpus;
};
DefaultNotes default_notes(const EstimateRequest& request, const ModelSpec& model, const TrainingSetup& setup);
// Where the model and the setup come from, for every command that takes a model (estimate,
// compare, validate --from-log, plan, init), and which wins:
//   the model: MODEL, or Megatron-LM flags (--megatron-args or --megatron-args-file, not both),
//     or a spec file's model section (--config); exactly one (UsageError: two of them, or none
//     where the command needs a model; ConfigError: a spec without a model section and no MODEL);
//   the setup: the launch flags' or the spec's setup (else the defaults), with the mme flags on
//     top; with neither, the seed tool's defaults ETP = 1 and 8 GPUs (or the smallest count the
//     layout allows) for what the flags leave unset.
// `command` names the subcommand in the "needs a MODEL" error; a command without
// --megatron-args(-file) and --config (plan, init) says so by `launch_flags_and_spec` = false,
// and one that has a model of its own when none is given (init's example) by `model_optional`.
struct InputRules {
  std::string command;
  bool launch_flags_and_spec = true;
  bool model_optional = false;
};
// The two halves, for a command that reads other flags in between (plan): the model's source
// (and the launch flags' or spec's own checks), then the setup.
EstimateRequest read_model_source(const po::variables_map& vm, const std::optional<std::string>& model,
                                  const InputRules& rules);
void read_request_setup(const po::variables_map& vm, EstimateRequest& request);
EstimateRequest read_estimate_request(const po::variables_map& vm, const std::optional<std::string>& model,
                                      const InputRules& rules);
inline EstimateRequest read_estimate_request(const po::variables_map& vm, const std::optional<std::string>& model,
                                             const std::string& command) {
  return read_estimate_request(vm, model, InputRules{command});
}
// MODEL as the positional argument gives it (nullopt when absent).
std::optional<std::string> model_argument(const po::variables_map& vm);

// --revision as the model sources take it.
SourceOptions source_options(const po::variables_map& vm);
// The request's model through the registry: the launch flags (with --tokenizer-model's
// vocabulary, whose assumption goes to `assumptions`), MODEL, or the spec's model section.
// A request without any (init without MODEL) is a caller's bug: std::logic_error.
ModelSpec load_request_model(const EstimateRequest& request, const po::variables_map& vm, const Registry& registry,
                             std::vector<std::string>& assumptions);
// --gpu (or the spec's infrastructure.gpu) through the registry: find_gpu, mme/inputs/gpu_lookup.hpp.
const HardwareProfile* request_gpu(const EstimateRequest& request, const po::variables_map& vm,
                                   const Registry& registry);

// The model, the setup and the GPU (--gpu or the spec's), resolved through the registry.
struct EstimateInputs {
  ModelSpec model;
  TrainingSetup setup;
  const HardwareProfile* gpu = nullptr;
  // What resolving the inputs assumed (a vocabulary taken from --tokenizer-model's config);
  // run_estimator adds them to the estimate's assumptions.
  std::vector<std::string> assumptions;
};
EstimateInputs resolve_estimate_inputs(const EstimateRequest& request, const po::variables_map& vm,
                                       const Registry& registry);

// Runs the engine (the GPU's architecture for the workspaces); layout errors of a spec name the file.
Estimate run_estimator(const EstimateRequest& request, const EstimateInputs& inputs, const Registry& registry,
                       EstimateOptions options);

// `mme estimate ARGS` up to the estimate, with an already loaded registry: the same option
// table and the same resolution. Output flags (--json, --verbose, --headroom) are accepted and
// ignored; flags that load plugins or hardware files, write files (--html, --svg) or replace
// the estimate (--dump-config) are refused (UsageError).
ArgsEstimate estimate_from_args(const std::vector<std::string>& args, const Registry& registry);

// `mme compare`: one layout's `mme estimate ARGS` and what its fit is judged with. The option
// table is estimate's; --html, --svg, --dump-config and --breakdown are refused (UsageError),
// --json, --verbose, --plugin-dir and --hardware-file are left to the caller.
struct CompareEstimate {
  ModelSpec model;
  Estimate estimate;
  std::vector<const HardwareProfile*> judged;  // --gpu's, else every profile, smallest first
  double headroom = 0;
  bool on_bound = true;
  std::int64_t reserved = -1;  // --overhead-per-gpu in bytes; -1: the profiles' own
};
po::variables_map parse_estimate_args(const std::string& command, const std::vector<std::string>& args);
CompareEstimate estimate_for_compare(const std::vector<std::string>& args, const Registry& registry);

}  // namespace mme::cli
