// The measured runs the planner's step-time model is calibrated on (docs/planner.md,
// "Calibration"): bench/accuracy/throughput_runs.csv (Megatron-Bridge's published performance
// tables, copied with its provenance in bench/accuracy/README.md) joined with
// bench/accuracy/throughput_runs_mme.csv, which says for each row the model mme reads, the
// `mme estimate` flags of its layout and setup, whether the fit uses it or holds it out, and what
// was inferred. Shared by the calibration tool (tests/planner/calibration/calibrate_planner.cpp)
// and its test (tests/planner/calibration/calibration_test.cpp).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <mme/engine/registry.hpp>
#include <mme/planner/planner.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::calibration {

struct ThroughputRow {
  int row = 0;                    // 1-based data row of throughput_runs.csv
  std::string label;              // the model as the table names it ("Llama3-70B SFT")
  std::string gpu_label;          // the table's GPU ("H100")
  std::string source;             // mme's MODEL: a bundled id or a path from the source folder; empty: not modelled
  std::string status;             // "fit", "holdout" or "not modelled: why"
  std::string split;              // the measured split: "even" or "cF/C/L" (a chunk split)
  std::vector<std::string> args;  // `mme estimate` flags: the layout and the setup
  std::string assumptions;
  double measured_step_seconds = 0, measured_tokens_per_gpu = 0, measured_tflops_per_gpu = 0;
  bool modelled() const { return status == "fit" || status == "holdout"; }
};

// Reads both files from `accuracy_dir` (bench/accuracy). Throws ConfigError on a malformed file.
std::vector<ThroughputRow> read_throughput_rows(const std::filesystem::path& accuracy_dir);

// A modelled row, ready for the planner: the model, the options of its search (the setup of its
// flags, its GPU count and GPU, its micro-batch size, every recompute variant, the selective one
// with its modules, no headroom: the layout ran) and the measured layout with its recompute.
struct RowSetup {
  ModelSpec model;
  PlanOptions options;
  PlanLayout layout;
};
RowSetup row_setup(const ThroughputRow& row, const Registry& registry, const std::filesystem::path& source_dir);

// The predicted step time of the measured layout under `constants`.
double predicted_step_seconds(const Planner& planner, const RowSetup& setup, const StepTimeConstants& constants);

// The fit's objective: the mean squared log residual of the predicted step time over `rows`
// (each with its planner), ln(predicted / measured).
struct PreparedRow {
  const ThroughputRow* row = nullptr;
  RowSetup setup;
  std::unique_ptr<Planner> planner;
};
std::vector<PreparedRow> prepare_rows(const std::vector<ThroughputRow>& rows, const Registry& registry,
                                      const std::filesystem::path& source_dir, const std::string& status);
double fit_objective(const std::vector<PreparedRow>& rows, const StepTimeConstants& constants);

// Nelder-Mead in the logarithms of the fitted constants (gemm_fp8, attention and
// elementwise_passes; efficiencies kept in (0, 1]; gemm_bf16 stays `start`'s), from `start`: the
// constants that minimise fit_objective.
StepTimeConstants fit_constants(const std::vector<PreparedRow>& rows, const StepTimeConstants& start);

}  // namespace mme::calibration
