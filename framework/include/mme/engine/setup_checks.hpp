// The layout checks of a training setup, run by the host before any layer model sees it.
#pragma once

#include "mme/engine/registry.hpp"
#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

// Fills the derived fields and the defaults that depend on other knobs. Throws LayoutError
// for sizes that are not positive or larger than the bounds above, and world sizes that do not
// divide.
TrainingSetup resolve_setup(TrainingSetup setup);

// Checks the layout against a model the way Megatron-LM does (heads by TP, experts by EP,
// layers over PP/VPP, sequence by CP, ...). Throws LayoutError naming the numbers.
void validate_setup(const ModelSpec& model, const TrainingSetup& setup);

// forward_backward_pipelining_with_interleaving (schedules.py) runs the micro-batches in groups of
// `group` per model chunk (--microbatch-group-size-per-virtual-pipeline-stage, default PP) and
// refuses fewer micro-batches than a group and a last group of fewer than PP micro-batches.
// Whether it runs `micro_batches` (resolve_setup refuses a VPP layout for which it does not).
bool interleaved_schedule_runs(std::int64_t micro_batches, std::int64_t pp, std::int64_t group);

// validate_model_spec, then each block's own fields through its layer-memory model
// (LayerMemoryModel::validate_spec, through call_plugin). A block kind no loaded model handles
// is skipped here: the Estimator names it (PluginError). Throws ConfigError naming the field.
void validate_model_blocks(const ModelSpec& model, const Registry& registry);

}  // namespace mme
