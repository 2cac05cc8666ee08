// The "next steps" of `mme estimate` when the layout fits none of the judged GPUs: the changes
// that would make it fit, those that cost nothing first, then the others by what they cost per
// GiB they save in the planner's step-time model (the CLI prints them, `--json` has them as
// next_steps; the browser page shows them too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <mme/engine/registry.hpp>
#include <mme/sdk/hardware_profile.hpp>
#include <mme/sdk/model_spec.hpp>
#include <mme/sdk/training_setup.hpp>

namespace mme::cli {

// One change to the layout that makes the peak fit: its flags, what the fit is then judged
// on, and the smallest judged GPU it fits (empty for a closing hint without numbers).
struct NextStep {
  std::string change;
  std::int64_t needed_bytes = 0;
  std::string fits_on;
  // Costs nothing in step time by construction (sequence parallelism, the distributed optimizer,
  // the --account-for-*-in-pipeline-split splits).
  bool free = false;
  // The predicted step time after the change over the one before (planner/cost_model.cpp on the
  // GPU it fits; 1.12: 12 % slower); 0 when the model cannot price it.
  double step_ratio = 0;
};

// The line `mme estimate` prints for a step, and its JSON (next_steps items).
std::string next_step_text(const NextStep& s, bool on_bound);
nlohmann::json next_step_json(const NextStep& s);

// The changes that make the estimate fit one of `gpus`, each tried from the current layout and
// never one the layout already has: first the free ones (--sequence-parallel with TP > 1, the
// distributed optimizer, --account-for-embedding/loss-in-pipeline-split with PP > 1), then the
// others (selective recompute, Megatron-FSDP's sharding, optimizer offload, EP, PP, TP, full
// recompute, a smaller micro-batch) by their predicted step-time cost per GiB saved; at most
// four. Pairs with full recompute when no single change fits; `mme plan` when nothing tried fits.
// `gpu` (the --gpu one, or null) sets the compute capability of the estimates; `model_name` is
// the name the hint to `mme plan` uses; `base_needed`, the bytes the base layout needs on
// gpus.front() when the caller has judged it already (else it is estimated again).
std::vector<NextStep> next_steps(const ModelSpec& model, const TrainingSetup& base, const HardwareProfile* gpu,
                                 const std::string& model_name, const Registry& registry,
                                 const std::vector<const HardwareProfile*>& gpus, double headroom, bool on_bound,
                                 std::int64_t reserved, std::optional<std::int64_t> base_needed = std::nullopt);

// The smallest GPU count TP x PP x CP and ETP x EP x PP both divide (0 when out of range).
std::int64_t layout_gpu_multiple(const ParallelLayout& p);

}  // namespace mme::cli
