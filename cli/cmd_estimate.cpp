#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>

#include <fmt/core.h>

#include <mme/error.hpp>
#include <mme/estimator.hpp>
#include <mme/fit.hpp>
#include <mme/megatron_args.hpp>
#include <mme/model_loader.hpp>
#include <mme/model_source.hpp>

#include "command.hpp"
#include "context.hpp"
#include "estimate_options.hpp"
#include "render_estimate.hpp"

namespace mme::cli {

namespace {

po::options_description visible_options() {
  po::options_description d("Options");
  po::options_description hidden;
  d.add_options()
      ("json", po::bool_switch(), "one JSON document on stdout (schema_version 1, docs/cli.md)")
      ("verbose", po::bool_switch(), "per-stage components, pipeline chunks and the assumptions made")
      ("gpu", po::value<std::string>(), "judge the fit on this GPU only (name or alias, see `mme hardware`)")
      ("headroom", po::value<std::string>(),
       "share of GPU memory kept free for allocator fragmentation: a fraction (0.05) or a percentage (5%); default 5%")
      ("revision", po::value<std::string>(), "hub revision to download (default main)")
      ("megatron-args", po::value<std::string>(),
       "the model and layout as Megatron-LM flags, e.g. \"--num-layers 32 --hidden-size 4096 ...\" (MODEL not needed)")
      ("megatron-args-file", po::value<std::string>(),
       "a file holding Megatron-LM flags (a launch script's arguments; comments and line continuations allowed)");
  add_setup_options(d, hidden);
  d.add(common_options());
  return d;
}

po::options_description hidden_options() {
  po::options_description visible, hidden;
  add_setup_options(visible, hidden);
  hidden.add_options()("model", po::value<std::string>(), "");
  return hidden;
}

  add_hardware_file_option(d);
double parse_headroom(const std::string& text) {
  std::string t = text;
  double scale = 1.0;
  if (!t.empty() && t.back() == '%') {
    t.pop_back();
    scale = 0.01;
  }
  const double v = parse_double("--headroom", t, 0.0, scale == 1.0 ? 0.9 : 90.0) * scale;
  return v;
}

}  // namespace

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
  const auto vm = parse(args, visible_options(), hidden_options(), pos);
  const CommonSettings common = read_common(vm);
  std::optional<MegatronArgs> megatron;
  std::string megatron_source;
  if (vm.count("megatron-args") && vm.count("megatron-args-file"))
    throw UsageError("give --megatron-args or --megatron-args-file, not both");
  if (vm.count("megatron-args")) {
    megatron_source = "--megatron-args";
    megatron = parse_megatron_args(vm["megatron-args"].as<std::string>(), megatron_source);
  } else if (vm.count("megatron-args-file")) {
    megatron_source = vm["megatron-args-file"].as<std::string>();
    std::ifstream in(megatron_source, std::ios::binary);
    if (!in) throw NotFoundError(fmt::format("{}: cannot open the file", megatron_source));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    megatron = parse_megatron_args(text, megatron_source);
  }
  if (megatron && vm.count("model"))
    throw UsageError("give either a MODEL or Megatron-LM flags (--megatron-args), not both");
  if (!megatron && !vm.count("model"))
    throw UsageError("estimate needs a MODEL (a hub id, a config.json or a folder) or --megatron-args");
  // Megatron flags describe the layout too; explicit mme flags override them.
  TrainingSetup setup = read_setup(vm, megatron ? setup_from_megatron_args(*megatron, TrainingSetup{}) : TrainingSetup{});
  double headroom = kDefaultHeadroom;
  if (vm.count("headroom")) headroom = parse_headroom(vm["headroom"].as<std::string>());

  Registry registry;
  load_registry(registry, common);
  const HardwareProfile* gpu = nullptr;
  if (vm.count("gpu")) {
    const std::string name = vm["gpu"].as<std::string>();
    gpu = registry.find_hardware(name);
    if (!gpu) {
      std::string known;
      for (const auto& h : registry.hardware()) known += (known.empty() ? "" : ", ") + h.object->name;
      throw UsageError(fmt::format("--gpu: unknown GPU '{}' (known: {})", name, known.empty() ? "none loaded" : known));
    }
  }
  SourceOptions sources;
  if (vm.count("revision")) sources.revision = vm["revision"].as<std::string>();
  const ModelSpec model = megatron ? adapt_config(megatron->to_config(), "Megatron-LM flags", megatron_source, registry)
                                   : load_model(vm["model"].as<std::string>(), registry, sources);

  Estimator estimator(model, registry);
  EstimateOptions eo;
  if (gpu) eo.gpu_architecture = gpu->architecture;
  const Estimate est = estimator.run(setup, eo);

  std::vector<FitVerdict> fits;
  if (gpu) {
    fits.push_back(judge_fit(est, *gpu, headroom));
  } else {
    std::vector<const HardwareProfile*> all;
    for (const auto& h : registry.hardware()) all.push_back(h.object.get());
    std::stable_sort(all.begin(), all.end(),
                     [](const auto* a, const auto* b) { return a->memory_bytes < b->memory_bytes; });
    for (const auto* h : all) fits.push_back(judge_fit(est, *h, headroom));
  }

  if (vm["json"].as<bool>()) {
    std::cout << estimate_to_json(model, est, fits).dump(2) << "\n";
    return 0;
  }
  RenderOptions ro;
  use_hardware_files(vm);
  ro.verbose = vm["verbose"].as<bool>();
  ro.colour = colour_allowed();
  ro.bars = stdout_is_tty();
  ro.chosen_gpu = gpu;
  render_text(std::cout, model, est, fits, ro);
  return 0;
}

}  // namespace mme::cli
