// The planner's search (docs/planner.md, "How the search runs"): slices of the search space are
// judged on a pool of threads (ordered_parallel_map), each worker keeping its own top K (one plan
// per group of near-duplicates); the results are merged under a total order whose last key is
// the enumeration ordinal, so the output never depends on the number of threads. Without
// streaming, the variants of a layout that cannot change the result are judged without the
// engine: all of them when its weights, gradients and optimizer state alone exceed the GPU, the
// smaller micro-batches of a fitting one when their score cannot enter the top K.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include <fmt/core.h>

#include "mme/engine/fit.hpp"
#include "mme/sdk/error.hpp"

#include "planner/ordered_parallel_map.hpp"
#include "planner/planner_internal.hpp"

namespace mme {

using namespace planning;

namespace planning {

// The one place the planner asks the engine: the stages that may set the peak or the bound
// (estimate_peak_stages; the same figures as Estimator::run). Throws what Estimator::run throws
// (LayoutError for a layout Megatron rejects).
EngineResult engine_estimate(const Estimator& estimator, const TrainingSetup& setup, const EstimateOptions& options) {
  const Estimate e = estimate_peak_stages(estimator, setup, options);
  EngineResult r;
  r.peak_bytes = e.peak().total_bytes;
  r.upper_bytes = std::max(e.upper_bytes(), r.peak_bytes);
  for (const auto& st : e.stages)
    r.static_floor_bytes = std::max(r.static_floor_bytes, st.weight_bytes + st.gradient_bytes + st.optimizer_bytes);
  return r;
}

}  // namespace planning

namespace {

// The total order of plans: the sort key, then score, headroom and enumeration order.
struct Better {
  PlanSortKey key;
  bool operator()(const Plan& a, const Plan& b) const {
    switch (key) {
      case PlanSortKey::kScore: break;
      case PlanSortKey::kPeak:
        if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
        break;
      case PlanSortKey::kBubble:
        if (a.score.bubble != b.score.bubble) return a.score.bubble < b.score.bubble;
        break;
      case PlanSortKey::kCommunication:
        if (a.score.communication_seconds != b.score.communication_seconds)
          return a.score.communication_seconds < b.score.communication_seconds;
        break;
    }
    if (a.score.score != b.score.score) return a.score.score > b.score.score;
    if (a.headroom_bytes != b.headroom_bytes) return a.headroom_bytes > b.headroom_bytes;
    return a.ordinal < b.ordinal;
  }
};

// The best `k` plans, one per group of near-duplicates: layouts with the same sizes, micro-batch,
// recompute and middle stages whose first/last stages share the layers differently but give the
// same peak, bound and score (the peak and the slowest stage are elsewhere). A group is kept as
// its best member, so the result is the top k of the groups, whatever the order plans come in.
class TopPlans {
 public:
  TopPlans(std::size_t k, Better better) : k_(k), kept_(better) {}
  // groups_ holds iterators into kept_: a copy would point into the original.
  TopPlans(const TopPlans&) = delete;
  TopPlans& operator=(const TopPlans&) = delete;
  std::size_t size() const { return kept_.size(); }
  bool full() const { return kept_.size() >= k_; }
  const Plan& worst() const { return *kept_.rbegin(); }
  void offer(const Plan& plan) {
    const Key key = key_of(plan);
    if (const auto g = groups_.find(key); g != groups_.end()) {
      if (!kept_.key_comp()(plan, *g->second)) return;
      kept_.erase(g->second);
      g->second = kept_.insert(plan).first;
      return;
    }
    if (full()) {
      if (!kept_.key_comp()(plan, worst())) return;
      groups_.erase(key_of(worst()));
      kept_.erase(std::prev(kept_.end()));
    }
    groups_.emplace(key, kept_.insert(plan).first);
  }
  std::vector<Plan> plans() const { return {kept_.begin(), kept_.end()}; }

