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
  for (const auto& st : r.next_steps)
    steps.push_back({{"change", st.change}, {"needed_bytes", st.needed_bytes}, {"fits", st.fits_on}});
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
  return cli::plan_result_to_json(*o.model, *o.planner, o.options, o.result, o.suggestions);
}

// ---- validate --------------------------------------------------------------------------------

namespace {

J stats_json(const ErrorStats& s) {
  return {{"count", s.count},
          {"median_abs_pct", 100 * s.median},
          {"p90_abs_pct", 100 * s.p90},
          {"max_abs_pct", 100 * s.max}};
}

J summary_json(const ValidationSummary& sum, bool with_static_and_baselines) {
  J j{{"total", sum.total},
      {"evaluated", sum.evaluated},
      {"skipped", sum.skipped},
      {"errors", sum.errors},
      {"peak", stats_json(sum.peak)}};
  if (with_static_and_baselines) j["static"] = stats_json(sum.static_mem);
  j["peak_ge_5gib"] = stats_json(sum.peak_large);
  j["megatron_theoretical_peak"] = stats_json(sum.megatron_theoretical);
  j["seed_tool_peak"] = stats_json(sum.seed_tool);
  J by_size = J::array();
  for (const auto& b : sum.by_size) {
    J e = stats_json(b.peak);
    e["bucket"] = b.label;
    e["min_gib"] = b.min_gib;
    if (std::isfinite(b.max_gib))
      e["max_gib"] = b.max_gib;
    else
      e["max_gib"] = nullptr;
    by_size.push_back(e);
  }
  j["by_size"] = by_size;
  const auto& sg = sum.signed_peak;
  j["signed"] = {{"count", sg.count},          {"median_pct", 100 * sg.median}, {"threshold_pct", 5.0},
                 {"under", sg.under},          {"under_share", sg.under_share}, {"over", sg.over},
                 {"over_share", sg.over_share}};
  j["bound"] = {{"count", sum.bound.count}, {"covered", sum.bound.covered}, {"share", sum.bound.share}};
  return j;
}

J case_json(const ValidationCase& c) {
  J j;
  if (c.format == CsvFormat::kRealRuns) {
    j = {{"id", c.id},
         {"model", c.model},
         {"source", c.source},
         {"metric", c.metric},
         {"counted", c.counted()},
         {"rank_note", c.rank_note},
         {"mme_args", c.mme_args},
         {"status", c.status},
         {"reason", c.reason},
         {"measured_peak_gib", c.measured_peak_gib}};
  } else {
    j = {{"model", c.model},
         {"test_case", c.test_case},
         {"golden", c.golden},
         {"status", c.status},
         {"reason", c.reason},
         {"world_size", c.world_size},
         {"measured_peak_gib", c.measured_peak_gib},
         {"measured_static_gib", c.measured_static_gib}};
  }
  if (c.status == "ok") {
    if (c.format == CsvFormat::kRealRuns) j["world_size"] = c.world_size;
    j["stage"] = c.stage;
    j["estimated_peak_gib"] = c.estimated_peak_gib;
    j["estimated_static_gib"] = c.estimated_static_gib;
    j["estimated_upper_gib"] = c.estimated_upper_gib;
    j["within_bound"] = c.within_bound();
    j["peak_error_pct"] = 100 * c.peak_error();
    if (c.format == CsvFormat::kFunctionalTest) j["static_error_pct"] = 100 * c.static_error();
    j["megatron_theoretical_gib"] = c.megatron_theoretical_gib;
    j["seed_tool_gib"] = c.seed_tool_gib;
  } else {
    j["estimated_peak_gib"] = nullptr;
    j["estimated_static_gib"] = nullptr;
    j["estimated_upper_gib"] = nullptr;
  }
  return j;
}

J log_document(const ValidateResult& r) {
  J list = J::array();
  std::size_t covered = 0;
  for (const auto& rank : r.ranks) {
    covered += rank.within_bound() ? 1 : 0;
    list.push_back(
        J{{"rank", rank.rank ? J(*rank.rank) : J(nullptr)},
          {"stage", rank.stage},
          {"reports", rank.reports},
          {"measured_max_allocated_gib", rank.measured_max_allocated_gib},
          {"measured_allocated_gib", rank.measured_allocated_gib ? J(*rank.measured_allocated_gib) : J(nullptr)},
          {"estimated_peak_gib", rank.estimated_peak_gib},
          {"estimated_upper_gib", rank.estimated_upper_gib},
          {"estimated_static_gib", rank.estimated_static_gib},
          {"peak_error_pct", 100 * rank.peak_error()},
          {"within_bound", rank.within_bound()}});
  }
  const auto& p = r.estimate.setup.parallel;
  const std::size_t n = r.ranks.size();
  return J{{"schema_version", kSchemaVersion},
           {"format", "log"},
           {"log", *r.log},
           {"model", r.estimate.model.name},
           {"world_size", p.world_size},
           {"pp", p.pp},
           {"ranks", list},
           {"summary",
            {{"ranks", n},
             {"bound",
              {{"count", n},
               {"covered", covered},
               {"share", n == 0 ? 0.0 : static_cast<double>(covered) / static_cast<double>(n)}}}}}};
}

}  // namespace

J validate_document(const ValidateResult& r) {
  if (r.log) return log_document(r);
  if (r.format == CsvFormat::kRealRuns) {
    std::vector<ValidationCase> counted, other;
    for (const auto& c : r.cases) (c.counted() ? counted : other).push_back(c);
    J list = J::array(), other_list = J::array();
    for (const auto& c : counted) list.push_back(case_json(c));
    for (const auto& c : other) other_list.push_back(case_json(c));
    return J{{"schema_version", kSchemaVersion},
             {"format", csv_format_name(CsvFormat::kRealRuns)},
             {"cases", list},
             {"summary", summary_json(summarize(counted), false)},
             {"other", {{"cases", other_list}, {"summary", summary_json(summarize(other), false)}}}};
  }
  J list = J::array();
  for (const auto& c : r.cases) list.push_back(case_json(c));
  return J{{"schema_version", kSchemaVersion},
           {"format", csv_format_name(CsvFormat::kFunctionalTest)},
           {"cases", list},
           {"summary", summary_json(summarize(r.cases), true)}};
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
