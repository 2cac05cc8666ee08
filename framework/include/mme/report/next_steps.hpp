// The "next steps" of `mme estimate` when the layout fits none of the judged GPUs: the smallest
// changes to the layout that would make it fit (the CLI prints them, `--json` has them as
// next_steps; the browser page shows them too). Moved from cli/cmd_estimate.cpp unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
};

// The smallest changes that make the estimate fit one of `gpus`, in the order of what they
// cost the step time (the seed README's ranking: recompute, EP, PP, TP, micro-batch), each
// tried from the current layout and never one the layout already has. Pairs with full recompute
// when no single change fits; `mme plan` when nothing tried fits. `gpu` (the --gpu one, or null)
// sets the compute capability of the estimates; `model_name` is the name the hint to `mme plan` uses.
std::vector<NextStep> next_steps(const ModelSpec& model, const TrainingSetup& base, const HardwareProfile* gpu,
                                 const std::string& model_name, const Registry& registry,
                                 const std::vector<const HardwareProfile*>& gpus, double headroom, bool on_bound,
                                 std::int64_t reserved);

// The smallest GPU count TP x PP x CP and ETP x EP x PP both divide (0 when out of range).
std::int64_t layout_gpu_multiple(const ParallelLayout& p);

}  // namespace mme::cli