 private:
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                         std::int64_t, std::int64_t, RecomputeVariant, std::int64_t, std::int64_t, std::int64_t, double,
                         int, double, std::int64_t>;
  static Key key_of(const Plan& p) {
    const PlanLayout& l = p.layout;
    const PlanKnobs& k = l.knobs;
    // The knobs: -1 when not searched; CUDA graphs off 0, else their scope bits + 1.
    const std::int64_t graphs = !k.cuda_graphs ? -1 : k.cuda_graphs->on ? k.cuda_graphs->modules + 1 : 0;
    return {l.tp,
            l.pp,
            l.vpp,
            l.ep,
            l.etp,
            l.cp,
            l.dp,
            l.micro_batch_size,
            l.recompute,
            l.pp > 2 ? l.middle_stage_layers : 0,
            p.peak_bytes,
            p.upper_bytes,
            p.score.score,
            k.dp_sharding ? static_cast<int>(*k.dp_sharding) : -1,
            k.optimizer_offload_fraction.value_or(-1.0),
            graphs};
  }
  std::size_t k_;
  std::set<Plan, Better> kept_;  // best first; Better is a total order (the ordinal breaks ties)
  std::map<Key, std::set<Plan, Better>::iterator> groups_;
};

// What one worker accumulates.
struct WorkerState {
  std::uint64_t evaluated = 0, estimated = 0, valid = 0, fitting = 0;
  std::vector<Plan> heap;  // stop_at_first_fit: the first fitting plan
  std::optional<TopPlans> top;
  std::optional<Plan> smallest;
  std::uint64_t error_ordinal = UINT64_MAX;
  std::string error;
};

}  // namespace

// One worker's judge: the candidates of a slice in enumeration order, into its WorkerState. Not
// shared between threads; its buffers are reused from slice to slice.
class Planner::Impl::SliceJudge {
 public:
  SliceJudge(const Planner::Impl& im, const PlanOptions& o, const Space& space, const EstimateOptions& eo,
             std::int64_t usable, bool stop_at_first_fit, std::atomic<bool>& stop, WorkerState& st,
             const std::vector<PlanKnobs>& knobs, const std::vector<std::uint8_t>& valid)
      : im_(im),
        o_(o),
        space_(space),
        knobs_(knobs),
        valid_(valid),
        eo_(eo),
        usable_(usable),
        streaming_(static_cast<bool>(o.on_valid)),
        stop_at_first_fit_(stop_at_first_fit),
        stop_(stop),
        st_(st),
        nk_(knobs.size()),
        nm_(o.micro_batch_sizes.size()),
        nr_(o.recompute.size()),
        works_(nk_ * nm_ * nr_),
        costs_(nk_ * nm_ * nr_),
        frugal_(nk_, 0) {
    // Per knob combination, the most frugal recompute variant asked for (none < selective <
    // full) that the engine accepts with it (CUDA graphs refuse full recompute).
    for (std::size_t kc = 0; kc < nk_; ++kc) {
      std::optional<std::size_t> best;
      for (std::size_t ri = 0; ri < nr_; ++ri)
        if (valid_[kc * nr_ + ri] && (!best || o.recompute[ri] > o.recompute[*best])) best = ri;
      if (!best)
        for (std::size_t ri = 1; ri < nr_; ++ri)
          if (o.recompute[ri] > o.recompute[frugal_[kc]]) frugal_[kc] = ri;
      if (best) frugal_[kc] = *best;
    }
    if (!st_.top) st_.top.emplace(o.top_k, Better{o.sort});
  }

  // Judges the slice's candidates; returns every valid one when the search streams them.
  std::vector<Plan> judge(const Slice& sl);

 private:
  void begin_slice(const Slice& sl);
  void order_variants(const SlicePp& spp);
  void pick_first();
  std::size_t index(std::size_t mi, std::size_t ri) const { return (kc_ * nm_ + mi) * nr_ + ri; }
  const SliceCost& cost_of(std::size_t mi, std::size_t ri);
  std::optional<EngineResult> estimate(std::size_t k);
  void judge_split();
  bool could_enter(const Plan& p) const;

