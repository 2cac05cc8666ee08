#include "mme/commands/validate.hpp"

#include <fmt/core.h>

#include <mme/sdk/error.hpp>

#include "resolve.hpp"

namespace mme::commands {

namespace {

// The first flag of the estimate's options that `run` holds, in the order `mme help validate`
// lists them (empty: none).
std::string first_run_flag(const EstimateRequest& run) {
  const ModelInput& in = run.input;
  if (run.gpu) return "gpu";
  if (!in.revision.empty()) return "revision";
  if (in.megatron_args) return "megatron-args";
  if (in.megatron_args_file) return "megatron-args-file";
  if (in.spec_file) return "config";
  const ScriptInput& s = in.script;
  if (!s.set.empty()) return "set";
  if (!s.args.empty()) return "script-arg";
  if (!s.sources.empty()) return "script-source";
  if (!s.extra_flags.empty()) return "extra-megatron-flag";
  if (s.assume_gpt_entry) return "assume-gpt-entry";
  for (const SetupKnob* k : setup_knobs_in_flag_order()) {
    for (const char* name : {k->flag, k->off_flag})
      if (name && run.setup.has(name)) return name;
    for (const auto& sw : k->switches)
      if (run.setup.has(sw.flag)) return sw.flag;
  }
  const auto names = run.setup.names();
  return names.empty() ? "" : names.front();
}

ValidateResult from_log(const ValidateRequest& request, const Context& context) {
  using namespace detail;
  const std::string log = *request.from_log;
  if (request.golden) throw UsageError("--golden filters CSV rows; it does not apply to --from-log");
  if (request.case_filter) throw UsageError("--case filters CSV rows; it does not apply to --from-log");
  ModelInput input = request.run.input;
  input.model = request.cases;
  const ReadInputs read = read_inputs(input, request.run.setup, InputRules{"validate --from-log"});
  ValidateResult out;
  out.log = log;
  out.memory = read_memory_log(log);  // before the plugins: a bad log fails fast
  const auto registry = load_registry(context);
  const ResolvedInputs inputs =
      resolve_inputs(read, request.run.gpu, *registry, source_options(context, input.revision));
  EstimateOptions eo;
  eo.components = false;
  out.estimate = run_estimator(read, inputs, *registry, eo);
  // The device model's reserved figure of each stage, where the estimate replayed the allocator.
  out.ranks =
      compare_memory_log(out.memory, out.estimate, log, [](const StageEstimate& st) -> std::optional<std::int64_t> {
        if (st.reserved_bytes > 0) return st.reserved_bytes;
        return std::nullopt;
      });
  return out;
}

}  // namespace

ValidateResult validate(const ValidateRequest& request, const Context& context) {
  const RequestLog log(context);
  if (request.from_log) return from_log(request, context);
  if (!request.cases) throw UsageError("validate needs a CSV file of measured cases, or --from-log LOG");
  // The estimate options describe the run of a log; a CSV's rows describe their own.
  if (const std::string flag = first_run_flag(request.run); !flag.empty())
    throw UsageError(fmt::format("--{} applies to --from-log; the rows of a CSV file carry their own flags", flag));
  ValidationOptions options;
  if (request.golden) options.golden_regex = *request.golden;
  if (request.case_filter) options.case_regex = *request.case_filter;
  const auto registry = load_registry(context);
  // Each real-runs row's mme_args, as `mme estimate` reads them, through this layer.
  Context rows = context;
  rows.log = nullptr;  // the lines go where this request's go (bound on this thread)
  options.estimate_args = [&rows](const std::vector<std::string>& words) {
    EstimateRequest r = estimate_request_from_words(words);
    r.components = false;
    r.judge = false;
    r.advice = false;
    EstimateResult e = estimate(r, rows);
    return ArgsEstimate{std::move(e.model), std::move(e.estimate)};
  };
  ValidateResult out;
  out.cases = run_validation(*request.cases, *registry, options);
  out.format = !out.cases.empty() ? out.cases.front().format : read_csv_table(*request.cases).format;
  return out;
}

}  // namespace mme::commands
