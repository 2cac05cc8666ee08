#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/inputs/gpu_lookup.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/inputs/spec_file.hpp>
#include <mme/report/next_steps.hpp>
#include <mme/report/render_estimate.hpp>
#include <mme/report/render_html.hpp>
#include <mme/report/render_svg.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/units.hpp>

#include "command.hpp"
#include "context.hpp"
#include "estimate_inputs.hpp"
#include "estimate_options.hpp"

namespace mme::cli {

namespace {

// Builds the visible options and the hidden ones (MODEL, Megatron-LM alias spellings) in one
// pass: the option tables are a noticeable share of a run's start-up.
void build_options(po::options_description& d, po::options_description& hidden) {
  d.add_options()("json", po::bool_switch(), "one JSON document on stdout (schema_version 1, docs/cli.md)")(
      "verbose", po::bool_switch(), "per-stage components, pipeline chunks and the assumptions made")(
      "breakdown", po::bool_switch(),
      "after the report, the module tree of each pipeline stage: memory by category, block and term, and the "
      "layers of each kind with their parameters and activations (the Hugging Face Space's \"Raw\" view)")(
      "fit-on", choice_value({"bound", "estimate"})->value_name("bound|estimate"),
      "judge the fit on the upper bound (default) or on the point estimate")(
      "headroom", po::value<std::string>(),
      "share of GPU memory kept free for allocator fragmentation: a fraction (0.05) or a percentage (5%); default 5%")(
      "overhead-per-gpu", po::value<std::string>()->value_name("GIB"),
      "GiB each GPU keeps for the CUDA context and NCCL, instead of the GPU profile's reserve (`mme hardware`); "
      "with --headroom 0 the seed's \"< 80 GB\" rule is --overhead-per-gpu 0")(
      "html", file_value(),
      "also write an HTML report to FILE: the per-stage chart, the configuration and the per-component table")(
      "svg", file_value(), "also write the per-stage chart alone to FILE, as SVG")(
      "dump-config", po::bool_switch(),
      "print the resolved spec (YAML; JSON with --json) instead of the report; nothing is estimated")(
      "print-megatron-args", po::bool_switch(),
      "print the Megatron-LM launch flags of this model and setup (one argument file for --megatron-args-file; a "
      "JSON array with --json) instead of the report, once the layout is checked");
  add_estimate_input_options(d, hidden);
  add_hardware_file_option(d);
  d.add(common_options());
  hidden.add_options()("model", po::value<std::string>(), "");
}

po::options_description visible_options() {
  po::options_description d("Options"), hidden;
  build_options(d, hidden);
  return d;
}

}  // namespace

void add_estimate_input_options(po::options_description& d, po::options_description& hidden) {
  d.add_options()("gpu", po::value<std::string>(),
                  "judge the fit on this GPU only (name or alias, see `mme hardware`)")(
      "revision", po::value<std::string>(), "hub revision to download (default main)")(
      "megatron-args", po::value<std::string>(),
      "the model and layout as Megatron-LM flags, e.g. \"--num-layers 32 --hidden-size 4096 ...\" (MODEL not needed)")(
      "megatron-args-file", file_value(),
      "a launch script or argument file: read without running it (docs/cli.md, \"Launch scripts\"): its variables, "
      "arrays, conditionals and launcher (torchrun, srun, ...) decide the flags of pretrain_gpt.py and the GPU count")(
      "set", po::value<std::vector<std::string>>()->composing()->value_name("NAME=VALUE"),
      "a variable of the environment the launch script starts with (repeatable)")(
      "script-arg", po::value<std::vector<std::string>>()->composing()->value_name("VALUE"),
      "the launch script's next positional argument, $1, $2, ... (repeatable)")(
      "script-source", files_value(),
      "a file the launch script may `source` (repeatable); without it a `source` line is an error")(
      "extra-megatron-flag", po::value<std::vector<std::string>>()->composing()->value_name("NAME"),
      "a flag the entry script adds to Megatron-LM's parser: accepted, with a warning (repeatable)")(
      "assume-gpt-entry", po::bool_switch(),
      "an entry script mme does not know builds its model as pretrain_gpt.py does")(
      "config", file_value(),
      "a spec file, YAML or JSON (docs/spec-files.md): the model and the setup; flags given here override it");
  add_setup_options(d, hidden);
}

// Megatron-LM's HuggingFaceTokenizer takes the vocabulary from the tokenizer that
// --tokenizer-model names. When that is a bundled model, a hub id in the Hugging Face cache or a
// local folder with a config.json (never a download), its vocab_size stands in for
// --vocab-size, and the assumption says so; otherwise the adapter's warning and GPT-2's size.
MegatronArgs with_tokenizer_vocabulary(const MegatronArgs& args, std::vector<std::string>& assumptions) {
  const auto tokenizer = args.value("tokenizer-model");
  if (args.value("tokenizer-type") != "HuggingFaceTokenizer" || args.has("vocab-size") || !tokenizer ||
      tokenizer->empty())
    return args;
  SourceOptions offline;
  offline.allow_network = false;
  ResolvedModel resolved;
  try {
    resolved = resolve_model(*tokenizer, offline);
  } catch (const Error& e) {
    spdlog::debug("--tokenizer-model {}: no config.json to take the vocabulary from ({})", *tokenizer, e.what());
    return args;
  }
  const auto it = resolved.config.is_object() ? resolved.config.find("vocab_size") : resolved.config.end();
  if (it == resolved.config.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0 ||
      it->get<std::int64_t>() > (std::int64_t{1} << 32))
    return args;
  const std::int64_t vocab = it->get<std::int64_t>();
  MegatronArgs out = args;
  out.set("vocab-size", {std::to_string(vocab)});
  assumptions.push_back(printable(
      fmt::format("vocabulary {} from the config.json of --tokenizer-model {} ({}), not GPT-2's 50257: Megatron-LM's "
                  "HuggingFaceTokenizer counts the tokenizer's entries, which can be fewer than the config's padded "
                  "vocab_size (--vocab-size in the launch line sets it)",
                  vocab, *tokenizer, resolved.path.string())));
  return out;
}

std::optional<std::string> model_argument(const po::variables_map& vm) {
  return vm.count("model") ? std::optional<std::string>(vm["model"].as<std::string>()) : std::nullopt;
}

// The launch-script options (--set, --script-arg, --script-source, --extra-megatron-flag,
// --assume-gpt-entry) as the reader takes them.
LaunchScriptOptions launch_script_options(const po::variables_map& vm) {
  LaunchScriptOptions o;
  if (vm.count("set"))
    for (const auto& v : vm["set"].as<std::vector<std::string>>()) {
      const auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0) throw UsageError(fmt::format("--set '{}': expected NAME=VALUE", v));
      o.variables.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    }
  if (vm.count("script-arg")) o.script_args = vm["script-arg"].as<std::vector<std::string>>();
  if (vm.count("script-source"))
    for (const auto& f : vm["script-source"].as<std::vector<std::string>>()) o.sources.emplace_back(f);
  if (vm.count("extra-megatron-flag"))
    for (auto f : vm["extra-megatron-flag"].as<std::vector<std::string>>())
      o.extra_flags.push_back(f.rfind("--", 0) == 0 ? f.substr(2) : f);
  o.assume_gpt_entry = vm.count("assume-gpt-entry") && vm["assume-gpt-entry"].as<bool>();
  return o;
}