  const Planner::Impl& im_;
  const PlanOptions& o_;
  const Space& space_;
  const std::vector<PlanKnobs>& knobs_;     // the knob combinations, in enumeration order
  const std::vector<std::uint8_t>& valid_;  // [combination][recompute]: the engine accepts it
  const EstimateOptions& eo_;
  const std::int64_t usable_;
  const bool streaming_, stop_at_first_fit_;
  std::atomic<bool>& stop_;
  WorkerState& st_;
  const std::size_t nk_, nm_, nr_;
  // The slice being judged, its setups and speed-proxy figures per (micro-batch, recompute).
  const Slice* slice_ = nullptr;
  std::vector<TrainingSetup> works_;             // [combination][micro-batch][recompute]
  std::vector<std::optional<SliceCost>> costs_;  // likewise
  std::vector<std::size_t> frugal_;              // [combination]: its most frugal valid recompute
  // The layout being judged: its PP size's splits, its split, its variants in enumeration order
  // (micro-batch, recompute) and the first ordinal of those variants.
  const PpSplits* splits_ = nullptr;
  std::size_t split_ = 0;
  PlanLayout l_;
  std::uint64_t ordinal_ = 0;
  std::size_t kc_ = 0;      // the knob combination being judged
  std::uint64_t base_ = 0;  // the ordinal of its first variant
  std::vector<std::pair<std::uint32_t, std::uint32_t>> order_;
  std::size_t first_ = 0;            // position of the smallest micro-batch with the frugal recompute
  std::vector<std::size_t> by_mbs_;  // positions in the PP size's micro-batches, by size ascending
  std::vector<Plan> rows_;
  std::string layout_text_;  // the split's --pipeline-model-parallel-layout (pipeline_layout_text), once per split
};

void Planner::Impl::SliceJudge::begin_slice(const Slice& sl) {
  slice_ = &sl;
  l_ = PlanLayout{};
  l_.tp = sl.tp;
  l_.cp = sl.cp;
  l_.ep = sl.ep;
  l_.etp = sl.etp;
  for (kc_ = 0; kc_ < nk_; ++kc_) {
    l_.knobs = knobs_[kc_];
    for (std::size_t mi = 0; mi < nm_; ++mi) {
      for (std::size_t ri = 0; ri < nr_; ++ri) {
        l_.micro_batch_size = o_.micro_batch_sizes[mi];
        l_.recompute = o_.recompute[ri];
        works_[index(mi, ri)] = im_.setup_for(l_, o_);
        costs_[index(mi, ri)].reset();
      }
    }
  }
  kc_ = 0;
  ordinal_ = sl.first_ordinal;
  rows_.clear();
}

const SliceCost& Planner::Impl::SliceJudge::cost_of(std::size_t mi, std::size_t ri) {
  auto& c = costs_[index(mi, ri)];
  if (!c) c = im_.slice_cost(*slice_, o_.micro_batch_sizes[mi], o_.recompute[ri], knobs_[kc_], o_);
  return *c;
}

// Variants of one knob combination in enumeration order; without streaming the most frugal one
// is judged first.
void Planner::Impl::SliceJudge::order_variants(const SlicePp& spp) {
  order_.clear();
  for (auto mi : spp.mbs)
    for (std::size_t ri = 0; ri < nr_; ++ri) order_.emplace_back(mi, static_cast<std::uint32_t>(ri));
  by_mbs_.resize(spp.mbs.size());
  std::iota(by_mbs_.begin(), by_mbs_.end(), std::size_t{0});
  std::sort(by_mbs_.begin(), by_mbs_.end(), [&](std::size_t a, std::size_t b) {
    return o_.micro_batch_sizes[spp.mbs[a]] < o_.micro_batch_sizes[spp.mbs[b]];
  });
}

// The most frugal variant of the current knob combination: its smallest micro-batch with its
// most frugal valid recompute.
void Planner::Impl::SliceJudge::pick_first() {
  const std::size_t frugal = frugal_[kc_];
  first_ = 0;
  for (std::size_t k = 0; k < order_.size(); ++k) {
    const auto [mi, ri] = order_[k];
    const auto [fm, fr] = order_[first_];
    if (ri == frugal && (fr != frugal || o_.micro_batch_sizes[mi] < o_.micro_batch_sizes[fm])) first_ = k;
  }
}

// Whether a fitting plan whose peak is not known yet could enter the top plans: only when the
// keys before the headroom cannot already tell it is worse than the worst kept (then it cannot
// replace a near-duplicate of its own either, which is at least as good).
bool Planner::Impl::SliceJudge::could_enter(const Plan& p) const {
  const TopPlans& top = *st_.top;
  if (!top.full()) return true;
  const Plan& w = top.worst();
  switch (o_.sort) {
    case PlanSortKey::kPeak: return true;
    case PlanSortKey::kBubble:
      if (p.score.bubble != w.score.bubble) return p.score.bubble < w.score.bubble;
      break;
    case PlanSortKey::kCommunication:
      if (p.score.communication_seconds != w.score.communication_seconds)
        return p.score.communication_seconds < w.score.communication_seconds;
      break;
    case PlanSortKey::kScore: break;
  }
  return p.score.score >= w.score.score;
}

// Estimates variant k of the current layout and keeps what it gives (nullopt: the engine
// rejects it).
std::optional<EngineResult> Planner::Impl::SliceJudge::estimate(std::size_t k) {
  const auto [mi, ri] = order_[k];
  TrainingSetup& work = works_[index(mi, ri)];
  apply_pipeline(work, l_, im_.model().mtp_num_layers, &layout_text_);
  l_.micro_batch_size = o_.micro_batch_sizes[mi];
  l_.recompute = o_.recompute[ri];
  ++st_.estimated;
  Plan plan;
  plan.ordinal = base_ + k;
  EngineResult er;
  try {
    er = engine_estimate(im_.estimator, work, eo_);
  } catch (const Error& e) {
    if (e.code() != ExitCode::kBadLayout && e.code() != ExitCode::kBadModel) throw;
    if (plan.ordinal < st_.error_ordinal) {
      st_.error_ordinal = plan.ordinal;
      st_.error = e.what();
    }
    return std::nullopt;
  }
  ++st_.valid;
  plan.layout = l_;
  plan.peak_bytes = er.peak_bytes;
  plan.upper_bytes = er.upper_bytes;
  plan.headroom_bytes = usable_ - plan.upper_bytes;
  plan.fits = plan.headroom_bytes >= 0;
  const bool smallest = !st_.smallest || plan.peak_bytes < st_.smallest->peak_bytes ||
                        (plan.peak_bytes == st_.smallest->peak_bytes && plan.ordinal < st_.smallest->ordinal);
  if (plan.fits || streaming_ || smallest) plan.score = im_.score_of(cost_of(mi, ri), *splits_, split_, l_, o_);
  if (smallest) st_.smallest = plan;
  if (streaming_) rows_.push_back(plan);
  if (plan.fits) {
    ++st_.fitting;
    if (stop_at_first_fit_) {
      st_.heap.push_back(plan);
      stop_ = true;
    } else {
      st_.top->offer(plan);
    }
  }
  return er;
}

// The variants of the current layout (split) without streaming.
void Planner::Impl::SliceJudge::judge_split() {
  const std::size_t group = order_.size();
  // A recompute variant the engine refuses with this knob combination (the probe before the
  // search: CUDA graphs with full recompute, ...) is invalid for every layout: not estimated.
  const std::uint8_t* accepted = &valid_[kc_ * nr_];
  if (!accepted[order_[first_].second]) return;  // the combination refuses every variant
  // The frugal variant first: if weights, gradients and optimizer alone exceed the GPU, no
  // variant of this layout fits, and every accepted one is valid (the enumeration only makes
  // valid layouts).
  const auto head = estimate(first_);
  if (stop_) return;
  if (head && head->static_floor_bytes > usable_) {
    for (std::size_t k = 0; k < group; ++k)
      if (k != first_ && accepted[order_[k].second]) ++st_.valid;
    return;
  }
  // Then each recompute variant from the largest micro-batch down: once one fits, the smaller
  // ones fit too (activations grow with the micro-batch; tests/planner checks it), and they are
  // estimated only if they could enter the top K.
  for (std::size_t ri = 0; ri < nr_ && !stop_; ++ri) {
    bool fits = false;
    for (auto it = by_mbs_.rbegin(); it != by_mbs_.rend() && !stop_; ++it) {
      const std::size_t k = *it * nr_ + ri;
      if (k == first_ || !accepted[ri]) continue;
      if (fits) {
        const auto [mi, r] = order_[k];
        l_.micro_batch_size = o_.micro_batch_sizes[mi];
        l_.recompute = o_.recompute[r];
        Plan plan;
        plan.ordinal = base_ + k;
        plan.score = im_.score_of(cost_of(mi, r), *splits_, split_, l_, o_);
        if (!could_enter(plan)) {
          ++st_.valid;
          ++st_.fitting;
          continue;
        }
      }
      const auto r = estimate(k);
      fits = fits || (r && r->upper_bytes <= usable_);
    }
  }
}

std::vector<Plan> Planner::Impl::SliceJudge::judge(const Slice& sl) {
  begin_slice(sl);
  for (const SlicePp& spp : sl.pps) {
    splits_ = &space_.pp_splits[spp.splits];
    l_.pp = splits_->pp;
    l_.dp = o_.num_gpus / (sl.tp * sl.cp * splits_->pp);
    order_variants(spp);
    const std::size_t inner = order_.size(), group = nk_ * inner;
    for (split_ = 0; split_ < splits_->splits.size(); ++split_, ordinal_ += group) {
      const Split& s = splits_->splits[split_];
      apply_split(l_, s);
      layout_text_ = pipeline_layout_text(l_, im_.model().mtp_num_layers);
      // Ctrl-C (PlanOptions::cancel): the workers stop within a layout's variants.
      if (o_.cancel && o_.cancel->load(std::memory_order_relaxed)) stop_ = true;
      if (stop_) break;
      st_.evaluated += group;
      for (kc_ = 0; kc_ < nk_ && !stop_; ++kc_) {
        l_.knobs = knobs_[kc_];
        base_ = ordinal_ + kc_ * inner;
        if (streaming_) {
          for (std::size_t k = 0; k < inner; ++k) (void)estimate(k);
          continue;
        }
        pick_first();
        judge_split();
      }
      if (stop_) break;
    }
    if (stop_at_first_fit_ && stop_) break;
  }
  return std::move(rows_);
}

// Rejects, before anything is enumerated, base flags that make every layout invalid: the
// engine is asked about the first slices' sizes with PP 1 (up to 16, until one is accepted), with
// each knob combination and recompute variant.
// Only a rejection of every pair is fatal; a rejected pair is counted invalid, and without
// searched knobs its recompute variant is reported (PlanResult::refused_recompute).
// Returns [combination][recompute]: whether the engine accepts the pair.
std::vector<std::uint8_t> Planner::Impl::probe_base(
    const PlanOptions& o, std::string& refusal, const std::vector<Slice>& slices,
    std::vector<std::pair<RecomputeVariant, std::string>>& refused_recompute) const {
  const std::vector<PlanKnobs> knobs = plan_knob_combinations(o);
  const bool searched = knobs.size() > 1 || knobs.front() != PlanKnobs{};
  std::vector<std::uint8_t> valid(knobs.size() * o.recompute.size(), 0);
  std::optional<std::string> first_error;
  EstimateOptions eo;
  eo.compute_capability = o.gpu->compute_capability;
  eo.components = false;
  eo.device_memory = false;  // the planner judges fits on the allocated bound (docs/planner.md)
  // Fits are judged on the upper bound, as `mme estimate` judges them (fit.hpp).
  for (std::size_t kc = 0; kc < knobs.size(); ++kc) {
    for (std::size_t ri = 0; ri < o.recompute.size(); ++ri) {
      const RecomputeVariant rc = o.recompute[ri];
      // The first slices' sizes with PP 1, until one is accepted (a refusal of a few slices' sizes
      // is theirs; the same refusal of the first 16 is the flags').
      std::optional<std::string> refused;
      for (std::size_t si = 0; si < std::min<std::size_t>(slices.size(), 16); ++si) {
        const Slice& first = slices[si];
        PlanLayout l;
        l.tp = first.tp, l.cp = first.cp, l.ep = first.ep, l.etp = first.etp;
        l.micro_batch_size = *std::min_element(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end());
        l.recompute = rc;
        l.pp = 1;
        l.first_stage_layers = l.middle_stage_layers = l.last_stage_layers = model().num_layers;
        l.knobs = knobs[kc];
        TrainingSetup s = setup_for(l, o);
        s.global_batch_size = 0;
        try {
          (void)engine_estimate(estimator, s, eo);
          valid[kc * o.recompute.size() + ri] = 1;
          refused.reset();
          break;
        } catch (const LayoutError& e) {
          if (!refused) refused = e.what();
        }
      }
      if (refused) {
        const std::string message =
            fmt::format("no layout can work with these flags{}: {}",
                        o.recompute.size() > 1 ? fmt::format(" ({} recompute)", to_string(rc)) : "", *refused);
        if (!first_error) first_error = message;
        if (!searched) refused_recompute.emplace_back(rc, *refused);
      }
    }
  }
  if (std::find(valid.begin(), valid.end(), 1) == valid.end()) throw LayoutError(*first_error);
  refusal = first_error.value_or("");
  return valid;
}

PlanResult Planner::Impl::search(const PlanOptions& o, bool stop_at_first_fit) const {
  const auto start = Clock::now();
  const Space space = build_space(o, stop_at_first_fit);
  PlanResult result;
  result.skipped_candidates = space.skipped_candidates;
  result.skipped_slices = space.skipped_slices;
  result.first_skipped = space.first_skipped;
  const HardwareProfile& hw = *o.gpu;
  const std::int64_t usable = usable_memory_bytes(hw, o.headroom_fraction);  // as `mme estimate` judges a fit
  result.usable_bytes = usable;
  if (space.total == 0) return result;
  std::string refusal;  // the engine's reason for the first refused (knobs, recompute) pair
  const std::vector<std::uint8_t> valid = probe_base(o, refusal, space.slices, result.refused_recompute);
  const std::vector<PlanKnobs> knobs = plan_knob_combinations(o);

  unsigned threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, space.slices.size()));
  result.threads = threads;
  EstimateOptions eo;
  eo.compute_capability = hw.compute_capability;
  eo.components = false;
  eo.device_memory = false;  // no allocator replay per layout: fits on the allocated bound (docs/planner.md)
  eo.bound_terms = false;    // the plans show no bound terms
  // Fits are judged on the upper bound, as `mme estimate` judges them (fit.hpp). A layout whose
  // point estimate already exceeds the GPU cannot fit on its bound either: the engine skips the
  // bound's second pass for it.
  eo.bound_pass_up_to_bytes = usable;

  std::atomic<std::uint64_t> done{0};
  std::atomic<bool> stop{false};
  std::vector<WorkerState> states(threads);
  std::vector<SliceJudge> judges;
  judges.reserve(threads);
  for (auto& st : states) judges.emplace_back(*this, o, space, eo, usable, stop_at_first_fit, stop, st, knobs, valid);
  using Rows = std::vector<Plan>;
  const std::function<Rows(unsigned, std::size_t)> work = [&](unsigned worker, std::size_t idx) {
    const Slice& sl = space.slices[idx];
    Rows rows = judges[worker].judge(sl);
    done.fetch_add(sl.count, std::memory_order_relaxed);
    return rows;
  };
  // Streamed rows: every valid layout, in enumeration order, on this thread. At most 4 slices
  // per thread wait in the reorder buffer.
  std::function<void(std::size_t, Rows &&)> emit;
  if (o.on_valid)
    emit = [&](std::size_t, Rows&& rows) {
      for (const Plan& p : rows) o.on_valid(p);
    };
  std::function<void()> tick;
  if (o.progress)
    tick = [&] { o.progress(done.load(), space.total, std::chrono::duration<double>(Clock::now() - start).count()); };
  ordered_parallel_map<Rows>(space.slices.size(), {threads, 4 * static_cast<std::size_t>(threads)}, stop, work, emit,
                             tick);
  if (o.cancel && o.cancel->load()) throw InterruptedError("plan: interrupted");

  std::vector<Plan> all;
  std::uint64_t error_ordinal = UINT64_MAX;
  for (auto& st : states) {
    result.evaluated += st.evaluated;
    result.estimated += st.estimated;
    result.valid += st.valid;
    result.fitting += st.fitting;
    all.insert(all.end(), st.heap.begin(), st.heap.end());
    if (st.top) {
      const auto kept = st.top->plans();
      all.insert(all.end(), kept.begin(), kept.end());
    }
    if (st.smallest &&
        (!result.smallest || st.smallest->peak_bytes < result.smallest->peak_bytes ||
         (st.smallest->peak_bytes == result.smallest->peak_bytes && st.smallest->ordinal < result.smallest->ordinal)))
      result.smallest = st.smallest;
    if (st.error_ordinal < error_ordinal) {
      error_ordinal = st.error_ordinal;
      result.first_error = st.error;
    }
  }
  // Refused pairs are not estimated outside streaming: their reason is the probe's.
  if (result.first_error.empty()) result.first_error = refusal;
  // Near-duplicates found by different workers meet here.
  TopPlans merged(o.top_k, Better{o.sort});
  for (const auto& p : all) merged.offer(p);
  result.plans = merged.plans();
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (o.progress) o.progress(done.load(), space.total, result.elapsed_s);
  return result;
}

}  // namespace mme
