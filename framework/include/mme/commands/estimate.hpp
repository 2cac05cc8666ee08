// The estimate use case: `mme estimate`, the C entry point's "estimate", Python's mme.estimate,
// the browser page's recompute, and each row of `mme validate` and `mme compare`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <mme/commands/context.hpp>
#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/inputs/spec_file.hpp>
#include <mme/report/next_steps.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::commands {

// The setup flags of a request, by mme flag name without "--" (a knob's flag, alias, off switch
// or value switch of the setup schema): value flags as given (text), the switches that are on, and
// the repeatable flags' values. The setup schema reads them (setup_from_mme_flags), so a value
// means what it means on the command line and is refused with the same message.
class SetupFlags final : public MmeFlags {
 public:
  void set(std::string name, std::string value);  // a value flag (a second set replaces the first)
  void set_switch(std::string name);              // a switch, on
  void add(std::string name, std::string value);  // a repeatable flag (--env)
  void erase(std::string_view name);              // whatever `name` holds
  // A value flag given under its name or one of its knob's aliases (`name` is the flag: "tp").
  bool given(std::string_view name) const;
  bool has(std::string_view name) const;  // anything held under exactly this name
  bool empty() const { return values_.empty() && switches_.empty() && lists_.empty(); }
  // The names held, sorted (value flags, switches, repeatable flags).
  std::vector<std::string> names() const;

  std::optional<std::string> value(std::string_view name) const override;
  bool on(std::string_view name) const override;
  std::vector<std::string> values(std::string_view name) const override;

 private:
  std::map<std::string, std::string, std::less<>> values_;
  std::set<std::string, std::less<>> switches_;
  std::map<std::string, std::vector<std::string>, std::less<>> lists_;
};

// How a launch script (--megatron-args-file, --megatron-args) is read without running it
// (docs/cli.md, "Launch scripts"; mme/inputs/launch_script.hpp). Each applies to a launch script
// only: given without one, a UsageError naming the flag.
struct ScriptInput {
  std::vector<std::string> set;          // --set NAME=VALUE: the environment it starts with
  std::vector<std::string> args;         // --script-arg VALUE: $1, $2, ...
  std::vector<std::string> sources;      // --script-source FILE: what `source` may read
  std::vector<std::string> extra_flags;  // --extra-megatron-flag NAME: the entry script's own flags
  bool assume_gpt_entry = false;         // --assume-gpt-entry
};

// Where the model (and a base setup) comes from: exactly one of MODEL, Megatron-LM flags (text or
// a file, not both) or a spec file's model section (docs/cli.md, "Model sources").
struct ModelInput {
  std::optional<std::string> model;               // MODEL: a hub id, a config.json, a folder, a bundled model
  std::optional<std::string> megatron_args;       // --megatron-args
  std::optional<std::string> megatron_args_file;  // --megatron-args-file
  std::optional<std::string> spec_file;           // --config (its model section unless MODEL is given)
  std::string revision;                           // --revision (empty: main)
  ScriptInput script;                             // how the launch script is read
};

// How a fit is judged (--fit-on, --headroom, --overhead-per-gpu).
// Without --headroom and --overhead-per-gpu (headroom kHeadroomUnset, reserved -1): the device
// total against the capacity (fit.hpp).
struct FitRule {
  double headroom = kHeadroomUnset;
  bool on_bound = true;        // the upper bound (default) or the point estimate
  std::int64_t reserved = -1;  // bytes each GPU keeps; -1: each profile's own reserve
};
// The text forms of the three, as the flags take them; UsageError naming the flag.
double parse_headroom(const std::string& text);                // "0.05" or "5%", at most 0.9 / 90%
bool parse_fit_on(const std::string& text);                    // "bound" (true) or "estimate"
std::int64_t parse_overhead_per_gpu(const std::string& text);  // GiB in [0, 1024] -> bytes

struct EstimateRequest {
  ModelInput input;
  SetupFlags setup;
  std::optional<std::string> gpu;  // --gpu: judge the fit on this GPU only (else every profile)
  FitRule fit;
  bool components = true;        // the named components and assumptions (off: totals only)
  bool layer_breakdown = false;  // the per-layer-kind figures (the JSON document, --verbose, --breakdown)
  bool judge = true;             // the fit verdicts on the judged GPUs
  bool next_steps = true;        // with judge: when no GPU fits, the changes that would
  // `mme estimate`'s own advice: a refused layout's message names `mme plan MODEL --num-gpus N`
  // when MODEL was given, and a setup that runs but may not be meant is warned about (off for the
  // rows of compare and validate).
  bool advice = true;
  // Output files the request names, written once everything is computed; an unwritable path
  // fails before any work (UsageError naming --html / --svg).
  std::optional<std::string> html, svg;
};

// What resolving the request and running the engine gave.
struct EstimateResult {
  std::shared_ptr<const Registry> registry;  // holds the GPU profiles below and the plugins alive
  ModelSpec model;
  Estimate estimate;
  const HardwareProfile* gpu = nullptr;        // --gpu or the spec's infrastructure.gpu
  std::vector<const HardwareProfile*> judged;  // gpu, else every profile, smallest first (with judge)
  std::vector<FitVerdict> fits;                // one per judged GPU
  std::vector<cli::NextStep> next_steps;       // when none fits (with next_steps)
  FitRule fit;
  std::optional<std::string> model_name;  // MODEL as given
  std::optional<SpecFile> spec;           // the --config file read
  // The report's words for the seed's defaults mme filled in (empty when none applies): a line
  // of the Parallelism block for ETP, what follows "Total GPUs: N" for the GPU count.
  std::string etp_note, gpus_note;
};

EstimateResult estimate(const EstimateRequest& request, const Context& context);

// An EstimateResult for `mme estimate --dump-config`: the resolved spec file (YAML; JSON when
// `json`), checked to read back (LayoutError naming the rule otherwise).
std::string resolved_spec_text(const EstimateResult& result, bool json);

// `mme estimate ARGS` as words (a real-runs row's mme_args): the estimate's flags, read by the
// setup schema and the option names of `mme estimate`, into a request. Output flags (--json,
// --verbose, --breakdown, --log-level, -v, -q) are accepted and ignored; flags that load
// plugins or hardware files, write files (--html, --svg) or replace the estimate (--dump-config,
// --print-megatron-args) are refused (UsageError), as are unknown flags (with the closest name).
EstimateRequest estimate_request_from_words(const std::vector<std::string>& words);
// The option names that reader knows (for the test that it agrees with the CLI's table).
std::vector<std::string> estimate_word_options();

}  // namespace mme::commands
