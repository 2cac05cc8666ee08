// `mme init [MODEL] [layout flags]`: a commented spec file to start from.
#include <iostream>

#include <mme/commands/init.hpp>

#include "command.hpp"
#include "context.hpp"
#include "estimate_options.hpp"

namespace mme::cli {

namespace {

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
  commands::InitRequest request;
  request.input = model_input(vm, model_argument(vm));
  request.setup = setup_flags(vm);
  request.gpu = flag_text(vm, "gpu");
  request.json = switch_on(vm, "json");
  std::cout << commands::init_spec(request, make_context(vm, common));
  return 0;
}

po::options_description options_init() { return visible_options(); }

}  // namespace mme::cli
