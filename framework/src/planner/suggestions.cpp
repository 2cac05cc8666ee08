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

}  // namespace mme