EstimateRequest read_model_source(const po::variables_map& vm, const std::optional<std::string>& model,
                                  const InputRules& rules) {
  EstimateRequest r;
  r.model_name = model;
  auto& megatron = r.megatron;
  if (vm.count("megatron-args") && vm.count("megatron-args-file"))
    throw UsageError("give --megatron-args or --megatron-args-file, not both");
  const LaunchScriptOptions script = launch_script_options(vm);
  std::optional<std::string> text;
  if (vm.count("megatron-args")) {
    r.megatron_source = "--megatron-args";
    text = vm["megatron-args"].as<std::string>();
  } else if (vm.count("megatron-args-file")) {
    r.megatron_source = vm["megatron-args-file"].as<std::string>();
    // Regular files only, with a size cap, like config.json: a launch script is a few KiB.
    text = read_text_file(r.megatron_source, 1u << 20, "a Megatron-LM argument file");
  } else {
    for (const char* f : {"set", "script-arg", "script-source", "extra-megatron-flag"})
      if (vm.count(f))
        throw UsageError(fmt::format("--{} applies to a launch script (--megatron-args-file, --megatron-args)", f));
    if (script.assume_gpt_entry)
      throw UsageError("--assume-gpt-entry applies to a launch script (--megatron-args-file, --megatron-args)");
  }
  if (text && model) throw UsageError("give either a MODEL or Megatron-LM flags (--megatron-args), not both");
  if (text) {
    // The static reader of the script, then its checks: the entry script, Megatron-LM's flags,
    // the values mme reads; the other flags sorted into silent, not modelled (assumptions) and
    // unknown (a warning).
    LaunchScript launch = read_launch_script(*text, r.megatron_source, script);
    check_launch_script(launch, r.megatron_source, script);
    r.assumptions = launch.assumptions;
    r.warnings = launch.warnings;
    r.launch_gpus_unknown = launch.world_size_unknown;
    if (!launch.entry.empty() && !launch.args.world_size && launch.world_size_unknown.empty())
      r.launch_gpus_unsaid = launch.where;
    megatron = std::move(launch.args);
  }
  // A spec file: the model (unless MODEL is given) and the setup, which the flags override.
  auto& spec = r.spec;
  if (vm.count("config")) {
    if (megatron) throw UsageError("give --config or Megatron-LM flags (--megatron-args), not both");
    spec = read_spec_file(vm["config"].as<std::string>());
    if (model && spec->has_model)
      throw UsageError(
          fmt::format("the model is given twice: MODEL '{}' and the model section of {} (line {}); drop "
                      "one",
                      *model, spec->path, spec->line_of("model")));
    if (!model && !spec->has_model)
      throw ConfigError(
          fmt::format("{}: the file has no model section, and no MODEL is given on the command line", spec->path));
    for (const auto& missing : spec->missing)
      if (!setup_flag_given(vm, missing.flag)) throw ConfigError(missing.message);
  }
  if (!megatron && !spec && !model && !rules.model_optional)
    throw UsageError(fmt::format("{} needs a MODEL (a hub id, a config.json or a folder){}", rules.command,
                                 rules.launch_flags_and_spec ? ", --megatron-args or --config" : ""));
  return r;
}

