// Accuracy against measured Megatron-LM runs: reads a CSV of training runs (the format of
// bench/accuracy/megatron_functional_test_memory.csv: measured peak and static memory next to
// the run's Megatron-LM flags), estimates the rank that logged the measurement (the last
// rank: last pipeline stage) and compares.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mme/registry.hpp"

namespace mme {

struct ValidationCase {
  std::string model, test_case, golden;
  std::string status;  // "ok", "skipped" or "error" (the estimate itself failed)
  std::string reason;  // why skipped / the error
  double measured_peak_gib = 0, measured_static_gib = 0;
  double estimated_peak_gib = 0, estimated_static_gib = 0;
  double estimated_upper_gib = 0;  // the estimate's upper bound for the same stage
  double megatron_theoretical_gib = 0;  // Megatron-LM's theoretical_memory_usage, for comparison
  double seed_tool_gib = 0;             // the seed Python tool's formulas, for comparison
  std::int64_t world_size = 0;
  std::string gpu_architecture;

  double peak_error() const;    // (estimated - measured) / measured, signed
  double static_error() const;
  double baseline_error() const;  // Megatron-LM's formula against the measured peak
  double seed_error() const;      // the seed tool's formulas against the measured peak
};

struct ErrorStats {
  std::size_t count = 0;
  double median = 0, p90 = 0, max = 0;  // of the absolute relative error
};

struct ValidationSummary {
  std::size_t total = 0, evaluated = 0, skipped = 0, errors = 0;
  ErrorStats peak, static_mem, peak_large;  // peak_large: cases with measured peak >= 5 GiB
  ErrorStats megatron_theoretical;          // Megatron-LM's own formula on the same cases
  ErrorStats seed_tool;                     // the seed tool's formulas on the same cases
};

struct ValidationOptions {
  std::string golden_regex;  // keep rows whose golden matches (ECMAScript regex); empty = all
  std::string case_regex;    // keep rows whose test_case matches
};

// One CSV row as column -> value (empty cells omitted).
using CsvRow = std::map<std::string, std::string>;
std::vector<CsvRow> read_csv(const std::filesystem::path& path);  // throws NotFoundError / ConfigError

// Evaluates one row. Rows outside what mme models come back "skipped" with the reason.
ValidationCase validate_row(const CsvRow& row, const Registry& registry);

std::vector<ValidationCase> run_validation(const std::filesystem::path& csv, const Registry& registry,
                                           const ValidationOptions& options = {});
ValidationSummary summarize(const std::vector<ValidationCase>& cases);

}  // namespace mme
