// Fuzz target: `mme validate CASES.csv [--case PATTERN]`: the CSV reader (quotes, cell counts,
// the two formats told apart by their columns), the linear-time row filter, each row's
// measurements (NaN, zero, negative, nodes_gpus products) and its Megatron flags through the
// adapter and the engine, and the summary.
//
// Input: the first line is a --case pattern (empty: none), the rest the CSV text. Real-runs
// rows (mme_args) need the CLI's option table: here they are row errors. At most 8 rows are
// estimated.
//
// Oracle: only mme::Error may come out (fuzz_support.hpp); a row counted in the statistics has a
// finite measured peak of at least kMinMeasuredGib that is its cell read whole (parse_decimal:
// "56,335" and "56.335abc" are refused, never read as 56 and 56.335); a refused row says its
// line; every statistic of the summary is finite (a denormal peak once made max and p90 null).
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <mme/sdk/number_text.hpp>
#include <mme/validate/validation.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto newline = input.find('\n');
  const std::string_view pattern = newline == std::string_view::npos ? input : input.substr(0, newline);
  const std::string_view csv = newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  mme::fuzz::run_checked("validate_csv", [&] {
    std::optional<mme::RowFilter> filter;
    if (!pattern.empty()) filter.emplace("--case", pattern);
    const mme::CsvTable table = mme::parse_csv_table(csv, "cases.csv");
    const bool real = table.format == mme::CsvFormat::kRealRuns;
    std::vector<mme::ValidationCase> cases;
    std::vector<const mme::CsvRow*> rows;
    for (std::size_t i = 0; i < table.rows.size(); ++i) {
      const auto& row = table.rows[i];
      if (cases.size() >= 8) break;
      const auto it = row.find(real ? "id" : "test_case");
      if (filter && !filter->search(it == row.end() ? "" : it->second)) continue;
      mme::fuzz::run_checked("validate_csv", [&] {
        cases.push_back(real ? mme::validate_real_run_row(row, nullptr, table.lines[i])
                             : mme::validate_row(row, mme::fuzz::registry(), table.lines[i]));
        rows.push_back(&row);
      });
    }
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto& c = cases[i];
      if (c.status == "refused" && c.reason.rfind("line " + std::to_string(c.line) + ": ", 0) != 0)
        mme::fuzz::finding("validate_csv", "a refused row does not say its line: " + c.reason);
      if (c.status != "ok") continue;
      if (!std::isfinite(c.measured_peak_gib) || !(c.measured_peak_gib >= mme::kMinMeasuredGib))
        mme::fuzz::finding("validate_csv", "a row with an invalid measured peak is counted: " + c.test_case);
      const auto cell = rows[i]->find(real ? "measured_gib" : "max_alloc_GiB_max");
      if (cell == rows[i]->end() || mme::parse_decimal(cell->second) != c.measured_peak_gib)
        mme::fuzz::finding("validate_csv", "a counted peak is not its cell read whole: " + c.test_case);
    }
    const mme::ValidationSummary s = mme::summarize(cases);
    for (const mme::ErrorStats* e : {&s.peak, &s.static_mem, &s.peak_large, &s.megatron_theoretical, &s.seed_tool})
      if (!std::isfinite(e->median) || !std::isfinite(e->p90) || !std::isfinite(e->max))
        mme::fuzz::finding("validate_csv", "a summary statistic is not finite (null in the JSON)");
  });
  return 0;
}
