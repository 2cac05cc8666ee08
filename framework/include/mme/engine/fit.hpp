// Fit verdicts: does the peak rank fit a GPU? The estimate's total is what the PyTorch
// allocator hands out (torch.cuda.max_memory_allocated); the device needs the CUDA context and
// NCCL buffers on top (the profile's reserved bytes) and the caching allocator's slack (the
// headroom, a fraction of the capacity).
#pragma once

#include <cstdint>
#include <vector>

#include "mme/engine/estimator.hpp"
#include "mme/sdk/hardware_profile.hpp"

namespace mme {

inline constexpr double kDefaultHeadroom = 0.05;  // 5% of capacity kept free for allocator fragmentation
// The headroom argument of judge_fit when the user gave none: with no --overhead-per-gpu either,
// the fit is judged on the device total against the capacity (the device rule).
inline constexpr double kHeadroomUnset = -1.0;

struct FitVerdict {
  const HardwareProfile* hardware = nullptr;
  std::int64_t capacity_bytes = 0;
  std::int64_t usable_bytes = 0;  // capacity - reserved - headroom
  std::int64_t needed_bytes = 0;  // the peak stage's upper bound (or total, on the point estimate)
  bool on_bound = true;           // judged on the upper bound (the default) or the point estimate
  bool fits = false;
  std::int64_t headroom_bytes = 0;   // usable - needed (negative: short by that much)
  std::int64_t reserved_bytes = 0;   // what the CUDA context and NCCL take (the profile's, or the override)
  std::int64_t kept_free_bytes = 0;  // the headroom fraction of the capacity
  double headroom_fraction = 0;
  // The device rule: needed is the peak stage's device total (PyTorch's reserved segments plus the
  // CUDA context, NCCL communicators and TE userbuffers; its upper bound on the bound), usable the
  // whole capacity, nothing reserved or kept free. Otherwise the fixed rule: the allocated peak (or
  // bound) against capacity - reserved - headroom.
  bool on_device = false;
};

// What a run may allocate on one GPU: the capacity less the reserved bytes (the profile's, or
// `reserved_bytes` when >= 0) and the headroom share of the capacity. judge_fit's usable_bytes;
// the planner judges every layout against it.
std::int64_t usable_memory_bytes(const HardwareProfile& hw, double headroom_fraction, std::int64_t reserved_bytes = -1);

// Judges on the estimate's upper bound unless `on_bound` is false (then on the point estimate).
// `reserved_bytes` >= 0 replaces the profile's reserved bytes (the Hugging Face Space's
// "overhead per GPU", `mme estimate --overhead-per-gpu`). With `headroom_fraction` kHeadroomUnset
// and no `reserved_bytes`, an estimate that carries the device total (EstimateOptions::device_memory)
// is judged by the device rule (FitVerdict::on_device); one without it, or either override given,
// by the fixed rule (an unset headroom is then kDefaultHeadroom). docs/memory-model.md, "Fit verdict".
FitVerdict judge_fit(const Estimate& estimate, const HardwareProfile& hw, double headroom_fraction,
                     bool on_bound = true, std::int64_t reserved_bytes = -1);

}  // namespace mme
