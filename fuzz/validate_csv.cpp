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
// positive, finite measured peak.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
    for (const auto& row : table.rows) {
      if (cases.size() >= 8) break;
      const auto it = row.find(real ? "id" : "test_case");
      if (filter && !filter->search(it == row.end() ? "" : it->second)) continue;
      mme::fuzz::run_checked("validate_csv", [&] {
        cases.push_back(real ? mme::validate_real_run_row(row, nullptr)
                             : mme::validate_row(row, mme::fuzz::registry()));
      });
    }
    for (const auto& c : cases)
      if (c.status == "ok" && (!std::isfinite(c.measured_peak_gib) || !(c.measured_peak_gib > 0)))
        mme::fuzz::finding("validate_csv", "a row with an invalid measured peak is counted: " + c.test_case);
    (void)mme::summarize(cases);
  });
  return 0;
}
