// mme estimate: the flags become a commands::EstimateRequest, the command layer estimates
// (mme/commands/estimate.hpp), and this file renders the result: the text report, the JSON
// document, the module tree, the resolved spec or the Megatron-LM launch flags.
#include <iostream>

#include <fmt/core.h>

#include <mme/commands/documents.hpp>
#include <mme/commands/estimate.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/report/render_estimate.hpp>
#include <mme/sdk/error.hpp>
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

void estimate_options(po::options_description& visible, po::options_description& hidden) {
  build_options(visible, hidden);
}

po::variables_map parse_estimate_args(const std::string& command, const std::vector<std::string>& args) {
  po::positional_options_description pos;
  pos.add("model", 1);
  po::options_description visible("Options"), hidden;
  build_options(visible, hidden);
  return parse(command, args, visible, hidden, pos);
}

commands::EstimateRequest estimate_request(const po::variables_map& vm) {
  commands::EstimateRequest r;
  r.input = model_input(vm, model_argument(vm));
  r.setup = setup_flags(vm);
  r.gpu = flag_text(vm, "gpu");
  if (const auto v = flag_text(vm, "headroom")) r.fit.headroom = commands::parse_headroom(*v);
  if (const auto v = flag_text(vm, "fit-on")) r.fit.on_bound = commands::parse_fit_on(*v);
  if (const auto v = flag_text(vm, "overhead-per-gpu")) r.fit.reserved = commands::parse_overhead_per_gpu(*v);
  return r;
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
  const auto vm = parse_estimate_args("estimate", args);
  const CommonSettings common = read_common(vm);
  commands::EstimateRequest request = estimate_request(vm);
  const bool json = switch_on(vm, "json"), breakdown = switch_on(vm, "breakdown");
  const bool dump_config = switch_on(vm, "dump-config"), print_megatron = switch_on(vm, "print-megatron-args");
  if (dump_config && (vm.count("html") || vm.count("svg")))
    throw UsageError("--dump-config prints the spec instead of the report; drop --html / --svg");
  if (print_megatron && (dump_config || vm.count("html") || vm.count("svg") || breakdown))
    throw UsageError(
        "--print-megatron-args prints the launch flags instead of the report; drop --dump-config, --html, --svg and "
        "--breakdown");
  if (breakdown && json)
    throw UsageError(
        "--breakdown is a text view; the JSON document has its figures (stages[].components, layer_kinds)");
  request.html = flag_text(vm, "html");
  request.svg = flag_text(vm, "svg");
  // The per-layer breakdown: the verbose report and the JSON document show it.
  request.layer_breakdown = switch_on(vm, "verbose") || json || breakdown;
  // The resolved spec and the launch flags replace the report: no fit is judged.
  request.judge = !dump_config && !print_megatron;

  const commands::EstimateResult r = commands::estimate(request, make_context(vm, common));
  if (print_megatron) {
    const std::vector<std::string> flags = megatron_launch_args(r.model, r.estimate.setup, *r.registry);
    std::cout << (json ? json_text(nlohmann::json(flags), 2) + "\n" : megatron_args_file_text(flags));
    return 0;
  }
  if (dump_config) {
    std::cout << commands::resolved_spec_text(r, json);
    return 0;
  }
  if (json) {
    std::cout << json_text(commands::estimate_document(r), 2) << "\n";
    return 0;
  }
  RenderOptions ro;
  ro.etp_note = r.etp_note;
  ro.gpus_note = r.gpus_note;
  for (const auto& st : r.next_steps) ro.next_steps.push_back(next_step_text(st, r.fit.on_bound));
  ro.verbose = switch_on(vm, "verbose");
  ro.colour = colour_allowed();
  ro.bars = stdout_is_tty();
  ro.chosen_gpu = r.gpu;
  render_text(std::cout, r.model, r.estimate, r.fits, ro);
  if (breakdown) render_module_tree(std::cout, r.model, r.estimate);
  return 0;
}

po::options_description options_estimate() { return visible_options(); }

}  // namespace mme::cli
