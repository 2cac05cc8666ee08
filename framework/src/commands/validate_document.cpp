// The JSON document of `mme validate --json` (docs/cli.md): a file of their own, apart from the
// other documents, so that a build without libmme_validate (the browser page) has those.
#include <cmath>

#include <mme/commands/documents.hpp>
#include <mme/inputs/json_schema.hpp>

namespace mme::commands {

using J = nlohmann::json;

// ---- validate --------------------------------------------------------------------------------

namespace {

J stats_json(const ErrorStats& s) {
  return {{"count", s.count},
          {"median_abs_pct", 100 * s.median},
          {"p90_abs_pct", 100 * s.p90},
          {"max_abs_pct", 100 * s.max}};
}

J summary_json(const ValidationSummary& sum, bool with_static_and_baselines) {
  J j{{"total", sum.total},     {"evaluated", sum.evaluated}, {"skipped", sum.skipped},
      {"refused", sum.refused}, {"errors", sum.errors},       {"peak", stats_json(sum.peak)}};
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
  j["bound"] = {{"count", sum.bound.count},
                {"covered", sum.bound.covered},
                {"share", sum.bound.share},
                {"exceeded", sum.bound.exceeded},
                {"max_excess_pct", 100 * sum.bound.max_excess}};
  const auto& r = sum.reserved;
  J rj = stats_json(r.error);
  rj["signed_median_pct"] = 100 * r.signed_median;
  rj["under"] = r.under;
  rj["gap_measured_median_gib"] = r.gap_measured_median_gib;
  rj["gap_estimated_median_gib"] = r.gap_estimated_median_gib;
  rj["gap_error_median_gib"] = r.gap_error_median_gib;
  rj["gap_error_max_gib"] = r.gap_error_max_gib;
  rj["bound"] = {{"count", r.count},
                 {"covered", r.bound_covered},
                 {"exceeded", r.count - r.bound_covered},
                 {"max_excess_pct", 100 * r.bound_max_excess}};
  j["reserved"] = rj;
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
    if (c.measured_reserved_gib > 0) j["measured_reserved_gib"] = c.measured_reserved_gib;
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
    if (c.estimated_reserved_gib > 0) {
      j["estimated_reserved_gib"] = c.estimated_reserved_gib;
      j["estimated_device_gib"] = c.estimated_device_gib;
      j["estimated_reserved_upper_gib"] = c.estimated_reserved_upper_gib;
    }
    if (c.reserved_compared()) {
      j["reserved_error_pct"] = 100 * c.reserved_error();
      j["reserved_gap_error_gib"] = c.reserved_gap_error_gib();
      j["within_reserved_bound"] = c.estimated_reserved_upper_gib >= c.measured_reserved_gib;
    }
  } else {
    j["estimated_peak_gib"] = nullptr;
    j["estimated_static_gib"] = nullptr;
    j["estimated_upper_gib"] = nullptr;
  }
  return j;
}

J log_document(const ValidateResult& r) { return log_comparison_json(*r.log, r.memory, r.ranks, r.estimate); }

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

}  // namespace mme::commands
