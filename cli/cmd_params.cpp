// mme params: exact parameter counts of one model (the command layer's params,
// mme/commands/catalog.hpp), as a report or the JSON document.
#include <iostream>

#include <fmt/core.h>

#include <mme/commands/documents.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/units.hpp>

#include "command.hpp"
#include "context.hpp"

namespace mme::cli {

namespace {

po::options_description visible_options() {
  po::options_description d("Options");
  d.add_options()("json", po::bool_switch(), "one JSON document on stdout")("revision", po::value<std::string>(),
                                                                            "hub revision to download (default main)")(
      "lora-rank", po::value<std::string>(), "also count LoRA adapters of this rank (Megatron-Bridge; base frozen)")(
      "lora-target-modules", po::value<std::string>(),
      "with --lora-rank: the linears LoRA wraps (default linear_qkv,linear_proj,linear_fc1,linear_fc2)");
  d.add(common_options());
  return d;
}
}  // namespace

void help_params(std::ostream& out) {
  out << "Usage: mme params MODEL [--json]\n\n"
         "Exact parameter counts of MODEL, as the unique weights a Hugging Face checkpoint stores:\n"
         "tied embeddings once, multi-token-prediction (MTP) layers reported separately and not in\n"
         "the total, DeepSeek-V3 expert bias included. Active parameters are those one token uses:\n"
         "embeddings and output head, attention, norms, router, shared experts and the top-k\n"
         "routed experts. With --lora-rank R it also counts the LoRA adapters Megatron-Bridge adds\n"
         "(r x (in + out) per wrapped linear, per routed expert on MoE layers): the trainable parameters,\n"
         "the base being frozen.\n\n"
      << visible_options();
}

int run_params(const std::vector<std::string>& args) {
  po::options_description hidden;
  hidden.add_options()("model", po::value<std::string>(), "");
  po::positional_options_description pos;
  pos.add("model", 1);
  const auto vm = parse("params", args, visible_options(), hidden, pos);
  if (!vm.count("model")) throw UsageError("params needs a MODEL (a hub id, a config.json or a folder)");
  commands::ParamsRequest request;
  request.model = vm["model"].as<std::string>();
  request.revision = flag_text(vm, "revision").value_or("");
  request.lora_rank = flag_text(vm, "lora-rank");
  request.lora_target_modules = flag_text(vm, "lora-target-modules");
  const commands::ParamsResult r = commands::params(request, make_context(vm, read_common(vm)));
  if (switch_on(vm, "json")) {
    std::cout << json_text(commands::params_document(r), 2) << "\n";
    return 0;
  }
  const ModelSpec& model = r.model;
  const auto& pc = r.counts;
  const auto& lora = r.lora;
  const auto& lc = r.lora_counts;
  const auto& total = r.total;
  const auto& active = r.active;
  std::cout << fmt::format("Model: {} ({}, adapter {})\n", model.name, model.family, model.adapter);
  std::cout << fmt::format("Total parameters:  {:>18}  ({})\n", pc.total, format_count(pc.total));
  std::cout << fmt::format("Active parameters: {:>18}  ({})\n", pc.active, format_count(pc.active));
  if (pc.mtp > 0)
    std::cout << fmt::format("MTP parameters:    {:>18}  ({}, not in the total)\n", pc.mtp, format_count(pc.mtp));
  if (lora) {
    std::cout << fmt::format("LoRA adapters:     {:>18}  ({}, trainable: rank {} on {}; the total above is frozen)\n",
                             lc.total, format_count(lc.total), lora->rank, lora_targets_to_string(lora->targets));
    if (lc.mtp > 0)
      std::cout << fmt::format("LoRA adapters of the MTP layers: {} ({})\n", lc.mtp, format_count(lc.mtp));
  }
  std::cout << "\nBreakdown:\n";
  for (std::size_t i = 0; i < total.size(); ++i) {
    const auto& [k, v] = total[i];
    if (v == 0) continue;
    const std::int64_t a = active[i].second;
    std::cout << fmt::format("  {:<20} {:>18}  {:>10}   active {:>10}\n", k, v, format_count(v), format_count(a));
  }
  return 0;
}

po::options_description options_params() { return visible_options(); }

}  // namespace mme::cli
