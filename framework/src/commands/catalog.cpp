#include "mme/commands/catalog.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include <mme/engine/plugin_loader.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/error.hpp>

namespace mme::commands {

namespace {

using Breakdown = std::vector<std::pair<std::string, std::int64_t>>;

// The breakdown with every group the report names, in a fixed order (zero when the model has
// none, e.g. output_layer for tied embeddings), then any other group the engine reported
// (position_embedding for learned absolute positions).
Breakdown full_breakdown(const Breakdown& reported) {
  static const char* const kGroups[] = {"embedding",      "output_layer", "attention", "dense_mlp", "routed_experts",
                                        "shared_experts", "router",       "norms",     "mtp"};
  Breakdown out;
  for (const char* g : kGroups) out.emplace_back(g, 0);
  for (const auto& group : reported) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == group.first; });
    if (it == out.end())
      out.emplace_back(group.first, group.second);
    else
      it->second += group.second;
  }
  return out;
}

}  // namespace

ParamsResult params(const ParamsRequest& request, const Context& context) {
  const RequestLog log(context);
  if (request.lora_target_modules && !request.lora_rank) throw UsageError("--lora-target-modules needs --lora-rank");
  const auto registry = load_registry(context);
  ParamsResult out;
  out.model = load_model(request.model, *registry, source_options(context, request.revision));
  const Estimator estimator(out.model, *registry);
  out.counts = estimator.count_parameters();
  // LoRA (--lora-rank): the adapters, the only trainable parameters.
  if (request.lora_rank) {
    out.lora.emplace();
    out.lora->rank = parse_knob_text(*find_knob("lora-rank"), "--lora-rank", *request.lora_rank).get<std::int64_t>();
    if (request.lora_target_modules)
      out.lora->targets = parse_lora_targets(
          parse_knob_text(*find_knob("lora-target-modules"), "--lora-target-modules", *request.lora_target_modules)
              .get<std::string>());
    out.lora_counts = estimator.count_lora_parameters(*out.lora);
  }
  out.total = full_breakdown(out.counts.breakdown);
  out.active = full_breakdown(out.counts.active_breakdown);
  return out;
}

std::vector<ModelEntry> models(const Context& context) {
  const RequestLog log(context);
  const auto registry = load_registry(context);
  std::vector<ModelEntry> out;
  for (const auto& b : list_bundled_models(zoo_dirs(context.environment.sources))) {
    try {
      ModelEntry e{b, adapt_config(read_config_file(b.path), b.name, b.path.string(), *registry, false), {}};
      e.counts = Estimator(e.model, *registry).count_parameters();
      out.push_back(std::move(e));
    } catch (const Error& e) {
      spdlog::warn("bundled model {}: {}", b.name, e.what());
    }
  }
  return out;
}

HardwareResult hardware(const Context& context) {
  const RequestLog log(context);
  HardwareResult out;
  out.registry = load_registry(context);
  for (const auto& h : out.registry->hardware()) out.profiles.push_back(&h);
  std::stable_sort(out.profiles.begin(), out.profiles.end(),
                   [](const auto* a, const auto* b) { return a->object->memory_bytes < b->object->memory_bytes; });
  return out;
}

PluginsResult plugins(const Context& context) {
  const RequestLog log(context);
  PluginsResult out;
  out.registry = load_registry(context);
  out.search_path =
      plugin_search_path(context.plugins.dirs, context.environment.plugin_path, context.plugins.install_dir);
  return out;
}

}  // namespace mme::commands
