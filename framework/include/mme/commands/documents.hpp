// The JSON documents of the use cases' results: what `mme COMMAND --json` prints and the C entry
// point (and so Python) returns as "result". One writer per result type, shared by every front
// end (docs/cli.md has the schemas).
#pragma once

#include <nlohmann/json.hpp>

#include <mme/commands/catalog.hpp>
#include <mme/commands/compare.hpp>
#include <mme/commands/estimate.hpp>
#include <mme/commands/plan.hpp>
#include <mme/commands/validate.hpp>

namespace mme::commands {

nlohmann::json estimate_document(const EstimateResult& result);
nlohmann::json compare_document(const CompareResult& result);
nlohmann::ordered_json params_document(const ParamsResult& result);
nlohmann::json models_document(const std::vector<ModelEntry>& models);
nlohmann::json hardware_document(const HardwareResult& result);
nlohmann::json plugins_document(const PluginsResult& result);
nlohmann::json plan_document(const PlanOutcome& outcome);  // one ranking (not best_per_gpu)
nlohmann::json validate_document(const ValidateResult& result);
// The versions: mme, libmme, plugin_api, abi_tag.
nlohmann::ordered_json version_document();
// The setup schema as data: every knob's flags, aliases, switches, Megatron-LM spellings, kind and
// range, and the Megatron-LM flags that describe the model (the Python module derives its
// keywords from it).
nlohmann::ordered_json schema_document();

}  // namespace mme::commands
