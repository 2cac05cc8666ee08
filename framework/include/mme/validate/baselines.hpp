// Reference formulas other tools use, re-implemented for comparison in `mme validate`
// (docs/accuracy.md). Not used by `mme estimate`.
#pragma once

#include <cstdint>

#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

// Megatron-LM's megatron/training/theoretical_memory_usage.py (main, core_r0.19):
// weight + optimizer bytes of the "most loaded shard" plus its activation formula (with SP and
// selective recompute: Korthikanti's 34 sbh/t family; otherwise the "without SP" variant with a
// 1.05 overhead). Both are for the first pipeline stage. `setup` must be resolved.
std::int64_t megatron_theoretical_memory(const ModelSpec& model, const TrainingSetup& setup);

// The seed Python tool (megatron-memory-estimator / mbridge estimate_013.py) as
// seed-tool-behaviour.md §5-§7 describes it, quirks included: sequence parallelism off, ETP 1
// unless given, VPP ignored, unpadded vocabulary, no router or MTP, flash-style attention, and
// the *first* stage's total reported as the peak. `setup` must be resolved.
std::int64_t seed_tool_peak(const ModelSpec& model, const TrainingSetup& setup);

}  // namespace mme