void read_request_setup(const po::variables_map& vm, EstimateRequest& r) {
  const auto& megatron = r.megatron;
  const auto& spec = r.spec;
  // Megatron flags and spec files describe the layout too; explicit mme flags override them.
  r.setup = read_setup(vm, megatron ? setup_from_megatron_args(*megatron, TrainingSetup{})
                           : spec   ? spec->setup
                                    : TrainingSetup{});
  // The seed tool's defaults for its own flags (seed-configuration-guide.txt: ETP 1, 8 GPUs),
  // as spec files already have them; a Megatron-LM launch line keeps Megatron's ETP = TP.
  if (!megatron && !spec && !setup_flag_given(vm, "etp")) {
    r.setup.parallel.etp = 1;
    r.etp_defaulted = true;
  }
  const bool gpus_flag = setup_flag_given(vm, "num-gpus");
  if (megatron && !gpus_flag && !r.launch_gpus_unknown.empty())
    throw UsageError(printable(
        fmt::format("{}: the GPU count: {}; give it with --num-gpus N", r.megatron_source, r.launch_gpus_unknown)));
  if (megatron && !gpus_flag && !r.launch_gpus_unsaid.empty())
    r.warnings.push_back(fmt::format("{}: the launch does not say how many GPUs it runs on (--num-gpus N gives it)",
                                     r.launch_gpus_unsaid));
  const bool world_given = gpus_flag || spec || (megatron && megatron->world_size);
  if (!world_given) {
    r.setup.parallel.world_size = default_world_size(r.setup.parallel);
    r.gpus_defaulted = true;
  }
}

EstimateRequest read_estimate_request(const po::variables_map& vm, const std::optional<std::string>& model,
                                      const InputRules& rules) {
  EstimateRequest r = read_model_source(vm, model, rules);
  read_request_setup(vm, r);
  return r;
}

