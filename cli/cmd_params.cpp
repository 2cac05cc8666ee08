#include <algorithm>
#include <iostream>
#include <optional>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <mme/engine/estimator.hpp>
#include <mme/inputs/json_schema.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/units.hpp>

#include "command.hpp"
#include "context.hpp"

namespace mme::cli {

namespace {

using Breakdown = std::vector<std::pair<std::string, std::int64_t>>;

// The breakdown with every group the issue names, in a fixed order (zero when the model has
// none, e.g. output_layer for tied embeddings), then any other group the engine reported
// (position_embedding for learned absolute positions).
Breakdown full_breakdown(const Breakdown& reported) {
  static const char* const kGroups[] = {"embedding",      "output_layer", "attention", "dense_mlp", "routed_experts",
                                        "shared_experts", "router",       "norms",     "mtp"};
  Breakdown out;
  for (const char* g : kGroups) out.emplace_back(g, 0);
  for (const auto& group : reported) {
    const auto& [k, v] = group;
    // Compares group.first: clang before 16 cannot capture the binding k in a lambda.
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == group.first; });
    if (it == out.end())
      out.emplace_back(k, v);
    else
      it->second += v;
  }
  return out;
}

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
  Registry registry;
  load_registry(registry, read_common(vm));
  SourceOptions sources;
  if (vm.count("revision")) sources.revision = vm["revision"].as<std::string>();
  const ModelSpec model = load_model(vm["model"].as<std::string>(), registry, sources);
  const Estimator estimator(model, registry);
  const auto pc = estimator.count_parameters();
  // LoRA (--lora-rank): the adapters, the only trainable parameters.
  std::optional<LoraSettings> lora;
  if (vm.count("lora-rank")) {
    lora.emplace();
    lora->rank =
        parse_knob_text(*find_knob("lora-rank"), "--lora-rank", vm["lora-rank"].as<std::string>()).get<std::int64_t>();
    if (vm.count("lora-target-modules"))
      lora->targets = parse_lora_targets(parse_knob_text(*find_knob("lora-target-modules"), "--lora-target-modules",
                                                         vm["lora-target-modules"].as<std::string>())
                                             .get<std::string>());
  } else if (vm.count("lora-target-modules")) {
    throw UsageError("--lora-target-modules needs --lora-rank");
  }
  const Estimator::LoraCount lc = lora ? estimator.count_lora_parameters(*lora) : Estimator::LoraCount{};
  const auto total = full_breakdown(pc.breakdown);
  const auto active = full_breakdown(pc.active_breakdown);
  if (vm["json"].as<bool>()) {
    nlohmann::ordered_json breakdown = nlohmann::ordered_json::object(), active_json = nlohmann::ordered_json::object();
    for (const auto& [k, v] : total) breakdown[k] = v;
    for (const auto& [k, v] : active) active_json[k] = v;
    nlohmann::ordered_json j;
    j["schema_version"] = kSchemaVersion;
    j["model"] = model.name;
    j["family"] = model.family;
    j["model_type"] = model.model_type;
    j["adapter"] = model.adapter;
    j["source"] = model.source;
    j["total_params"] = pc.total;
    j["active_params"] = pc.active;
    j["mtp_params"] = pc.mtp;
    j["breakdown"] = breakdown;
    j["active_breakdown"] = active_json;
    if (lora) {
      nlohmann::ordered_json targets = nlohmann::ordered_json::array();
      const std::string names = lora_targets_to_string(lora->targets);
      for (std::size_t at = 0; at < names.size();) {
        const std::size_t end = std::min(names.find(',', at), names.size());
        targets.push_back(names.substr(at, end - at));
        at = end + 1;
      }
      j["lora"] = {{"rank", lora->rank},
                   {"target_modules", targets},
                   {"trainable_params", lc.total},
                   {"trainable_active_params", lc.active},
                   {"mtp_trainable_params", lc.mtp},
                   {"frozen_params", pc.total}};
    }
    j["keys_read"] = model.keys_read;
    j["warnings"] = model.warnings;
    std::cout << json_text(j, 2) << "\n";
    return 0;
  }
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
