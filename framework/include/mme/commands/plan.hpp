// The plan use case: every layout of N GPUs that Megatron-LM accepts and that fits, ranked by a
// speed proxy (mme::Planner; docs/planner.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mme/commands/estimate.hpp>
#include <mme/planner/planner.hpp>

namespace mme::commands {

// The planner's values are given as the flags take them (text, read here with the flags'
// messages); a setup flag that plan searches takes a comma list in `setup`: --micro-batch-size
// (default 1,2,4), --data-parallel-sharding-strategy and --optimizer-cpu-offload-fraction (and
// their aliases); --tp, --pp, --vpp, --ep, --etp and --cp fix that size. Without --num-gpus
// (and with --gpu): how many GPUs the model needs (Planner::gpu_counts).
struct PlanRequest {
  ModelInput input;  // MODEL (plan takes no launch flags or spec files)
  SetupFlags setup;
  std::optional<std::string> gpu;          // --gpu (else the profile with the most memory)
  std::optional<std::string> headroom;     // --headroom
  std::optional<std::string> recompute;    // --recompute none,selective,full
  std::optional<std::string> dp_sharding;  // --dp-sharding LIST
  std::optional<std::string> cuda_graphs;  // --cuda-graphs LIST
  std::optional<std::string> max_tp, gpus_per_node, inter_node_bandwidth, sort, top, threads;
  std::optional<std::string> max_candidates;  // --max-candidates N (0: no bound)
  bool no_overlap = false;                    // --no-overlap: the base flags' overlaps, not the recipes'
  // Without --gpu, the best layout for each known GPU instead of one ranking (`mme plan`'s text
  // report); otherwise the profile with the most memory, with a warning. Without --num-gpus (the
  // count search), the text report's setting keeps only the fastest plan of each count.
  bool best_per_gpu = false;
  // Set by the caller (Ctrl-C) to stop the search: plan then throws InterruptedError.
  const std::atomic<bool>* cancel = nullptr;
  std::optional<std::string> html;  // also write the HTML report (a fit map of the space) here
  // Every valid layout, in enumeration order, on the calling thread (`plan --csv`).
  std::function<void(const Plan&, const Planner&, const PlanOptions&)> on_valid;
  // About ten times a second while the search runs, on the calling thread.
  std::function<void(std::uint64_t done, std::uint64_t total, double elapsed_s)> progress;
};

struct PlanOutcome {
  std::shared_ptr<const Registry> registry;
  std::shared_ptr<const ModelSpec> model;
  std::shared_ptr<const Planner> planner;
  PlanOptions options;                      // as searched (without the callbacks)
  PlanResult result;                        // one ranking (not with best_per_gpu)
  std::vector<PlanSuggestion> suggestions;  // when nothing fits
  // Without --num-gpus: the smallest count that fits and the fastest plans at it and above (then
  // `options` has the smallest count and the global batch every count assumed, and `result` is
  // the search at the smallest count).
  std::optional<GpuCountResult> gpu_counts;
  // best_per_gpu: each known GPU, smallest memory first, with its best layout (profiles with the
  // same usable memory and compute capability share one search).
  struct GpuBest {
    const HardwareProfile* gpu = nullptr;
    std::int64_t usable_bytes = 0;
    std::optional<Plan> best;  // none: no layout fits
    PlanOptions options;       // its search's options (args_for)
  };
  std::vector<GpuBest> per_gpu;
};

// UsageError for bad options (--csv or --html without --num-gpus), LayoutError when no layout is
// valid (the engine's reason) or no GPU count fits.
PlanOutcome plan(const PlanRequest& request, const Context& context);

// `plan --csv`: the header and one row per plan (the columns of the knobs the search compares).
std::string plan_csv_header(const PlanOptions& options);
std::string plan_csv_row(const Plan& plan, const Planner& planner, const PlanOptions& options);
// The columns of the knobs a search compares (only those it searches), each led by `sep`: the
// table's cells padded to their column, CSV fields bare (`csv`).
std::string plan_knob_header(const PlanOptions& options, const char* sep, bool csv);
std::string plan_knob_cells(const PlanLayout& layout, const PlanOptions& options, const char* sep, bool csv);

}  // namespace mme::commands