std::int64_t default_world_size(const ParallelLayout& p) {
  constexpr std::int64_t kSeedDefault = 8;
  // Sizes out of range keep the seed's 8, and resolve_setup names them.
  const std::int64_t multiple = layout_gpu_multiple(p);
  return multiple == 0 || kSeedDefault % multiple == 0 ? kSeedDefault : multiple;
}

DefaultNotes default_notes(const EstimateRequest& request, const ModelSpec& model, const TrainingSetup& setup) {
  DefaultNotes notes;
  const auto& p = setup.parallel;
  const bool moe =
      std::any_of(model.layers.begin(), model.layers.end(), [](const LayerSpec& l) { return l.mlp.num_experts > 0; });
  if (request.etp_defaulted && moe && p.tp > 1)
    notes.etp = fmt::format(
        "ETP=1 (default; a Megatron-LM launch that leaves it unset uses ETP=TP={}: pass --etp {} "
        "to match)",
        p.tp, p.tp);
  if (request.gpus_defaulted) {
    const std::int64_t dense = p.tp * p.pp * p.cp, expert = effective_etp(p) * p.ep * p.pp;
    if (p.world_size == 8)
      notes.gpus = "(default, as the seed tool; --num-gpus N to change)";
    else
      notes.gpus = fmt::format(
          "(default: the seed's 8 is not divisible by TP x PP x CP = {} and ETP x EP x PP = {}; "
          "{} is the smallest count that is; --num-gpus N to change)",
          dense, expert, p.world_size);
  }
  return notes;
}

SourceOptions source_options(const po::variables_map& vm) {
  SourceOptions sources;
  if (vm.count("revision")) sources.revision = vm["revision"].as<std::string>();
  return sources;
}

ModelSpec load_request_model(const EstimateRequest& request, const po::variables_map& vm, const Registry& registry,
                             std::vector<std::string>& assumptions) {
  const SourceOptions sources = source_options(vm);
  if (request.megatron)
    return adapt_config(with_tokenizer_vocabulary(*request.megatron, assumptions).to_config(), "Megatron-LM flags",
                        request.megatron_source, registry);
  if (request.model_name) return load_model(*request.model_name, registry, sources);
  if (request.spec) return load_spec_model(*request.spec, registry, sources);
  throw std::logic_error("load_request_model: the request names no model");
}

const HardwareProfile* request_gpu(const EstimateRequest& request, const po::variables_map& vm,
                                   const Registry& registry) {
  return find_gpu(registry, vm.count("gpu") ? std::optional<std::string>(vm["gpu"].as<std::string>()) : std::nullopt,
                  request.spec ? &*request.spec : nullptr);
}

EstimateInputs resolve_estimate_inputs(const EstimateRequest& request, const po::variables_map& vm,
                                       const Registry& registry) {
  EstimateInputs in;
  in.setup = request.setup;
  in.assumptions = request.assumptions;
  // Once per run (logging is set up by now): `mme compare` resolves the flags once per layout.
  static std::set<std::string> warned;
  for (const auto& w : request.warnings)
    if (warned.insert(w).second) spdlog::warn("{}", w);
  in.gpu = request_gpu(request, vm, registry);
  in.model = load_request_model(request, vm, registry, in.assumptions);
  // The launch's warnings are the estimate's too (the JSON document's `warnings`).
  in.model.warnings.insert(in.model.warnings.end(), request.warnings.begin(), request.warnings.end());
  if (request.spec) check_spec_layout(&*request.spec, in.model, in.setup);
  return in;
}

Estimate run_estimator(const EstimateRequest& request, const EstimateInputs& inputs, const Registry& registry,
                       EstimateOptions options) {
  const Estimator estimator(inputs.model, registry);
  if (inputs.gpu) options.compute_capability = inputs.gpu->compute_capability;
  try {
    Estimate est = estimator.run(inputs.setup, options);
    if (options.components)
      est.assumptions.insert(est.assumptions.end(), inputs.assumptions.begin(), inputs.assumptions.end());
    return est;
  } catch (const LayoutError& e) {
    if (!request.spec) throw;
    throw LayoutError(fmt::format("{}: {}", request.spec->path, e.what()));
  }
}

