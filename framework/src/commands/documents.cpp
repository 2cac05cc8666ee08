// The JSON documents of the results (docs/cli.md): one writer per result type.
#include "mme/commands/documents.hpp"

#include <cmath>

#include <mme/inputs/json_schema.hpp>
#include <mme/report/render_estimate.hpp>
#include <mme/report/render_plan.hpp>
#include <mme/sdk/units.hpp>
#include <mme/sdk/version.hpp>

namespace mme::commands {

using J = nlohmann::json;
using OJ = nlohmann::ordered_json;

J estimate_document(const EstimateResult& r) {
  J j = cli::estimate_to_json(r.model, r.estimate, r.fits);
  J steps = J::array();
  for (const auto& st : r.next_steps) steps.push_back(cli::next_step_json(st));
  j["next_steps"] = steps;
  return j;
}

J compare_document(const CompareResult& result) {
  J list = J::array();
  for (const auto& r : result.rows) {
    J j{{"args", r.args}, {"varied", r.varied}};
    if (!r.result) {
      j["error"] = r.error;
      list.push_back(j);
      continue;
    }
    const Estimate& e = r.result->estimate;
    const StageEstimate& peak = e.peak();
    j["error"] = nullptr;
    j["num_gpus"] = e.setup.parallel.world_size;
    j["peak_pp_rank"] = peak.pp_rank;
    j["peak_bytes"] = peak.total_bytes;
    j["upper_bytes"] = e.upper_bytes();
    j["weight_bytes"] = peak.weight_bytes;
    j["gradient_bytes"] = peak.gradient_bytes;
    j["optimizer_bytes"] = peak.optimizer_bytes;
    j["activation_bytes"] = peak.activation_bytes;
    j["other_bytes"] = peak.other_bytes;
    J fits = J::array();
    for (const auto& f : r.result->fits)
      fits.push_back({{"hardware", f.hardware->name},
                      {"fits", f.fits},
                      {"headroom_bytes", f.headroom_bytes},
                      {"usable_bytes", f.usable_bytes}});
    j["fits"] = fits;
    list.push_back(j);
  }
  return J{{"schema_version", 1}, {"model", result.any().model.name}, {"layouts", list}};
}

OJ params_document(const ParamsResult& r) {
  OJ breakdown = OJ::object(), active = OJ::object();
  for (const auto& [k, v] : r.total) breakdown[k] = v;
  for (const auto& [k, v] : r.active) active[k] = v;
  const ModelSpec& model = r.model;
  OJ j;
  j["schema_version"] = kSchemaVersion;
  j["model"] = model.name;
  j["family"] = model.family;
  j["model_type"] = model.model_type;
  j["adapter"] = model.adapter;
  j["source"] = model.source;
  j["total_params"] = r.counts.total;
  j["active_params"] = r.counts.active;
  j["mtp_params"] = r.counts.mtp;
  j["breakdown"] = breakdown;
  j["active_breakdown"] = active;
  if (r.lora) {
    OJ targets = OJ::array();
    const std::string names = lora_targets_to_string(r.lora->targets);
    for (std::size_t at = 0; at < names.size();) {
      const std::size_t end = std::min(names.find(',', at), names.size());
      targets.push_back(names.substr(at, end - at));
      at = end + 1;
    }
    j["lora"] = {{"rank", r.lora->rank},
                 {"target_modules", targets},
                 {"trainable_params", r.lora_counts.total},
                 {"trainable_active_params", r.lora_counts.active},
                 {"mtp_trainable_params", r.lora_counts.mtp},
                 {"frozen_params", r.counts.total}};
  }
  j["keys_read"] = model.keys_read;
  j["warnings"] = model.warnings;
  return j;
}

J models_document(const std::vector<ModelEntry>& models) {
  J list = J::array();
  for (const auto& e : models)
    list.push_back({{"name", e.bundled.name},
                    {"family", e.model.family},
                    {"model_type", e.model.model_type},
                    {"adapter", e.model.adapter},
                    {"path", e.bundled.path.string()},
                    {"total_params", e.counts.total},
                    {"active_params", e.counts.active},
                    {"mtp_params", e.counts.mtp},
                    {"warnings", e.model.warnings}});
  return J{{"schema_version", kSchemaVersion}, {"models", list}};
}

J hardware_document(const HardwareResult& result) {
  J j = J::array();
  for (const auto* r : result.profiles) {
    const auto& h = *r->object;
    j.push_back({{"name", h.name},
                 {"vendor", h.vendor},
                 {"architecture", h.architecture},
                 {"compute_capability", h.compute_capability / 10.0},
                 {"aliases", h.aliases},
                 {"memory_bytes", h.memory_bytes},
                 {"memory_gib", to_gib(h.memory_bytes)},
                 {"reserved_bytes", h.reserved_bytes},
                 {"allocatable_bytes", allocatable_bytes(h)},
                 {"hbm_bandwidth_gbps", h.hbm_bandwidth_gbps},
                 {"bf16_tflops", h.bf16_tflops},
                 {"fp8_tflops", h.fp8_tflops},
                 {"link_bandwidth_gbps", h.link_bandwidth_gbps},
                 {"fp4_tflops", h.fp4_tflops},
                 {"inter_node_bandwidth_gbps", h.inter_node_bandwidth_gbps},
                 {"gpus_per_node", h.gpus_per_node},
                 {"host_link_bandwidth_gbps", h.host_link_bandwidth_gbps},
                 {"source", h.source},
                 {"plugin", r->plugin}});
  }
  return J{{"schema_version", kSchemaVersion}, {"hardware", j}};
}

J plugins_document(const PluginsResult& result) {
  J j;
  j["schema_version"] = kSchemaVersion;
  j["api_version"] = kPluginApiVersion;
  j["abi_tag"] = std::string(kAbiTag);
  j["search_path"] = J::array();
  for (const auto& d : result.search_path) j["search_path"].push_back(d.lexically_normal().string());
  j["plugins"] = J::array();
  for (const auto& p : result.registry->plugins())
    j["plugins"].push_back({{"name", p.name},
                            {"version", p.version},
                            {"path", p.path},
                            {"adapters", p.adapters},
                            {"layer_models", p.layer_models},
                            {"hardware", p.hardware}});
  j["rejected"] = J::array();
  for (const auto& r : result.registry->rejected()) j["rejected"].push_back({{"path", r.path}, {"reason", r.reason}});
  return j;
}

J plan_document(const PlanOutcome& o) {
  J j = cli::plan_result_to_json(*o.model, *o.planner, o.options, o.result, o.suggestions);
  if (o.gpu_counts) {  // without --num-gpus: the smallest count that fits and the counts above it
    j["global_batch_assumed"] = o.gpu_counts->global_batch_assumed;
    j["gpu_counts"] = cli::gpu_counts_to_json(*o.planner, o.options, *o.gpu_counts);
  }
  return j;
}

OJ version_document() {
  OJ j;
  j["mme"] = MME_VERSION_STRING;
  j["libmme"] = std::string(library_version());
  j["plugin_api"] = kPluginApiVersion;
  j["abi_tag"] = std::string(kAbiTag);
  return j;
}

}  // namespace mme::commands
