#include "mme/engine/fit.hpp"

#include <algorithm>
#include <cmath>

namespace mme {

namespace {

std::int64_t kept_free_bytes(const HardwareProfile& hw, double headroom_fraction) {
  if (headroom_fraction < 0) headroom_fraction = kDefaultHeadroom;  // kHeadroomUnset under the fixed rule
  return static_cast<std::int64_t>(std::llround(static_cast<double>(hw.memory_bytes) * headroom_fraction));
}

}  // namespace

std::int64_t usable_memory_bytes(const HardwareProfile& hw, double headroom_fraction, std::int64_t reserved_bytes) {
  return hw.memory_bytes - (reserved_bytes >= 0 ? reserved_bytes : hw.reserved_bytes) -
         kept_free_bytes(hw, headroom_fraction);
}

FitVerdict judge_fit(const Estimate& estimate, const HardwareProfile& hw, double headroom_fraction, bool on_bound,
                     std::int64_t reserved_bytes) {
  FitVerdict v;
  v.hardware = &hw;
  v.capacity_bytes = hw.memory_bytes;
  const bool device_known = std::any_of(estimate.stages.begin(), estimate.stages.end(),
                                        [](const StageEstimate& st) { return st.device_bytes > 0; });
  if (headroom_fraction < 0 && reserved_bytes < 0 && device_known) {
    // The device rule: what the device holds at the peak (PyTorch's reserved segments and what lies
    // outside PyTorch) against the capacity the driver reports.
    v.on_device = true;
    v.on_bound = on_bound;
    v.usable_bytes = hw.memory_bytes;
    for (const auto& st : estimate.stages)
      v.needed_bytes = std::max(v.needed_bytes, on_bound ? st.device_upper_bytes : st.device_bytes);
    v.headroom_bytes = v.usable_bytes - v.needed_bytes;
    v.fits = v.headroom_bytes >= 0;
    return v;
  }
  if (headroom_fraction < 0) headroom_fraction = kDefaultHeadroom;
  v.reserved_bytes = reserved_bytes >= 0 ? reserved_bytes : hw.reserved_bytes;
  v.kept_free_bytes = kept_free_bytes(hw, headroom_fraction);
  v.headroom_fraction = headroom_fraction;
  v.usable_bytes = usable_memory_bytes(hw, headroom_fraction, reserved_bytes);
  v.on_bound = on_bound;
  v.needed_bytes =
      on_bound ? std::max(estimate.upper_bytes(), estimate.peak().total_bytes) : estimate.peak().total_bytes;
  v.headroom_bytes = v.usable_bytes - v.needed_bytes;
  v.fits = v.headroom_bytes >= 0;
  return v;
}

}  // namespace mme