ArgsEstimate estimate_from_args(const std::vector<std::string>& args, const Registry& registry) {
  po::positional_options_description pos;
  pos.add("model", 1);
  po::options_description visible("Options"), hidden;
  build_options(visible, hidden);
  const auto vm = parse("estimate", args, visible, hidden, pos);
  for (const char* refused : {"html", "svg", "hardware-file", "plugin-dir"})
    if (vm.count(refused) && !vm[refused].defaulted())
      throw UsageError(fmt::format("--{} is not allowed here (give it to `mme validate` itself, or drop it)", refused));
  for (const char* refused : {"dump-config", "print-megatron-args"})
    if (vm[refused].as<bool>())
      throw UsageError(fmt::format("--{} is not allowed here: it replaces the estimate", refused));
  if (vm.count("headroom")) (void)parse_headroom(vm["headroom"].as<std::string>());
  const EstimateRequest request = read_estimate_request(vm, model_argument(vm), "estimate");
  EstimateInputs inputs = resolve_estimate_inputs(request, vm, registry);
  EstimateOptions eo;
  eo.components = false;
  ArgsEstimate out{inputs.model, run_estimator(request, inputs, registry, eo)};
  return out;
}

po::variables_map parse_estimate_args(const std::string& command, const std::vector<std::string>& args) {
  po::positional_options_description pos;
  pos.add("model", 1);
  po::options_description visible("Options"), hidden;
  build_options(visible, hidden);
  return parse(command, args, visible, hidden, pos);
}

CompareEstimate estimate_for_compare(const std::vector<std::string>& args, const Registry& registry) {
  const auto vm = parse_estimate_args("compare", args);
  for (const char* refused : {"html", "svg"})
    if (vm.count(refused))
      throw UsageError(
          fmt::format("--{} is not available in compare (give it to `mme estimate` with one layout)", refused));
  for (const char* refused : {"dump-config", "print-megatron-args", "breakdown"})
    if (vm[refused].as<bool>())
      throw UsageError(
          fmt::format("--{} is not available in compare (give it to `mme estimate` with one layout)", refused));
  CompareEstimate out;
  out.headroom = vm.count("headroom") ? parse_headroom(vm["headroom"].as<std::string>()) : kHeadroomUnset;
  if (vm.count("fit-on")) {
    const std::string v = vm["fit-on"].as<std::string>();
    if (v != "bound" && v != "estimate")
      throw UsageError(fmt::format("--fit-on: unknown value '{}' (bound, estimate)", v));
    out.on_bound = v == "bound";
  }
  if (vm.count("overhead-per-gpu"))
    out.reserved = static_cast<std::int64_t>(
        std::llround(parse_double("--overhead-per-gpu", vm["overhead-per-gpu"].as<std::string>(), 0.0, 1024.0) *
                     static_cast<double>(kGiB)));
  const EstimateRequest request = read_estimate_request(vm, model_argument(vm), "compare");
  const EstimateInputs inputs = resolve_estimate_inputs(request, vm, registry);
  EstimateOptions eo;
  eo.components = false;
  out.estimate = run_estimator(request, inputs, registry, eo);
  out.model = inputs.model;
  if (inputs.gpu) {
    out.judged.push_back(inputs.gpu);
  } else {
    for (const auto& h : registry.hardware()) out.judged.push_back(h.object.get());
    std::stable_sort(out.judged.begin(), out.judged.end(),
                     [](const auto* a, const auto* b) { return a->memory_bytes < b->memory_bytes; });
  }
  return out;
}

void help_estimate(std::ostream& out) {
  out << "Usage: mme estimate MODEL [options]\n\n"
         "Estimates the memory each GPU needs to train MODEL with Megatron-LM under the given\n"
         "layout, per pipeline stage, and whether the peak stage fits the known GPUs.\n"
         "MODEL is a hub id (org/name), a config.json, a folder holding one, or a bundled model\n"
         "(`mme models`). Megatron-LM's long flag names are accepted as aliases\n"
         "(--tensor-model-parallel-size, --decoder-last-pipeline-num-layers, ...).\n\n"
      << visible_options()
      << "\nExample:\n  mme estimate deepseek-ai/DeepSeek-V3 --tp 4 --pp 4 --ep 8 --num-gpus 128 \\\n"
         "      --num-layers-in-last-pipeline-stage 16\n";
}

