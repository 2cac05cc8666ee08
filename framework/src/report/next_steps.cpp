#include "mme/report/next_steps.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>

#include <fmt/core.h>

#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>

namespace mme::cli {

std::int64_t layout_gpu_multiple(const ParallelLayout& p) {
  // Each size is at most 2^20 (the flags' bound), so the products of three fit.
  for (const std::int64_t v : {p.tp, p.pp, p.cp, p.ep, effective_etp(p)})
    if (v <= 0 || v > kMaxParallelSize) return 0;
  const std::int64_t dense = p.tp * p.pp * p.cp;
  const std::int64_t expert = effective_etp(p) * p.ep * p.pp;
  std::int64_t lcm = 0;
  if (__builtin_mul_overflow(dense / std::gcd(dense, expert), expert, &lcm) || lcm > kMaxWorldSize) return 0;
  return lcm;
}

std::vector<NextStep> next_steps(const ModelSpec& model, const TrainingSetup& base, const HardwareProfile* gpu,
                                 const std::string& model_name, const Registry& registry,
                                 const std::vector<const HardwareProfile*>& gpus, double headroom, bool on_bound,
                                 std::int64_t reserved) {
  const auto& bp = base.parallel;
  std::int64_t experts = 0;
  for (const auto& l : model.layers) experts = std::max(experts, l.mlp.num_experts);
  struct Change {
    std::string flags;
    std::function<void(TrainingSetup&)> apply;
  };
  std::vector<Change> singles;
  auto full = [](TrainingSetup& s) {
    s.recompute = RecomputeSettings{};
    s.recompute.granularity = RecomputeGranularity::kFull;
  };
  if (base.recompute.granularity == RecomputeGranularity::kNone)
    singles.push_back({"--recompute-granularity selective",
                       [](TrainingSetup& s) { s.recompute.granularity = RecomputeGranularity::kSelective; }});
  if (experts > 0 && bp.ep * 2 <= experts && experts % (bp.ep * 2) == 0)
    singles.push_back({fmt::format("--ep {}", bp.ep * 2), [](TrainingSetup& s) { s.parallel.ep *= 2; }});
  if (base.recompute.granularity != RecomputeGranularity::kFull)
    singles.push_back({"--recompute-granularity full", full});
  if (base.pipeline.layout.empty() && bp.vpp == 1 && bp.pp * 2 <= model.num_layers) {
    const std::int64_t p = bp.pp * 2, L = model.num_layers;
    std::string flags = fmt::format("--pp {}", p);
    std::optional<std::int64_t> last;
    if (L % p != 0) {
      last = L - (L / p) * (p - 1);
      flags += fmt::format(" --num-layers-in-last-pipeline-stage {}", *last);
    }
    singles.push_back({flags, [p, last](TrainingSetup& s) {
                         s.parallel.pp = p;
                         s.pipeline.first_stage_layers.reset();
                         s.pipeline.last_stage_layers = last;
                       }});
  }
  if (bp.tp * 2 <= 8)
    singles.push_back({fmt::format("--tp {}", bp.tp * 2), [](TrainingSetup& s) { s.parallel.tp *= 2; }});
  if (base.micro_batch_size > 1)
    singles.push_back({fmt::format("--micro-batch-size {}", base.micro_batch_size / 2),
                       [](TrainingSetup& s) { s.micro_batch_size /= 2; }});
  if (!base.optimizer.distributed)
    singles.push_back({"--use-distributed-optimizer", [](TrainingSetup& s) { s.optimizer.distributed = true; }});

  const Estimator estimator(model, registry);
  EstimateOptions eo;
  eo.components = false;
  if (gpu) eo.compute_capability = gpu->compute_capability;
  // Runs one candidate; the GPU count grows to the smallest multiple the new layout allows.
  auto attempt = [&](const std::string& flags, const std::function<void(TrainingSetup&)>& apply,
                     std::vector<NextStep>& out) {
    TrainingSetup s = base;
    apply(s);
    std::string text = flags;
    const std::int64_t need = layout_gpu_multiple(s.parallel);
    if (need > 0 && s.parallel.world_size % need != 0) {
      std::int64_t world = 0;
      if (__builtin_mul_overflow(s.parallel.world_size / std::gcd(s.parallel.world_size, need), need, &world) ||
          world > kMaxWorldSize)
        return;
      s.parallel.world_size = world;
      text += fmt::format(" --num-gpus {}", world);
    }
    try {
      const Estimate e = estimator.run(s, eo);
      for (const auto* g : gpus) {
        const FitVerdict v = judge_fit(e, *g, headroom, on_bound, reserved);
        if (v.fits) {
          out.push_back({text, v.needed_bytes, g->name});
          return;
        }
      }
    } catch (const Error&) {
      // A layout Megatron refuses is no advice.
    }
  };
  std::vector<NextStep> out;
  for (const auto& c : singles) {
    attempt(c.flags, c.apply, out);
    if (out.size() == 3) break;
  }
  if (out.empty() && base.recompute.granularity != RecomputeGranularity::kFull)
    for (const auto& c : singles) {
      if (c.flags.rfind("--recompute-granularity", 0) == 0) continue;
      attempt(
          "--recompute-granularity full " + c.flags,
          [&](TrainingSetup& s) {
            full(s);
            c.apply(s);
          },
          out);
      if (out.size() == 3) break;
    }
  if (out.empty())
    out.push_back({fmt::format("no single change tried fits; `mme plan {} --num-gpus {}{}` searches every layout",
                               shell_quote(model_name), bp.world_size,
                               gpus.size() == 1 ? " --gpu " + shell_quote(gpus.front()->name) : std::string()),
                   0, ""});
  return out;
}

}  // namespace mme::cli
