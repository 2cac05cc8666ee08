// When no layout fits: the smallest changes that would make one fit (docs/planner.md, "When
// nothing fits"), each checked with a search of the cheapest variants that stops at the first fit.
#include <algorithm>
#include <functional>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

#include "planner/planner_internal.hpp"

namespace mme {

std::vector<PlanSuggestion> Planner::suggest(const PlanOptions& o) const {
  const auto& im = *impl_;
  im.check_options(o);
  PlanOptions quiet = o;
  quiet.on_valid = nullptr;
  quiet.progress = nullptr;
  // Does any layout fit? Its cheapest variant (smallest micro-batch, the most frugal recompute
  // tried) fits whenever any variant does, so only those are searched, up to the first fit.
  auto cheapest = [](PlanOptions c) {
    c.micro_batch_sizes = {*std::min_element(c.micro_batch_sizes.begin(), c.micro_batch_sizes.end())};
    c.recompute = {*std::max_element(c.recompute.begin(), c.recompute.end())};  // none < selective < full
    c.top_k = 1;
    return c;
  };
  auto feasible = [&](const PlanOptions& c) {
    try {
      return im.search(cheapest(c), true).fitting > 0;
    } catch (const LayoutError&) {
      return false;
    }
  };
  std::vector<PlanSuggestion> out;
  // Once a change is known to make a layout fit: the best of those cheapest variants (a full
  // `plan` with the change ranks every variant).
  auto add = [&](std::string change, const PlanOptions& changed) {
    const PlanOptions c = cheapest(changed);
    const PlanResult r = im.search(c, false);
    if (r.plans.empty()) return;
    PlanSuggestion s;
    s.change = std::move(change);
    s.args = args_for(r.plans.front().layout, c);
    s.plan = r.plans.front();
    out.push_back(std::move(s));
  };
  // The smallest k in [1, max_k] with fits(k), for a predicate that holds from some k on.
  auto smallest = [](int max_k, const std::function<bool(int)>& fits) -> int {
    if (max_k < 1 || !fits(max_k)) return 0;
    int lo = 1, hi = max_k;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (fits(mid))
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  };
  auto more_gpus = [&](const PlanOptions& base, int k) {
    PlanOptions c = base;
    c.num_gpus = o.num_gpus << k;
    return c;
  };
  auto shorter = [&](const PlanOptions& base, int k) {
    PlanOptions c = base;
    c.base.seq_length = o.base.seq_length >> k;
    return c;
  };
  int max_doublings = 0;
  while (max_doublings < 6 && o.num_gpus <= (std::int64_t{1} << 40) >> (max_doublings + 1)) ++max_doublings;
  int max_halvings = 0;
  while ((o.base.seq_length >> max_halvings) % 2 == 0 && (o.base.seq_length >> (max_halvings + 1)) >= 64)
    ++max_halvings;

  // One change at a time, on top of what was asked.
  auto single_changes = [&](const PlanOptions& base, const std::string& prefix) {
    if (int k = smallest(max_doublings, [&](int x) { return feasible(more_gpus(base, x)); }))
      add(prefix + fmt::format("--num-gpus {}", o.num_gpus << k), more_gpus(base, k));
    if (int k = smallest(max_halvings, [&](int x) { return feasible(shorter(base, x)); }))
      add(prefix + fmt::format("--seq-length {}", o.base.seq_length >> k), shorter(base, k));
  };
  const bool has_full = std::find(o.recompute.begin(), o.recompute.end(), RecomputeVariant::kFull) != o.recompute.end();
  const bool has_one =
      std::find(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end(), 1) != o.micro_batch_sizes.end();
  PlanOptions frugal = quiet;
  std::string frugal_change;
  if (!has_full) {
    frugal.recompute.push_back(RecomputeVariant::kFull);
    std::string list;
    for (auto v : frugal.recompute) list += fmt::format("{}{}", list.empty() ? "" : ",", to_string(v));
    const std::string change = "--recompute " + list;
    frugal_change += change + " ";
    if (feasible(frugal)) add(change, frugal);
  }
  if (!has_one) {
    PlanOptions c = quiet;
    c.micro_batch_sizes.insert(c.micro_batch_sizes.begin(), 1);
    frugal.micro_batch_sizes.insert(frugal.micro_batch_sizes.begin(), 1);
    std::string list;
    for (auto b : c.micro_batch_sizes) list += fmt::format("{}{}", list.empty() ? "" : ",", b);
    const std::string change = "--micro-batch-size " + list;
    frugal_change += change + " ";
    if (feasible(c)) add(change, c);
  }
  if (!out.empty()) return out;
  single_changes(quiet, "");
  if (out.empty() && !frugal_change.empty()) {
    if (feasible(frugal))
      add(frugal_change.substr(0, frugal_change.size() - 1), frugal);
    else
      single_changes(frugal, frugal_change);
  }
  return out;
}

GpuCountResult Planner::gpu_counts(const PlanOptions& options, std::size_t counts, std::int64_t max_gpus) const {
  const auto& im = *impl_;
  PlanOptions o = options;
  o.num_gpus = 1;
  im.check_options(o);
  PlanOptions quiet = o;
  quiet.on_valid = nullptr;
  quiet.progress = nullptr;
  quiet.base.global_batch_size = 0;  // a fit does not depend on the batch
  // The cheapest variants fit whenever any does (as suggest() searches them).
  quiet.micro_batch_sizes = {*std::min_element(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end())};
  quiet.recompute = {*std::max_element(o.recompute.begin(), o.recompute.end())};
  quiet.top_k = 1;
  GpuCountResult out;
  auto fits = [&](std::int64_t n) {
    out.tried.push_back(n);
    PlanOptions c = quiet;
    c.num_gpus = n;
    try {
      return im.search(c, true).fitting > 0;
    } catch (const LayoutError&) {
      return false;
    }
  };
  std::int64_t low = 0, high = 0;
  for (std::int64_t n = 1; n <= max_gpus; n *= 2) {
    if (fits(n)) {
      high = n;
      break;
    }
    low = n;
  }
  if (high == 0) return out;
  // Between the last power of two that does not fit and the first that does, the smallest
  // multiple of a node that fits (a fit grows with the GPU count: more ways to shard).
  const std::int64_t step = std::min<std::int64_t>(8, plan_gpus_per_node(o));
  if (high > 2 * step) {
    std::int64_t lo = low / step, hi = high / step;  // in nodes: lo does not fit, hi does
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (fits(mid * step))
        hi = mid;
      else
        lo = mid;
    }
    high = hi * step;
  }
  out.smallest = high;
  const std::int64_t largest = high << (counts > 0 ? counts - 1 : 0);
  out.global_batch_assumed = o.base.global_batch_size <= 0;
  if (out.global_batch_assumed) {
    const std::int64_t mbs = *std::max_element(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end());
    o.base.global_batch_size = largest * mbs;
  }
  out.global_batch = static_cast<double>(o.base.global_batch_size);
  for (std::size_t i = 0; i < counts; ++i) {
    PlanOptions c = o;
    c.num_gpus = high << i;
    if (c.num_gpus > max_gpus) break;
    GpuCountPlan g;
    g.num_gpus = c.num_gpus;
    try {
      g.result = im.search(c, false);
    } catch (const LayoutError&) {
      continue;  // no layout of this count divides the batch
    }
    out.counts.push_back(std::move(g));
  }
  return out;
}

}  // namespace mme