int run_estimate(const std::vector<std::string>& args) {
  po::positional_options_description pos;
  pos.add("model", 1);
  po::options_description visible("Options"), hidden;
  build_options(visible, hidden);
  const auto vm = parse("estimate", args, visible, hidden, pos);
  const CommonSettings common = read_common(vm);
  const EstimateRequest request = read_estimate_request(vm, model_argument(vm), "estimate");
  const auto& spec = request.spec;
  const bool dump_config = vm["dump-config"].as<bool>();
  if (dump_config && (vm.count("html") || vm.count("svg")))
    throw UsageError("--dump-config prints the spec instead of the report; drop --html / --svg");
  const bool print_megatron = vm["print-megatron-args"].as<bool>();
  if (print_megatron && (dump_config || vm.count("html") || vm.count("svg") || vm["breakdown"].as<bool>()))
    throw UsageError(
        "--print-megatron-args prints the launch flags instead of the report; drop --dump-config, --html, --svg and "
        "--breakdown");
  double headroom = kHeadroomUnset;  // neither --headroom nor --overhead-per-gpu: the device rule (fit.hpp)
  if (vm.count("headroom")) headroom = parse_headroom(vm["headroom"].as<std::string>());
  // The pictures: an unwritable path fails now, before any work; the files appear whole at the end.
  std::optional<OutputFile> html_file, svg_file;
  if (vm.count("html")) html_file.emplace(vm["html"].as<std::string>(), "--html");
  if (vm.count("svg")) svg_file.emplace(vm["svg"].as<std::string>(), "--svg");
  // By identity, not by spelling: './x.html' and 'x.html' (or a symlink to it) are one file.
  if (html_file && svg_file && html_file->same_file(*svg_file)) throw UsageError("--html and --svg name the same file");

  Registry registry;
  use_hardware_files(vm);
  load_registry(registry, common);
  const EstimateInputs inputs = resolve_estimate_inputs(request, vm, registry);
  const ModelSpec& model = inputs.model;
  const HardwareProfile* gpu = inputs.gpu;

  EstimateOptions eo;
  // The per-layer breakdown: the verbose report and the JSON document show it.
  const bool breakdown = vm["breakdown"].as<bool>();
  if (breakdown && vm["json"].as<bool>())
    throw UsageError(
        "--breakdown is a text view; the JSON document has its figures (stages[].components, layer_kinds)");
  eo.layer_breakdown = vm["verbose"].as<bool>() || vm["json"].as<bool>() || breakdown;
  const Estimate est = [&] {
    try {
      return run_estimator(request, inputs, registry, eo);
    } catch (const LayoutError& e) {
      // A layout Megatron refuses: the message names the values that work; `mme plan` finds the rest.
      if (!request.model_name) throw;
      throw LayoutError(fmt::format("{} (`mme plan {} --num-gpus {}` lists every layout that works)", e.what(),
                                    shell_quote(*request.model_name), inputs.setup.parallel.world_size));
    }
  }();
  // Warnings only for a layout that is valid: bad input stays one error line.
  if (setup_flag_given(vm, "recompute-num-layers") && est.setup.recompute.granularity != RecomputeGranularity::kFull)
    spdlog::warn("--recompute-num-layers {} changes nothing without --recompute-granularity full",
                 est.setup.recompute.num_layers);
  // A learned position table refuses longer sequences (validate_setup); rotary models run, but
  // beyond the positions the model was trained on.
  if (model.position_embedding != PositionEmbedding::kLearnedAbsolute && model.max_position_embeddings > 0 &&
      est.setup.seq_length > model.max_position_embeddings)
    spdlog::warn(
        "--seq-length {} is beyond the model's max_position_embeddings {}: the memory is estimated, but the "
        "model was not trained on such sequences",
        est.setup.seq_length, model.max_position_embeddings);
  // In the text report only: the JSON document's setup holds the values, and a spec file that
  // spells them out gives the same document.
  const DefaultNotes notes = default_notes(request, model, est.setup);

  if (print_megatron) {
    const std::vector<std::string> flags = megatron_launch_args(model, est.setup, registry);
    std::cout << (vm["json"].as<bool>() ? json_text(nlohmann::json(flags), 2) + "\n" : megatron_args_file_text(flags));
    return 0;
  }

  if (dump_config) {
    // The spec as estimated: written only if it reads back (the guide's constraints hold).
    try {
      check_spec_layout(nullptr, model, est.setup);
    } catch (const LayoutError& e) {
      throw LayoutError(fmt::format("--dump-config: the resolved spec breaks a rule of spec files: {}", e.what()));
    }
    SpecWriteOptions wo;
    wo.header = {"mme spec file (docs/spec-files.md), resolved by `mme estimate --dump-config`: every field after",
                 "defaults and command-line flags. `mme estimate --config FILE` gives the same estimate."};
    if (gpu) wo.gpu = gpu->name;
    wo.origin = spec ? &*spec : nullptr;
    std::cout << (vm["json"].as<bool>() ? write_spec_json(model, est.setup, registry, wo)
                                        : write_spec_yaml(model, est.setup, registry, wo));
    return 0;
  }

  bool on_bound = true;
  if (vm.count("fit-on")) {
    const std::string v = vm["fit-on"].as<std::string>();
    if (v != "bound" && v != "estimate")
      throw UsageError(fmt::format("--fit-on: unknown value '{}' (bound, estimate)", v));
    on_bound = v == "bound";
  }
  std::int64_t reserved = -1;  // the profiles' own reserve
  if (vm.count("overhead-per-gpu"))
    reserved = static_cast<std::int64_t>(
        std::llround(parse_double("--overhead-per-gpu", vm["overhead-per-gpu"].as<std::string>(), 0.0, 1024.0) *
                     static_cast<double>(kGiB)));
  std::vector<const HardwareProfile*> judged;
  if (gpu) {
    judged.push_back(gpu);
  } else {
    for (const auto& h : registry.hardware()) judged.push_back(h.object.get());
    std::stable_sort(judged.begin(), judged.end(),
                     [](const auto* a, const auto* b) { return a->memory_bytes < b->memory_bytes; });
  }
  std::vector<FitVerdict> fits;
  for (const auto* h : judged) fits.push_back(judge_fit(est, *h, headroom, on_bound, reserved));
  std::vector<NextStep> steps;
  if (!fits.empty() && std::none_of(fits.begin(), fits.end(), [](const FitVerdict& f) { return f.fits; }))
    steps = next_steps(inputs.model, inputs.setup, inputs.gpu, request.model_name.value_or(inputs.model.name), registry,
                       judged, headroom, on_bound, reserved);

  if (html_file) {
    HtmlOptions ho;
    ho.chosen_gpu = gpu;
    ho.headroom_fraction = headroom < 0 ? kDefaultHeadroom : headroom;
    html_file->commit(render_estimate_html(model, est, fits, ho));
  }
  if (svg_file) {
    SvgOptions so;
    so.chosen_gpu = gpu;
    svg_file->commit(render_estimate_svg(model, est, fits, so));
  }

  if (vm["json"].as<bool>()) {
    nlohmann::json j = estimate_to_json(model, est, fits);
    nlohmann::json sj = nlohmann::json::array();
    for (const auto& st : steps) sj.push_back(next_step_json(st));
    j["next_steps"] = sj;
    std::cout << json_text(j, 2) << "\n";
    return 0;
  }
  RenderOptions ro;
  ro.etp_note = notes.etp;
  ro.gpus_note = notes.gpus;
  for (const auto& st : steps) ro.next_steps.push_back(next_step_text(st, on_bound));
  ro.verbose = vm["verbose"].as<bool>();
  ro.colour = colour_allowed();
  ro.bars = stdout_is_tty();
  ro.chosen_gpu = gpu;
  render_text(std::cout, model, est, fits, ro);
  if (breakdown) render_module_tree(std::cout, model, est);
  return 0;
}

po::options_description options_estimate() { return visible_options(); }

}  // namespace mme::cli
