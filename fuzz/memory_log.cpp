// Fuzz target: `mme validate --from-log LOG`: the training-log reader (report_memory lines of
// every rank, the TensorBoard scalars as text, Megatron-Bridge's GB figures, long lines, the
// steady-iteration buckets, refused measurements) and the comparison with a four-stage estimate.
//
// Input: the text of a log.
//
// Oracle: only mme::Error may come out (fuzz_support.hpp); a rank that is compared has a
// positive, finite max-allocated figure and finite errors (a refused measurement is never
// compared); the refusals listed are at most those counted and kMaxRefusedListed.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include <mme/sdk/units.hpp>
#include <mme/validate/validation.hpp>

#include "fuzz_support.hpp"

namespace {

// 8 GPUs in 4 pipeline stages of 10 to 13 GiB, the last with a bound.
mme::Estimate four_stages() {
  mme::Estimate e;
  e.setup.parallel.world_size = 8;
  e.setup.parallel.pp = 4;
  for (int i = 0; i < 4; ++i) {
    mme::StageEstimate s;
    s.pp_rank = i;
    s.total_bytes = mme::gib_to_bytes(10.0 + i);
    s.static_bytes = mme::gib_to_bytes(5.0);
    s.upper_bytes = i == 3 ? mme::gib_to_bytes(20.0) : 0;
    e.stages.push_back(s);
  }
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mme::fuzz::run_checked("memory_log", [&] {
    std::istringstream in(text);
    const mme::MemoryLog log = mme::parse_memory_log(in, "train.log");
    if (log.refused.size() > log.refused_count || log.refused.size() > mme::kMaxRefusedListed)
      mme::fuzz::finding("memory_log", "more refusals listed than counted");
    static const mme::Estimate estimate = four_stages();
    const mme::ReservedEstimate reserved = [](const mme::StageEstimate& s) -> std::optional<std::int64_t> {
      return s.total_bytes;
    };
    for (const auto& r : mme::compare_memory_log(log, estimate, "train.log", reserved)) {
      if (!(r.measured_max_allocated_gib > 0) || !std::isfinite(r.measured_max_allocated_gib) ||
          !std::isfinite(r.peak_error()))
        mme::fuzz::finding("memory_log", "a compared rank without a positive, finite max allocated");
      for (const auto& e : {r.static_error(), r.reserved_error()})
        if (e && !std::isfinite(*e)) mme::fuzz::finding("memory_log", "an error that is not finite");
    }
    (void)mme::log_comparison_json("train.log", log, mme::compare_memory_log(log, estimate, "train.log"), estimate);
  });
  return 0;
}
