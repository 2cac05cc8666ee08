#include "mme/report/next_steps.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

#include <fmt/core.h>

#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/planner/planner.hpp>
#include <mme/sdk/enum_names.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/units.hpp>

namespace mme::cli {

namespace {

// "--recompute-granularity full": the knob's flag and the value's name, as the setup schema has them.
std::string granularity_flag() { return fmt::format("--{}", find_knob("recompute-granularity")->flag); }
std::string granularity_change(RecomputeGranularity g) {
  return fmt::format("{} {}", granularity_flag(), enum_name(kRecomputeGranularityNames, static_cast<int>(g)));
}

}  // namespace

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

std::string next_step_text(const NextStep& s, bool on_bound) {
  if (s.fits_on.empty()) return s.change;
  std::string cost;
  if (s.free)
    cost = "; costs no step time";
  else if (const double percent = 100 * (s.step_ratio - 1); s.step_ratio > 0)
    // Under half a percent either way the rounding would print "+0 %" or "-0 %".
    cost = std::abs(percent) < 0.5 ? std::string("; step time unchanged to within 0.5 % (predicted)")
                                   : fmt::format("; step time {:+.0f} % (predicted)", percent);
  return fmt::format("{} brings the {} to {:.2f} GiB: fits {}{}", s.change, on_bound ? "upper bound" : "peak",
                     to_gib(s.needed_bytes), s.fits_on, cost);
}

nlohmann::json next_step_json(const NextStep& s) {
  nlohmann::json j = {{"change", s.change}, {"needed_bytes", s.needed_bytes}, {"fits", s.fits_on}, {"free", s.free}};
  if (s.step_ratio > 0) j["step_ratio"] = s.step_ratio;
  return j;
}

std::vector<NextStep> next_steps(const ModelSpec& model, const TrainingSetup& base, const HardwareProfile* gpu,
                                 const std::string& model_name, const Registry& registry,
                                 const std::vector<const HardwareProfile*>& gpus, double headroom, bool on_bound,
                                 std::int64_t reserved, std::optional<std::int64_t> base_needed) {
  const auto& bp = base.parallel;
  std::int64_t experts = 0;
  for (const auto& l : model.layers) experts = std::max(experts, l.mlp.num_experts);
  struct Change {
    std::string flags;
    std::function<void(TrainingSetup&)> apply;
    bool free = false;
  };
  std::vector<Change> singles;
  auto full = [](TrainingSetup& s) {
    s.recompute = RecomputeSettings{};
    s.recompute.granularity = RecomputeGranularity::kFull;
  };
  // What costs nothing: sequence parallelism splits what TP replicates (the same collectives'
  // bytes as all-reduces, in two halves), the distributed optimizer shards what DP replicates,
  // and the account-for splits move a layer off the stages that carry the embedding and the loss.
  if (bp.tp > 1 && !sequence_parallel_on(bp))
    singles.push_back({"--sequence-parallel", [](TrainingSetup& s) { s.parallel.sequence_parallel = true; }, true});
  if (!base.optimizer.distributed)
    singles.push_back({"--use-distributed-optimizer", [](TrainingSetup& s) { s.optimizer.distributed = true; }, true});
  const PipelineSplit& ps = base.pipeline;
  if (bp.pp > 1 && ps.layout.empty() && !ps.first_stage_layers && !ps.last_stage_layers && !ps.account_for_embedding &&
      !ps.account_for_loss)
    singles.push_back({"--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
                       [](TrainingSetup& s) {
                         s.pipeline.account_for_embedding = true;
                         s.pipeline.account_for_loss = true;
                       },
                       true});
  // What costs step time.
  if (base.recompute.granularity == RecomputeGranularity::kNone)
    singles.push_back({granularity_change(RecomputeGranularity::kSelective),
                       [](TrainingSetup& s) { s.recompute.granularity = RecomputeGranularity::kSelective; }});
  if (base.fsdp.kind == FsdpKind::kNone && bp.world_size > bp.tp * bp.pp * bp.cp)
    singles.push_back(
        {"--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params", [](TrainingSetup& s) {
           s.fsdp.kind = FsdpKind::kMegatron;
           s.fsdp.strategy = FsdpSharding::kOptimGradsParams;
         }});
  if (base.optimizer.cpu_offload_fraction < 1 && base.fsdp.kind == FsdpKind::kNone)
    singles.push_back(
        {"--optimizer-cpu-offload-fraction 1", [](TrainingSetup& s) { s.optimizer.cpu_offload_fraction = 1; }});
  if (experts > 0 && bp.ep * 2 <= experts && experts % (bp.ep * 2) == 0)
    singles.push_back({fmt::format("--ep {}", bp.ep * 2), [](TrainingSetup& s) { s.parallel.ep *= 2; }});
  if (base.recompute.granularity != RecomputeGranularity::kFull)
    singles.push_back({granularity_change(RecomputeGranularity::kFull), full});
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
                         s.pipeline.account_for_embedding = s.pipeline.account_for_loss = false;
                       }});
  }
  if (bp.tp * 2 <= 8)
    singles.push_back({fmt::format("--tp {}", bp.tp * 2), [](TrainingSetup& s) { s.parallel.tp *= 2; }});
  if (base.micro_batch_size > 1)
    singles.push_back({fmt::format("--micro-batch-size {}", base.micro_batch_size / 2),
                       [](TrainingSetup& s) { s.micro_batch_size /= 2; }});

  const Estimator estimator(model, registry);
  EstimateOptions eo;
  eo.components = false;
  if (gpu) eo.compute_capability = gpu->compute_capability;
  // The step-time model prices each change on the GPU it fits (planner/cost_model.cpp).
  const Planner planner(model, registry);
  std::map<const HardwareProfile*, double> base_step;
  auto step_seconds = [&](const TrainingSetup& s, const HardwareProfile& hw) -> double {
    PlanOptions po;
    po.gpu = &hw;
    po.recipe_overlaps = false;  // the setup's own overlaps
    try {
      return planner.score_setup(s, po).step_seconds;
    } catch (const Error&) {
      return 0;
    }
  };
  struct Tried {
    NextStep step;
    double cost_per_gib = 0;  // (ratio - 1) per GiB saved; free ones first
  };
  // judge_fit's device rule: no headroom or reserved bytes given, and the estimate replays the allocator.
  const bool device_rule = headroom < 0 && reserved < 0 && eo.device_memory;
  if (!base_needed) {
    try {
      base_needed = judge_fit(estimator.run(base, eo), *gpus.front(), headroom, on_bound, reserved).needed_bytes;
    } catch (const Error&) {
    }
  }
  // Runs one candidate; the GPU count grows to the smallest multiple the new layout allows.
  auto attempt = [&](const Change& c, std::vector<Tried>& out) {
    TrainingSetup s = base;
    c.apply(s);
    std::string text = c.flags;
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
      // The allocator replay (the device total) costs milliseconds where the rest costs
      // microseconds, so a candidate is first estimated without it. Under the headroom rule the
      // verdict does not read the device total at all; under the device rule the device total is
      // at least the point estimate's peak (device_memory.cpp add_device_memory: the reserved
      // bytes are at least the stage's total), so a peak above every GPU's capacity cannot fit.
      EstimateOptions lean = eo;
      lean.device_memory = false;
      Estimate e = estimator.run(s, lean);
      if (device_rule) {
        const std::int64_t floor = e.peak().total_bytes;
        if (std::none_of(gpus.begin(), gpus.end(), [&](const auto* g) { return floor <= g->memory_bytes; })) return;
        e = estimator.run(s, eo);
      }
      for (const auto* g : gpus) {
        const FitVerdict v = judge_fit(e, *g, headroom, on_bound, reserved);
        if (!v.fits) continue;
        Tried t;
        t.step = {text, v.needed_bytes, g->name, c.free, 0};
        if (!c.free) {
          if (!base_step.count(g)) base_step[g] = step_seconds(base, *g);
          const double before = base_step[g], after = step_seconds(s, *g);
          if (before > 0 && after > 0) t.step.step_ratio = after / before;
          const double saved = std::max(1.0, to_gib(base_needed.value_or(0) - v.needed_bytes));
          t.cost_per_gib = t.step.step_ratio > 0 ? std::max(0.0, t.step.step_ratio - 1) / saved : 1e9;
        }
        out.push_back(std::move(t));
        return;
      }
    } catch (const Error&) {
      // A layout Megatron refuses is no advice.
    }
  };
  std::vector<Tried> tried;
  for (const auto& c : singles) attempt(c, tried);
  if (tried.empty() && base.recompute.granularity != RecomputeGranularity::kFull)
    for (const auto& c : singles) {
      if (c.flags.rfind(granularity_flag(), 0) == 0) continue;
      attempt({granularity_change(RecomputeGranularity::kFull) + " " + c.flags,
               [&](TrainingSetup& s) {
                 full(s);
                 c.apply(s);
               },
               false},
              tried);
    }
  // Free first (in the order above), then by cost per GiB saved; ties keep the order above.
  std::stable_sort(tried.begin(), tried.end(), [](const Tried& a, const Tried& b) {
    if (a.step.free != b.step.free) return a.step.free;
    return a.cost_per_gib < b.cost_per_gib;
  });
  std::vector<NextStep> out;
  for (const Tried& t : tried) {
    if (out.size() == 4) break;
    out.push_back(t.step);
  }
  if (out.empty())
    out.push_back({fmt::format("no single change tried fits; `mme plan {} --num-gpus {}{}` searches every layout",
                               shell_quote(model_name), bp.world_size,
                               gpus.size() == 1 ? " --gpu " + shell_quote(gpus.front()->name) : std::string()),
                   0, "", false, 0});
  return out;
}

}  // namespace mme::cli
