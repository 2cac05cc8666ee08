// The validate use case: mme's estimates against measured Megatron-LM runs, from a CSV of cases
// (functional tests or real runs; every row estimated through this layer) or a training log.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <mme/commands/estimate.hpp>
#include <mme/validate/validation.hpp>

namespace mme::commands {

struct ValidateRequest {
  std::optional<std::string> cases;                // CASES.csv (with --from-log: MODEL instead)
  std::optional<std::string> golden, case_filter;  // --golden, --case: regular expressions over the rows
  std::optional<std::string> from_log;             // --from-log LOG
  // With --from-log: the run, as for `mme estimate` (MODEL is `cases`); a CSV's rows carry
  // their own, so with a CSV its input, setup and GPU must be empty (UsageError naming the flag).
  EstimateRequest run;
};

struct ValidateResult {
  // A CSV of cases: its format and the evaluated rows (in file order, filtered).
  CsvFormat format = CsvFormat::kFunctionalTest;
  std::vector<ValidationCase> cases;
  // --from-log: the log, its memory lines, the run's estimate and the per-rank comparison.
  std::optional<std::string> log;
  MemoryLog memory;
  Estimate estimate;
  std::vector<RankComparison> ranks;
};

ValidateResult validate(const ValidateRequest& request, const Context& context);

}  // namespace mme::commands
