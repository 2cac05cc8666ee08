// The layout planner (docs/planner.md). The search space is built per model: the TP/CP/EP/ETP
// combinations the layer models accept (their validate(), Megatron's divisibility rules), the
// PP splits and VPP sizes that partition the layers, then micro-batch size and recompute.
// Work is cut into slices of fixed (TP, CP, EP, ETP, micro-batch, recompute) whose inner
// loops run over PP, split and VPP; a pool of std::threads takes slices in order, each keeps
// its own top K (one plan per group of near-duplicates), and the results are merged under a
// total order (the enumeration ordinal breaks every tie), so the output never depends on the
// number of threads.
#include "mme/planner/planner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <tuple>
#include <thread>

#include <fmt/core.h>

#include "engine/estimator_internal.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/layer_model.hpp"
#include "mme/engine/pipeline.hpp"
#include "mme/inputs/setup_schema.hpp"

namespace mme {

const char* to_string(RecomputeVariant v) {
  switch (v) {
    case RecomputeVariant::kNone: return "none";
    case RecomputeVariant::kSelective: return "selective";
    case RecomputeVariant::kFull: return "full";
  }
  return "?";
}

RecomputeVariant parse_recompute_variant(std::string_view text) {
  if (text == "none") return RecomputeVariant::kNone;
  if (text == "selective") return RecomputeVariant::kSelective;
  if (text == "full") return RecomputeVariant::kFull;
  throw UsageError(fmt::format("--recompute: unknown variant '{}' (none, selective, full)", text));
}

std::vector<RecomputeVariant> all_recompute_variants() {
  return {RecomputeVariant::kNone, RecomputeVariant::kSelective, RecomputeVariant::kFull};
}

const char* to_string(PlanSortKey k) {
  switch (k) {
    case PlanSortKey::kScore: return "score";
    case PlanSortKey::kPeak: return "peak";
    case PlanSortKey::kBubble: return "bubble";
    case PlanSortKey::kCommunication: return "comm";
  }
  return "?";
}

PlanSortKey parse_plan_sort_key(std::string_view text) {
  if (text == "score") return PlanSortKey::kScore;
  if (text == "peak" || text == "memory" || text == "headroom") return PlanSortKey::kPeak;
  if (text == "bubble") return PlanSortKey::kBubble;
  if (text == "comm" || text == "communication") return PlanSortKey::kCommunication;
  throw UsageError(fmt::format("--sort: unknown key '{}' (score, peak, bubble, comm)", text));
}

std::vector<std::string> setup_to_args(const TrainingSetup& s) { return setup_to_mme_args(s); }

namespace {

using Clock = std::chrono::steady_clock;

// What the planner needs from the engine for one setup.
struct EngineResult {
  std::int64_t peak_bytes = 0;   // the peak stage's total
  std::int64_t upper_bytes = 0;  // the upper bound (what fits are judged on)
  // The largest weight + gradient + optimizer bytes of a stage: a floor of the peak that does
  // not depend on the micro-batch size or recompute (tests/planner checks that it does not).
  std::int64_t static_floor_bytes = 0;
};

// The one place the planner asks the engine. Throws what Estimator::run throws (LayoutError
// for a layout Megatron rejects).
EngineResult engine_estimate(const Estimator& estimator, const TrainingSetup& setup, const EstimateOptions& options) {
  const Estimate e = estimator.run(setup, options);
  EngineResult r;
  r.peak_bytes = e.peak().total_bytes;
  r.upper_bytes = std::max(e.upper_bytes(), r.peak_bytes);
  for (const auto& st : e.stages)
    r.static_floor_bytes = std::max(r.static_floor_bytes, st.weight_bytes + st.gradient_bytes + st.optimizer_bytes);
  return r;
}

std::int64_t gcd64(std::int64_t a, std::int64_t b) { return std::gcd(a, b); }

std::vector<std::int64_t> divisors_up_to(std::int64_t n, std::int64_t limit) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= limit && d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// Divisors of n (n up to 2^62), ascending, at most `limit`.
std::vector<std::int64_t> divisors_of(std::int64_t n, std::int64_t limit) {
  std::vector<std::int64_t> small, large;
  for (std::int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    if (d <= limit) small.push_back(d);
    const std::int64_t e = n / d;
    if (e != d && e <= limit) large.push_back(e);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

// The speed proxy's figures of one layer kind (elements, unsharded), read from the block models'
// single-GPU parameter terms in the engine's layer table.
struct LayerFigures {
  double attn_active = 0;    // attention-block GEMM weights one token uses
  double mlp_active = 0;     // dense MLP, shared experts and router weights one token uses
  double shared_active = 0;  // of which shared experts
  double expert_active = 0;  // routed-expert weights one token uses (top-k)
  double w_tp = 0, w_rep = 0, w_exp = 0;  // weights by shard class
  double core_width = 0;     // heads x (d_qk + d_v): attention-core FLOPs per token and key
  double kv_width = 0;       // K and V elements per token that context parallelism exchanges
  double top_k = 0;
  bool moe = false;
};

// A (split, VPP) of one PP size, with the decoder layers of each type per pipeline rank.
struct Split {
  std::int64_t first = 0, middle = 0, last = 0;
  bool even = true;
  std::int64_t vpp = 1;
};

struct PpSplits {
  std::int64_t pp = 1;
  std::vector<Split> splits;
  std::vector<std::int32_t> counts;  // [split][rank][type]
  std::vector<std::uint8_t> loss;    // [split][rank]: holds the output layer and loss
  std::vector<std::uint8_t> embed;   // [split][rank]: holds the word embedding (first, MTP)
  std::vector<std::int32_t> mtp;     // [split][rank]: MTP depths
};

// A PP size of a slice and the micro-batch sizes whose DP divides the global batch.
struct SlicePp {
  std::uint32_t splits = 0;  // index into Space::pp_splits
  std::vector<std::uint32_t> mbs;  // indices into PlanOptions::micro_batch_sizes
};

// The unit of work: a fixed (TP, CP, EP, ETP). Its candidates run over PP sizes, their splits
// and VPP sizes, then micro-batch sizes and recompute variants: the variants of one layout
// come together because they share its weight, gradient and optimizer bytes.
struct Slice {
  std::int64_t tp = 1, cp = 1, ep = 1, etp = 1;
  bool sequence_parallel = false;  // as the engine resolves the slice's setups
  std::vector<SlicePp> pps;
  std::uint64_t count = 0;
  std::uint64_t first_ordinal = 0;
};

struct Space {
  std::vector<PpSplits> pp_splits;
  std::vector<Slice> slices;
  std::uint64_t total = 0;
};

// Per-slice figures of the speed proxy: seconds per layer of each type and micro-batch.
struct LayerTime {
  double compute = 0, recompute = 0, tp = 0, ep = 0, cp = 0;
  double dense_params = 0, expert_params = 0;  // per rank, the layer's blocks
  double total() const { return compute + recompute + tp + ep + cp; }
};

struct Figures {
  double flops = 0;  // FLOP/s
  double hbm = 0;    // bytes/s
  double link = 0, inter = 0;
  double act_bytes = 2, weight_bytes = 2;
};

struct SliceCost {
  Figures figures;
  double ideal_flops_per_token = 0;  // the whole model, forward and backward
  std::vector<LayerTime> types;
  LayerTime output;  // output layer + loss (last rank)
  LayerTime mtp;     // one MTP depth, its eh_proj and its output head
  CheckedInt vocab_local = 0;  // the padded vocabulary per TP rank (the engine's stage extras)
  double sync_bytes_per_param = 0;
  double p2p_bytes = 0;  // one activation (or its gradient) sent to the next pipeline stage
};

}  // namespace

struct Planner::Impl {
  Estimator estimator;
  const EngineTables& tables;  // the estimator's: its layer kinds and their block models
  std::vector<LayerFigures> figures;  // per layer kind of `tables`
  LayerFigures mtp_figures;           // an MTP layer's (the engine's is_mtp terms)

  explicit Impl(const ModelSpec& model, const Registry& registry)
      : estimator(model, registry), tables(engine_tables(estimator)) {}

  const ModelSpec& model() const { return estimator.model(); }

  TrainingSetup setup_for(const PlanLayout& l, const PlanOptions& o) const;
  Space build_space(const PlanOptions& o, bool allow_empty) const;
  PpSplits build_splits(std::int64_t pp, const PlanOptions& o) const;
  bool blocks_accept(const TrainingSetup& setup, AttentionBackend attention) const;
  SliceCost slice_cost(const Slice& q, std::int64_t mbs, RecomputeVariant rc, const PlanOptions& o) const;
  PlanScore score_of(const SliceCost& c, const PpSplits& ps, std::size_t split, const PlanLayout& l,
                     const PlanOptions& o) const;
  void check_options(const PlanOptions& o) const;
  void probe_base(const PlanOptions& o) const;
  PlanResult search(const PlanOptions& o, bool stop_at_first_fit) const;
};

namespace {

Figures figures_of(const PlanOptions& o) {
  Figures f;
  const auto& hw = *o.gpu;
  double tflops = hw.bf16_tflops;
  if (o.base.precision == Precision::kFP8 && hw.fp8_tflops > 0) tflops = hw.fp8_tflops;
  if (o.base.precision == Precision::kFP32) tflops = hw.bf16_tflops / 2;  // TF32 tensor cores
  f.flops = std::max(tflops, 1e-3) * 1e12;
  f.hbm = std::max(hw.hbm_bandwidth_gbps, 1e-3) * 1e9;
  f.link = std::max(hw.link_bandwidth_gbps, 1e-3) * 1e9;
  f.inter = std::max(o.inter_node_bandwidth_gbps, 1e-3) * 1e9;
  const ElementBytes bytes = element_bytes(o.base);
  f.act_bytes = static_cast<double>(bytes.act);
  // Weights as the GEMMs read them: the parameters' dtype, or under FP8 the 1-byte copies TE
  // casts them to (the engine's other/te_fp8_weight_cache).
  f.weight_bytes = static_cast<double>(bytes.fp8 ? 1 : bytes.param);
  return f;
}

std::int64_t max_tp_of(const PlanOptions& o) { return o.max_tp > 0 ? o.max_tp : o.gpus_per_node; }

// In floating point: GPUs (up to 2^40) x micro-batch (up to 2^24) need not fit in 64 bits.
double nominal_sequences(const PlanOptions& o) {
  if (o.base.global_batch_size > 0) return static_cast<double>(o.base.global_batch_size);
  const std::int64_t largest = *std::max_element(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end());
  return static_cast<double>(o.num_gpus) * static_cast<double>(largest);
}

// a x b x c, or nullopt when it does not fit in 64 bits (then it divides no GPU count).
std::optional<std::int64_t> product3(std::int64_t a, std::int64_t b, std::int64_t c) {
  std::int64_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return std::nullopt;
  return abc;
}

}  // namespace

double plan_global_batch(const PlanOptions& o) { return nominal_sequences(o); }

namespace {

LayerFigures figures_of(const LayerType& lt, const KindParams& kp) {
  LayerFigures f;
  for (const BlockParams* bp : {&kp.attention, &kp.mlp}) {
    for (const auto& term : bp->terms) {
      const auto total = static_cast<double>(term.total);
      const auto active = static_cast<double>(term.active);
      switch (term.shard) {
        case ShardClass::kTensorParallel: f.w_tp += total; break;
        case ShardClass::kReplicated: f.w_rep += total; break;
        case ShardClass::kExpert: f.w_exp += total; break;
      }
      if (term.group == ParamGroup::kNorms) continue;  // no GEMM
      if (term.shard == ShardClass::kExpert) f.expert_active += active;
      else if (bp == &kp.attention) f.attn_active += active;
      else f.mlp_active += active;
      if (term.group == ParamGroup::kSharedExperts) f.shared_active += active;
    }
  }
  f.core_width = lt.core.width;
  f.kv_width = lt.core.kv_width;
  f.moe = lt.moe;
  f.top_k = static_cast<double>(lt.spec.mlp.top_k);
  return f;
}

}  // namespace

Planner::Planner(const ModelSpec& model, const Registry& registry)
    : impl_(std::make_unique<Impl>(model, registry)) {
  auto& im = *impl_;
  for (const LayerType& lt : im.tables.types) im.figures.push_back(figures_of(lt, lt.single_gpu));
  if (im.model().mtp_num_layers > 0)
    im.mtp_figures = figures_of(im.tables.types[im.tables.mtp_type], im.tables.mtp_single_gpu);
}

Planner::~Planner() = default;
Planner::Planner(Planner&&) noexcept = default;
Planner& Planner::operator=(Planner&&) noexcept = default;

const Estimator& Planner::estimator() const { return impl_->estimator; }

namespace {

// The PP size, VPP size and first/last-stage flags of a layout.
void apply_pipeline(TrainingSetup& s, const PlanLayout& l) {
  s.parallel.pp = l.pp;
  s.parallel.vpp = l.vpp;
  s.pipeline.first_stage_layers.reset();
  s.pipeline.last_stage_layers.reset();
  if (l.pp > 1 && !l.even_split) {
    if (l.pp == 2 || l.first_stage_layers != l.middle_stage_layers) s.pipeline.first_stage_layers = l.first_stage_layers;
    if (l.pp == 2 || l.last_stage_layers != l.middle_stage_layers) s.pipeline.last_stage_layers = l.last_stage_layers;
  }
}

}  // namespace

TrainingSetup Planner::Impl::setup_for(const PlanLayout& l, const PlanOptions& o) const {
  TrainingSetup s = o.base;
  auto& p = s.parallel;
  p.tp = l.tp;
  p.ep = l.ep;
  p.etp = l.etp;
  p.cp = l.cp;
  p.world_size = o.num_gpus;
  p.sequence_parallel.reset();  // on with TP > 1
  s.pipeline = PipelineSplit{};
  apply_pipeline(s, l);
  s.micro_batch_size = l.micro_batch_size;
  const std::uint32_t modules = o.base.recompute.modules;
  s.recompute = RecomputeSettings{};
  switch (l.recompute) {
    case RecomputeVariant::kNone: break;
    case RecomputeVariant::kSelective:
      s.recompute.granularity = RecomputeGranularity::kSelective;
      s.recompute.modules = modules;
      break;
    case RecomputeVariant::kFull:
      s.recompute.granularity = RecomputeGranularity::kFull;
      s.recompute.method = RecomputeMethod::kUniform;
      s.recompute.num_layers = 1;
      break;
  }
  s.optimizer.distributed = true;
  return s;
}

TrainingSetup Planner::setup_for(const PlanLayout& layout, const PlanOptions& options) const {
  return impl_->setup_for(layout, options);
}

std::vector<std::string> Planner::args_for(const PlanLayout& layout, const PlanOptions& options) const {
  std::vector<std::string> a = setup_to_args(impl_->setup_for(layout, options));
  if (options.gpu) {
    a.emplace_back("--gpu");
    a.push_back(options.gpu->name);
  }
  if (options.headroom_fraction != kDefaultHeadroom) {
    a.emplace_back("--headroom");
    a.push_back(fmt::format("{}", options.headroom_fraction));
  }
  return a;
}

void Planner::Impl::check_options(const PlanOptions& o) const {
  if (o.num_gpus <= 0) throw UsageError(fmt::format("--num-gpus must be a positive integer, got {}", o.num_gpus));
  if (!o.gpu) throw UsageError("plan needs a GPU profile (--gpu)");
  if (o.micro_batch_sizes.empty()) throw UsageError("--micro-batch-size: give at least one size");
  for (auto b : o.micro_batch_sizes)
    if (b <= 0) throw UsageError(fmt::format("--micro-batch-size: expected positive sizes, got {}", b));
  if (o.recompute.empty()) throw UsageError("--recompute: give at least one variant");
  if (o.gpus_per_node <= 0) throw UsageError("--gpus-per-node must be positive");
  if (o.max_tp < 0) throw UsageError("--max-tp must be positive");
  if (o.headroom_fraction < 0 || o.headroom_fraction >= 1) throw UsageError("--headroom must be in [0, 1)");
  if (o.top_k == 0) throw UsageError("--top must be positive");
  for (const auto* v : {&o.tp, &o.pp, &o.vpp, &o.ep, &o.etp, &o.cp})
    if (*v && **v <= 0) throw UsageError("fixed layout sizes must be positive");
}

PpSplits Planner::Impl::build_splits(std::int64_t p, const PlanOptions& o) const {
  const ModelSpec& m = model();
  const std::int64_t L = m.num_layers;
  PpSplits out;
  out.pp = p;
  std::vector<Split> base;
  if (p == 1) {
    base.push_back({L, L, L, true, 1});
  } else if (p == 2) {
    // Both stages are "first/last": every split with a layer on each.
    if (L % 2 == 0) base.push_back({L / 2, L / 2, L / 2, true, 1});
    for (std::int64_t f = L - 1; f >= 1; --f)
      if (2 * f != L) base.push_back({f, 0, L - f, false, 1});
  } else {
    // Middle stages hold m layers; the first and last stages hold at least one layer and at
    // most c = max(m, ceil(L / p)): never more than the busiest middle stage or the even share.
    const std::int64_t share = (L + p - 1) / p;
    for (std::int64_t mid = 1; mid <= (L - 2) / (p - 2); ++mid) {
      const std::int64_t rest = L - (p - 2) * mid;
      const std::int64_t cap = std::max(mid, share);
      for (std::int64_t f = std::min(cap, rest - 1); f >= std::max<std::int64_t>(1, rest - cap); --f) {
        const std::int64_t l = rest - f;
        base.push_back({f, mid, l, f == mid && l == mid, 1});
      }
    }
  }
  for (const Split& b : base) {
    std::int64_t g = p == 1 ? 1 : p == 2 ? gcd64(b.first, b.last) : gcd64(gcd64(b.first, b.middle), b.last);
    for (std::int64_t v : divisors_up_to(g, g)) {
      if (o.vpp && *o.vpp != v) continue;
      Split s = b;
      s.vpp = v;
      out.splits.push_back(s);
    }
  }
  // Layers of each type per pipeline rank, as the engine partitions them.
  const std::size_t nt = tables.types.size();
  const auto np = static_cast<std::size_t>(p);
  out.counts.assign(out.splits.size() * np * nt, 0);
  out.loss.assign(out.splits.size() * np, 0);
  out.embed.assign(out.splits.size() * np, 0);
  out.mtp.assign(out.splits.size() * np, 0);
  for (std::size_t si = 0; si < out.splits.size(); ++si) {
    const Split& s = out.splits[si];
    PlanLayout l;
    l.pp = p;
    l.vpp = s.vpp;
    l.first_stage_layers = s.first;
    l.middle_stage_layers = s.middle;
    l.last_stage_layers = s.last;
    l.even_split = s.even;
    const TrainingSetup setup = setup_for(l, o);
    ParallelLayout par;
    par.pp = p;
    par.vpp = s.vpp;
    const PipelinePartition part = partition_pipeline(L, m.mtp_num_layers, par, setup.pipeline);
    for (std::int64_t r = 0; r < p; ++r) {
      for (std::int64_t v = 0; v < s.vpp; ++v) {
        const ChunkLayout& c = part.at(r, v);
        const std::size_t rank = si * np + static_cast<std::size_t>(r);
        for (std::size_t ti = 0; ti < nt; ++ti)
          out.counts[rank * nt + ti] += static_cast<std::int32_t>(tables.count_in(ti, c.first_layer, c.num_layers));
        out.loss[rank] |= c.loss ? 1 : 0;
        out.embed[rank] |= c.embedding ? 1 : 0;
        out.mtp[rank] += static_cast<std::int32_t>(c.mtp_layers);
      }
    }
  }
  return out;
}

// Rejects, before anything is enumerated, base flags that make every layout invalid: the
// engine is asked about the simplest layout with each recompute variant.
void Planner::Impl::probe_base(const PlanOptions& o) const {
  EstimateOptions eo;
  eo.compute_capability = o.gpu->compute_capability;
  eo.components = false;
  // Fits are judged on the upper bound, as `mme estimate` judges them (fit.hpp).
  for (RecomputeVariant rc : o.recompute) {
    PlanLayout l;
    l.micro_batch_size = *std::min_element(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end());
    l.recompute = rc;
    l.pp = 1;
    l.first_stage_layers = l.middle_stage_layers = l.last_stage_layers = model().num_layers;
    TrainingSetup s = setup_for(l, o);
    s.global_batch_size = 0;
    try {
      (void)engine_estimate(estimator, s, eo);
    } catch (const LayoutError& e) {
      throw LayoutError(fmt::format("no layout can work with these flags{}: {}",
                                    o.recompute.size() > 1 ? fmt::format(" ({} recompute)", to_string(rc)) : "",
                                    e.what()));
    }
  }
}

Space Planner::Impl::build_space(const PlanOptions& o, bool allow_empty) const {
  check_options(o);
  const ModelSpec& m = model();
  const std::int64_t N = o.num_gpus, L = m.num_layers, seq = o.base.seq_length;
  const std::int64_t max_tp = max_tp_of(o);
  Space sp;

  auto fixed_or = [](const std::optional<std::int64_t>& fixed, std::vector<std::int64_t> values) {
    if (!fixed) return values;
    std::vector<std::int64_t> out;
    for (auto v : values)
      if (v == *fixed) out.push_back(v);
    return out;
  };
  const std::vector<std::int64_t> tps = fixed_or(o.tp, divisors_of(N, max_tp));
  std::vector<std::int64_t> cps;
  for (auto c : fixed_or(o.cp, divisors_of(N, seq)))
    if (seq % c == 0 && (c == 1 || seq % (2 * c) == 0)) cps.push_back(c);
  std::vector<std::int64_t> eps;
  for (auto e : fixed_or(o.ep, divisors_of(N, N))) {
    bool ok = tables.any_moe || e == 1;
    for (const auto& t : tables.types)
      if (t.moe && t.spec.mlp.num_experts % e != 0) ok = false;
    if (ok) eps.push_back(e);
  }
  const std::vector<std::int64_t> etps_all = fixed_or(o.etp, divisors_of(N, max_tp));
  const std::vector<std::int64_t> pps_all = fixed_or(o.pp, divisors_of(N, L));

  // PP splits, per PP size.
  for (auto p : pps_all) {
    PpSplits ps = build_splits(p, o);
    if (ps.splits.empty()) continue;
    sp.pp_splits.push_back(std::move(ps));
  }

  // TP, CP, EP, ETP that the layer models and Megatron's rules accept, judged on the setup of
  // the layout with PP 1, the smallest micro-batch and no recompute (the blocks' rules read none
  // of them; the global batch is left to the micro-batch filter below).
  const std::int64_t min_mbs = *std::min_element(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end());
  // Transformer Engine's attention choice, as Estimator::run makes it (it reads only the
  // backend, the implementation and the environment: the same for every layout).
  const AttentionBackend attention = resolve_attention(o.base, o.gpu->compute_capability).backend;
  for (auto tp : tps) {
    for (auto cp : cps) {
      PlanLayout pl;
      pl.tp = tp;
      pl.cp = cp;
      pl.first_stage_layers = pl.middle_stage_layers = pl.last_stage_layers = L;
      pl.micro_batch_size = min_mbs;
      TrainingSetup probe = setup_for(pl, o);
      probe.global_batch_size = 0;
      // Sequence parallelism (as the setup has it) splits the CP chunk over TP (validate_setup).
      const bool sequence_parallel = sequence_parallel_on(probe.parallel);
      if (sequence_parallel && (seq / cp) % tp != 0) continue;
      for (auto ep : eps) {
        const std::vector<std::int64_t> etps = tables.any_moe ? etps_all : std::vector<std::int64_t>{o.etp.value_or(tp)};
        for (auto etp : etps) {
          Slice q;
          q.tp = tp;
          q.cp = cp;
          q.ep = ep;
          q.etp = etp;
          q.sequence_parallel = sequence_parallel;
          for (std::size_t i = 0; i < sp.pp_splits.size(); ++i) {
            const std::int64_t p = sp.pp_splits[i].pp;
            const auto model_parallel = product3(tp, cp, p), expert_parallel = product3(etp, ep, p);
            if (!model_parallel || !expert_parallel || N % *model_parallel != 0 || N % *expert_parallel != 0) continue;
            SlicePp spp;
            spp.splits = static_cast<std::uint32_t>(i);
            const std::int64_t dp = N / *model_parallel;
            for (std::size_t b = 0; b < o.micro_batch_sizes.size(); ++b) {
              const std::int64_t mbs = o.micro_batch_sizes[b];
              std::int64_t per_step = 0;
              if (o.base.global_batch_size > 0 && (__builtin_mul_overflow(mbs, dp, &per_step) ||
                                                   o.base.global_batch_size % per_step != 0))
                continue;
              spp.mbs.push_back(static_cast<std::uint32_t>(b));
            }
            if (spp.mbs.empty()) continue;
            q.count += sp.pp_splits[i].splits.size() * spp.mbs.size() * o.recompute.size();
            q.pps.push_back(std::move(spp));
          }
          if (q.pps.empty()) continue;
          probe.parallel.ep = ep;
          probe.parallel.etp = etp;
          if (!blocks_accept(probe, attention)) continue;
          q.first_ordinal = sp.total;
          sp.total += q.count;
          sp.slices.push_back(std::move(q));
        }
      }
    }
  }

  if (sp.total == 0 && !allow_empty)
    throw LayoutError(fmt::format(
        "no layout of {} GPUs suits {}: TP (at most {}) must divide the attention heads and query groups, "
        "EP the experts, CP the sequence ({}), PP at most the {} layers, TP x CP x PP and ETP x EP x PP the GPU "
        "count{}",
        N, m.name, max_tp, seq, L,
        o.base.global_batch_size > 0
            ? fmt::format(", and micro-batch x DP the global batch size {}", o.base.global_batch_size)
            : ""));
  return sp;
}

// Whether the block models accept a layout's TP, CP, EP and ETP (heads, query groups, widths,
// CP under the attention backend), asked with the block contexts the engine builds for it. A
// setup the engine rejects as a whole (a base flag) is left to probe_base, which names the flag.
bool Planner::Impl::blocks_accept(const TrainingSetup& setup, AttentionBackend attention) const {
  TrainingSetup resolved;
  try {
    resolved = resolve_pass_setup(model(), setup);
  } catch (const Error& e) {
    if (e.code() != ExitCode::kBadLayout && e.code() != ExitCode::kBadModel) throw;
    return true;
  }
  try {
    validate_blocks(tables, block_layout(model(), resolved, attention, 1.0));
  } catch (const LayoutError&) {
    return false;
  }
  return true;
}

SliceCost Planner::Impl::slice_cost(const Slice& q, std::int64_t mbs, RecomputeVariant rc,
                                    const PlanOptions& o) const {
  const ModelSpec& m = model();
  const Figures f = figures_of(o);
  const double tp = static_cast<double>(q.tp), cp = static_cast<double>(q.cp);
  const double ep = static_cast<double>(q.ep), etp = static_cast<double>(q.etp);
  const double h = static_cast<double>(m.hidden_size);
  const double seq = static_cast<double>(o.base.seq_length);
  const double T = static_cast<double>(mbs) * seq;  // tokens of one micro-batch
  const double Tg = T / (tp * cp);                   // of them, per GPU of a TP x CP group
  const std::int64_t node = o.gpus_per_node;
  const double bw_tp = q.tp <= node ? f.link : f.inter;
  const double bw_cp = q.tp * q.cp <= node ? f.link : f.inter;
  const double bw_ep = q.etp * q.ep <= node ? f.link : f.inter;
  const double bw_etp = q.etp <= node ? f.link : f.inter;
  const bool full = rc == RecomputeVariant::kFull;
  const std::uint32_t modules = rc == RecomputeVariant::kSelective ? o.base.recompute.modules : 0u;
  // Collectives per layer and micro-batch: forward, backward, and the forward again under
  // full recompute.
  const double c_tp = full ? 12 : 8, c_a2a = full ? 6 : 4, c_cp = full ? 4 : 3;
  const double ab = f.act_bytes, wb = f.weight_bytes;

  auto roofline = [&](double flops, double bytes) { return std::max(flops / f.flops, bytes / f.hbm); };
  SliceCost c;
  c.figures = f;
  for (std::size_t i = 0; i < static_cast<std::size_t>(m.num_layers); ++i) {
    const LayerFigures& t = figures[tables.layer_type[i]];
    c.ideal_flops_per_token += 6 * (t.attn_active + t.mlp_active + t.expert_active) + 3 * t.core_width * seq;
  }
  c.ideal_flops_per_token += 6 * h * static_cast<double>(m.vocab_size);
  if (m.mtp_num_layers > 0) {
    const LayerFigures& t = mtp_figures;
    c.ideal_flops_per_token +=
        static_cast<double>(m.mtp_num_layers) * (6 * (t.attn_active + t.mlp_active + t.expert_active) +
                                                 3 * t.core_width * seq + 12 * h * h + 6 * h * static_cast<double>(m.vocab_size));
  }
  auto layer_time = [&](const LayerFigures& t) {
    LayerTime lt;
    const double core = 3 * t.core_width * seq * Tg;  // causal: each token attends to seq/2 keys on average
    const double dense_flops = 6 * (t.attn_active + t.mlp_active) * Tg + core;
    const double dense_bytes = 3 * wb * (t.w_tp / tp + t.w_rep);
    const double exp_flops = 6 * t.expert_active * Tg;
    const double exp_bytes = 3 * wb * t.w_exp / (ep * etp);
    lt.compute = roofline(dense_flops, dense_bytes) + (t.moe ? roofline(exp_flops, exp_bytes) : 0.0);
    if (full) {
      lt.recompute = lt.compute / 3;  // one more forward pass
    } else if (modules != 0) {
      double fwd = 0;
      if (modules & kRecomputeCoreAttn) fwd += core / 3;
      if (modules & kRecomputeMlaUpProj) fwd += 2 * t.attn_active * Tg;
      if (!t.moe && (modules & kRecomputeMlp)) fwd += 2 * t.mlp_active * Tg;
      if (t.moe && (modules & kRecomputeMoe)) fwd += 2 * (t.mlp_active + t.expert_active) * Tg;
      else if (t.moe && (modules & kRecomputeSharedExperts)) fwd += 2 * t.shared_active * Tg;
      lt.recompute = fwd / f.flops;
    }
    if (q.tp > 1) lt.tp = c_tp * (tp - 1) / tp * (T / cp) * h * ab / bw_tp;
    if (t.moe) {
      const double routed = Tg * t.top_k * h * ab;  // token copies a GPU sends to experts
      lt.ep = c_a2a * (ep - 1) / ep * routed / bw_ep + c_a2a * (etp - 1) * routed / bw_etp;
    }
    if (q.cp > 1) lt.cp = c_cp * (cp - 1) * (T / cp) * (t.kv_width / tp) * ab / bw_cp;
    lt.dense_params = t.w_tp / tp + t.w_rep;
    lt.expert_params = t.w_exp / (ep * etp);
    return lt;
  };
  c.types.reserve(figures.size());
  for (const LayerFigures& t : figures) c.types.push_back(layer_time(t));
  // Output layer [V/TP, h] and loss on the last rank; their parameters, and the word
  // embedding's, are the engine's stage extras (score_of).
  const std::int64_t padded = padded_vocab_size(m.vocab_size, o.base.make_vocab_size_divisible_by, q.tp);
  const double vocab = static_cast<double>(padded);
  c.vocab_local = CheckedInt(padded) / q.tp;
  c.output.compute = roofline(6 * h * vocab * Tg, 3 * wb * h * vocab / tp);
  if (q.tp > 1) c.output.tp = 2 * (tp - 1) / tp * (T / cp) * h * ab / bw_tp;
  // An MTP depth: a decoder layer of the last kind, eh_proj [2h -> h] and its own output head.
  if (m.mtp_num_layers > 0) {
    c.mtp = layer_time(mtp_figures);
    c.mtp.compute += roofline(6 * 2 * h * h * Tg, 3 * wb * 2 * h * h / tp) + c.output.compute;
    c.mtp.tp += c.output.tp;
  }
  // The distributed optimizer's gradient reduce-scatter (the gradient buffer's dtype) and
  // parameter all-gather.
  c.sync_bytes_per_param = static_cast<double>(element_bytes(o.base).grad) + wb;
  // p2p_communication.py: [s / CP (/ TP with sequence parallelism), b, h].
  c.p2p_bytes = T / (cp * (q.sequence_parallel ? tp : 1)) * h * ab;
  return c;
}

PlanScore Planner::Impl::score_of(const SliceCost& c, const PpSplits& ps, std::size_t split, const PlanLayout& l,
                                  const PlanOptions& o) const {
  const Figures& f = c.figures;
  const std::size_t nt = figures.size();
  const auto np = static_cast<std::size_t>(ps.pp);
  // The parameters of the embedding, output layer and MTP beyond their layers, with the
  // tied-output rule, as the engine counts them on each stage.
  const StageExtras x = stage_extras(model(), l.tp, l.pp, c.vocab_local);
  const auto embedding_params = static_cast<double>(x.embedding.dense().value());
  const auto loss_params = static_cast<double>(x.loss.dense().value());
  const auto mtp_params = c.mtp.dense_params + static_cast<double>(x.mtp_depth.dense().value());
  const std::int32_t* counts = &ps.counts[split * np * nt];
  const std::int64_t N = o.num_gpus;
  const double dcp = static_cast<double>(l.dp * l.cp);
  const double edp = static_cast<double>(N / (l.etp * l.ep * l.pp));
  const double bw_dp = N / l.pp <= o.gpus_per_node ? f.link : f.inter;

  double worst = -1, worst_dp = 0;
  std::size_t worst_rank = 0;
  for (std::size_t r = 0; r < np; ++r) {
    const std::int32_t* cr = counts + r * nt;
    double t = 0, dense = 0, expert = 0;
    for (std::size_t i = 0; i < nt; ++i) {
      const double n = cr[i];
      t += n * c.types[i].total();
      dense += n * c.types[i].dense_params;
      expert += n * c.types[i].expert_params;
    }
    const std::size_t ri = split * np + r;
    if (ps.loss[ri]) {
      t += c.output.total();
      dense += loss_params;
    }
    if (ps.embed[ri]) dense += embedding_params;
    if (ps.mtp[ri] > 0) {
      t += ps.mtp[ri] * c.mtp.total();
      dense += ps.mtp[ri] * mtp_params;
      expert += ps.mtp[ri] * c.mtp.expert_params;
    }
    if (t > worst) {
      worst = t;
      worst_rank = r;
    }
    const double sync = ((dcp - 1) / dcp * dense + (edp - 1) / edp * expert) * c.sync_bytes_per_param / bw_dp;
    worst_dp = std::max(worst_dp, sync);
  }
  PlanScore s;
  const double p = static_cast<double>(l.pp), v = static_cast<double>(l.vpp);
  // Each virtual chunk sends its output forward and receives the gradient back: 2 v transfers
  // per micro-batch; neighbouring stages are N / PP ranks apart, in one node only if N fits.
  if (l.pp > 1) s.pp_seconds = 2 * v * c.p2p_bytes / (N <= o.gpus_per_node ? f.link : f.inter);
  worst += s.pp_seconds;
  const double sequences = nominal_sequences(o);
  s.micro_batches = sequences / (static_cast<double>(l.micro_batch_size) * static_cast<double>(l.dp));
  s.bubble = (p - 1) / (s.micro_batches * v + p - 1);
  s.stage_seconds = worst;
  // The breakdown of the slowest rank.
  {
    const std::int32_t* cr = counts + worst_rank * nt;
    const std::size_t ri = split * np + worst_rank;
    auto add = [&s](const LayerTime& lt, double n) {
      s.compute_seconds += n * lt.compute;
      s.recompute_seconds += n * lt.recompute;
      s.tp_seconds += n * lt.tp;
      s.ep_seconds += n * lt.ep;
      s.cp_seconds += n * lt.cp;
    };
    for (std::size_t i = 0; i < nt; ++i) add(c.types[i], cr[i]);
    if (ps.loss[ri]) add(c.output, 1);
    if (ps.mtp[ri] > 0) add(c.mtp, ps.mtp[ri]);
  }
  const double slots = s.micro_batches + (p - 1) / v;
  s.dp_seconds = worst_dp;
  s.step_seconds = slots * worst + worst_dp;
  // The same work with no bubble, recompute, communication or memory-bound GEMM.
  s.ideal_seconds = sequences * static_cast<double>(o.base.seq_length) * c.ideal_flops_per_token /
                    (static_cast<double>(N) * f.flops);
  s.score = s.step_seconds > 0 ? s.ideal_seconds / s.step_seconds : 0;
  s.communication_seconds = slots * (s.tp_seconds + s.ep_seconds + s.cp_seconds + s.pp_seconds) + s.dp_seconds;
  return s;
}

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
                         std::int64_t, std::int64_t, RecomputeVariant, std::int64_t, std::int64_t, std::int64_t, double>;
  static Key key_of(const Plan& p) {
    const PlanLayout& l = p.layout;
    return {l.tp, l.pp, l.vpp, l.ep, l.etp, l.cp, l.dp, l.micro_batch_size, l.recompute, l.pp > 2 ? l.middle_stage_layers : 0,
            p.peak_bytes, p.upper_bytes, p.score.score};
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

PlanResult Planner::Impl::search(const PlanOptions& o, bool stop_at_first_fit) const {
  const auto start = Clock::now();
  const Space space = build_space(o, stop_at_first_fit);
  PlanResult result;
  const HardwareProfile& hw = *o.gpu;
  const std::int64_t usable = usable_memory_bytes(hw, o.headroom_fraction);  // as `mme estimate` judges a fit
  result.usable_bytes = usable;
  if (space.total == 0) return result;
  probe_base(o);

  unsigned threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, space.slices.size()));
  result.threads = threads;
  const bool streaming = static_cast<bool>(o.on_valid);
  const Better better{o.sort};
  EstimateOptions eo;
  eo.compute_capability = hw.compute_capability;
  eo.components = false;
  // Fits are judged on the upper bound, as `mme estimate` judges them (fit.hpp). A layout whose
  // point estimate already exceeds the GPU cannot fit on its bound either: the engine skips the
  // bound's second pass for it.
  eo.bound_pass_up_to_bytes = usable;

  std::atomic<std::size_t> next_slice{0};
  std::atomic<std::uint64_t> done{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv_main, cv_workers;
  // Streamed rows: finished slices wait here until every earlier one has been handed out.
  std::map<std::size_t, std::vector<Plan>> ready;
  std::size_t next_emit = 0;
  const std::size_t window = 4 * static_cast<std::size_t>(threads);
  std::exception_ptr failure;
  std::vector<WorkerState> states(threads);
  unsigned running = threads;

  auto worker = [&](WorkerState& st) {
    const std::size_t nm = o.micro_batch_sizes.size(), nr = o.recompute.size();
    // The most frugal recompute variant asked for (none < selective < full).
    std::size_t frugal_rc = 0;
    for (std::size_t ri = 1; ri < nr; ++ri)
      if (o.recompute[ri] > o.recompute[frugal_rc]) frugal_rc = ri;
    std::vector<TrainingSetup> works(nm * nr);
    std::vector<std::optional<SliceCost>> costs(nm * nr);
    std::vector<Plan> rows;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> order;
    std::vector<std::size_t> by_mbs;
    if (!st.top) st.top.emplace(o.top_k, better);
    // Whether a fitting plan whose peak is not known yet could enter the top plans: only when
    // the keys before the headroom cannot already tell it is worse than the worst kept (then it
    // cannot replace a near-duplicate of its own either, which is at least as good).
    auto could_enter = [&](const TopPlans& top, const Plan& p) {
      if (!top.full()) return true;
      const Plan& w = top.worst();
      switch (o.sort) {
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
    };
    try {
      for (;;) {
        if (stop.load(std::memory_order_relaxed)) break;
        const std::size_t idx = next_slice.fetch_add(1);
        if (idx >= space.slices.size()) break;
        if (streaming) {
          std::unique_lock<std::mutex> lock(mu);
          cv_workers.wait(lock, [&] { return idx < next_emit + window || stop.load(); });
        }
        const Slice& sl = space.slices[idx];
        PlanLayout l;
        l.tp = sl.tp;
        l.cp = sl.cp;
        l.ep = sl.ep;
        l.etp = sl.etp;
        for (std::size_t mi = 0; mi < nm; ++mi) {
          for (std::size_t ri = 0; ri < nr; ++ri) {
            l.micro_batch_size = o.micro_batch_sizes[mi];
            l.recompute = o.recompute[ri];
            works[mi * nr + ri] = setup_for(l, o);
            costs[mi * nr + ri].reset();
          }
        }
        auto cost_of = [&](std::size_t mi, std::size_t ri) -> const SliceCost& {
          auto& c = costs[mi * nr + ri];
          if (!c) c = slice_cost(sl, o.micro_batch_sizes[mi], o.recompute[ri], o);
          return *c;
        };
        std::uint64_t ordinal = sl.first_ordinal;
        rows.clear();
        for (const SlicePp& spp : sl.pps) {
          const PpSplits& ps = space.pp_splits[spp.splits];
          l.pp = ps.pp;
          l.dp = o.num_gpus / (sl.tp * sl.cp * ps.pp);
          // Variants in enumeration order; without streaming the most frugal one goes first.
          order.clear();
          for (auto mi : spp.mbs)
            for (std::size_t ri = 0; ri < nr; ++ri) order.emplace_back(mi, static_cast<std::uint32_t>(ri));
          std::size_t first = 0;  // position of the smallest micro-batch with the frugal recompute
          for (std::size_t k = 0; k < order.size(); ++k) {
            const auto [mi, ri] = order[k];
            const auto [fm, fr] = order[first];
            if (ri == frugal_rc && (fr != frugal_rc || o.micro_batch_sizes[mi] < o.micro_batch_sizes[fm])) first = k;
          }
          const std::size_t group = order.size();
          // Positions in spp.mbs by micro-batch size, ascending.
          by_mbs.resize(spp.mbs.size());
          std::iota(by_mbs.begin(), by_mbs.end(), std::size_t{0});
          std::sort(by_mbs.begin(), by_mbs.end(), [&](std::size_t a, std::size_t b) {
            return o.micro_batch_sizes[spp.mbs[a]] < o.micro_batch_sizes[spp.mbs[b]];
          });
          for (std::size_t si = 0; si < ps.splits.size(); ++si, ordinal += group) {
            const Split& s = ps.splits[si];
            l.vpp = s.vpp;
            l.first_stage_layers = s.first;
            l.middle_stage_layers = s.middle;
            l.last_stage_layers = s.last;
            l.even_split = s.even;
            st.evaluated += group;
            // Estimates variant k; returns whether it fits (nullopt: the engine rejects it).
            auto estimate = [&](std::size_t k) -> std::optional<EngineResult> {
              const auto [mi, ri] = order[k];
              TrainingSetup& work = works[mi * nr + ri];
              apply_pipeline(work, l);
              l.micro_batch_size = o.micro_batch_sizes[mi];
              l.recompute = o.recompute[ri];
              ++st.estimated;
              Plan plan;
              plan.ordinal = ordinal + k;
              EngineResult er;
              try {
                er = engine_estimate(estimator, work, eo);
              } catch (const Error& e) {
                if (e.code() != ExitCode::kBadLayout && e.code() != ExitCode::kBadModel) throw;
                if (plan.ordinal < st.error_ordinal) {
                  st.error_ordinal = plan.ordinal;
                  st.error = e.what();
                }
                return std::nullopt;
              }
              ++st.valid;
              plan.layout = l;
              plan.peak_bytes = er.peak_bytes;
              plan.upper_bytes = er.upper_bytes;
              plan.headroom_bytes = usable - plan.upper_bytes;
              plan.fits = plan.headroom_bytes >= 0;
              const bool smallest = !st.smallest || plan.peak_bytes < st.smallest->peak_bytes ||
                                    (plan.peak_bytes == st.smallest->peak_bytes && plan.ordinal < st.smallest->ordinal);
              if (plan.fits || streaming || smallest) plan.score = score_of(cost_of(mi, ri), ps, si, l, o);
              if (smallest) st.smallest = plan;
              if (streaming) rows.push_back(plan);
              if (plan.fits) {
                ++st.fitting;
                if (stop_at_first_fit) {
                  st.heap.push_back(plan);
                  stop = true;
                } else {
                  st.top->offer(plan);
                }
              }
              return er;
            };
            if (streaming) {
              for (std::size_t k = 0; k < group; ++k) (void)estimate(k);
              continue;
            }
            // The frugal variant first: if weights, gradients and optimizer alone exceed the GPU,
            // no variant of this layout fits, and every one is valid (the enumeration only makes
            // valid ones).
            const auto head = estimate(first);
            if (stop) break;
            if (head && head->static_floor_bytes > usable) {
              st.valid += group - 1;
              continue;
            }
            // Then each recompute variant from the largest micro-batch down: once one fits, the
            // smaller ones fit too (activations grow with the micro-batch; tests/planner checks
            // it), and they are estimated only if they could enter the top K.
            for (std::size_t ri = 0; ri < nr && !stop; ++ri) {
              bool fits = false;
              for (auto it = by_mbs.rbegin(); it != by_mbs.rend() && !stop; ++it) {
                const std::size_t k = *it * nr + ri;
                if (k == first) continue;
                if (fits) {
                  const auto [mi, r] = order[k];
                  l.micro_batch_size = o.micro_batch_sizes[mi];
                  l.recompute = o.recompute[r];
                  Plan plan;
                  plan.ordinal = ordinal + k;
                  plan.score = score_of(cost_of(mi, r), ps, si, l, o);
                  if (!could_enter(*st.top, plan)) {
                    ++st.valid;
                    ++st.fitting;
                    continue;
                  }
                }
                const auto r = estimate(k);
                fits = fits || (r && r->upper_bytes <= usable);
              }
            }
            if (stop_at_first_fit && stop) break;
          }
          if (stop_at_first_fit && stop) break;
        }
        done.fetch_add(sl.count, std::memory_order_relaxed);
        if (streaming) {
          std::lock_guard<std::mutex> lock(mu);
          ready.emplace(idx, std::move(rows));
          rows = {};
          cv_main.notify_one();
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failure) failure = std::current_exception();
      stop = true;
      cv_workers.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv_main.notify_one();
  };

  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) pool.emplace_back(worker, std::ref(states[i]));

  // The calling thread hands out streamed rows in order and reports progress.
  auto last_progress = start;
  {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      while (streaming && !stop) {
        auto it = ready.find(next_emit);
        if (it == ready.end()) break;
        std::vector<Plan> rows = std::move(it->second);
        ready.erase(it);
        ++next_emit;
        cv_workers.notify_all();
        lock.unlock();
        try {
          for (const Plan& p : rows) o.on_valid(p);
        } catch (...) {
          lock.lock();
          if (!failure) failure = std::current_exception();
          stop = true;
          cv_workers.notify_all();
          break;
        }
        lock.lock();
      }
      if (running == 0 && (!streaming || stop || ready.empty())) break;
      cv_main.wait_for(lock, std::chrono::milliseconds(100));
      if (o.progress && Clock::now() - last_progress >= std::chrono::milliseconds(100)) {
        last_progress = Clock::now();
        lock.unlock();
        o.progress(done.load(), space.total, std::chrono::duration<double>(last_progress - start).count());
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);

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
    if (st.smallest && (!result.smallest || st.smallest->peak_bytes < result.smallest->peak_bytes ||
                        (st.smallest->peak_bytes == result.smallest->peak_bytes &&
                         st.smallest->ordinal < result.smallest->ordinal)))
      result.smallest = st.smallest;
    if (st.error_ordinal < error_ordinal) {
      error_ordinal = st.error_ordinal;
      result.first_error = st.error;
    }
  }
  // Near-duplicates found by different workers meet here.
  TopPlans merged(o.top_k, better);
  for (const auto& p : all) merged.offer(p);
  result.plans = merged.plans();
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (o.progress) o.progress(done.load(), space.total, result.elapsed_s);
  return result;
}

PlanResult Planner::run(const PlanOptions& options) const { return impl_->search(options, false); }

void Planner::enumerate(const PlanOptions& o, const std::function<void(const PlanLayout&)>& visit) const {
  const Space space = impl_->build_space(o, true);
  for (const Slice& sl : space.slices) {
    PlanLayout l;
    l.tp = sl.tp;
    l.cp = sl.cp;
    l.ep = sl.ep;
    l.etp = sl.etp;
    for (const SlicePp& spp : sl.pps) {
      const PpSplits& ps = space.pp_splits[spp.splits];
      l.pp = ps.pp;
      l.dp = o.num_gpus / (sl.tp * sl.cp * ps.pp);
      for (const Split& s : ps.splits) {
        l.vpp = s.vpp;
        l.first_stage_layers = s.first;
        l.middle_stage_layers = s.middle;
        l.last_stage_layers = s.last;
        l.even_split = s.even;
        for (auto mi : spp.mbs) {
          l.micro_batch_size = o.micro_batch_sizes[mi];
          for (RecomputeVariant rc : o.recompute) {
            l.recompute = rc;
            visit(l);
          }
        }
      }
    }
  }
}

std::uint64_t Planner::count_candidates(const PlanOptions& options) const {
  return impl_->build_space(options, true).total;
}

PlanScore Planner::score(const PlanLayout& l, const PlanOptions& o) const {
  const auto& im = *impl_;
  im.check_options(o);
  PlanOptions fixed = o;
  fixed.pp = l.pp;
  fixed.vpp = l.vpp;
  const PpSplits ps = im.build_splits(l.pp, fixed);
  for (std::size_t si = 0; si < ps.splits.size(); ++si) {
    const Split& s = ps.splits[si];
    if (s.first == l.first_stage_layers && s.last == l.last_stage_layers && s.middle == l.middle_stage_layers) {
      Slice q;
      q.tp = l.tp;
      q.cp = l.cp;
      q.ep = l.ep;
      q.etp = l.etp;
      q.sequence_parallel = sequence_parallel_on(im.setup_for(l, o).parallel);
      return im.score_of(im.slice_cost(q, l.micro_batch_size, l.recompute, o), ps, si, l, o);
    }
  }
  throw UsageError(fmt::format("PP {} with stages {}/{}/{} and VPP {} is not a split the planner makes", l.pp,
                               l.first_stage_layers, l.middle_stage_layers, l.last_stage_layers, l.vpp));
}

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
      if (fits(mid)) hi = mid;
      else lo = mid + 1;
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
  while ((o.base.seq_length >> max_halvings) % 2 == 0 && (o.base.seq_length >> (max_halvings + 1)) >= 64) ++max_halvings;

  // One change at a time, on top of what was asked.
  auto single_changes = [&](const PlanOptions& base, const std::string& prefix) {
    if (int k = smallest(max_doublings, [&](int x) { return feasible(more_gpus(base, x)); }))
      add(prefix + fmt::format("--num-gpus {}", o.num_gpus << k), more_gpus(base, k));
    if (int k = smallest(max_halvings, [&](int x) { return feasible(shorter(base, x)); }))
      add(prefix + fmt::format("--seq-length {}", o.base.seq_length >> k), shorter(base, k));
  };
  const bool has_full = std::find(o.recompute.begin(), o.recompute.end(), RecomputeVariant::kFull) != o.recompute.end();
  const bool has_one = std::find(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end(), 1) != o.micro_batch_sizes.end();
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
    if (feasible(frugal)) add(frugal_change.substr(0, frugal_change.size() - 1), frugal);
    else single_changes(frugal, frugal_change);
  }
  return out;
}

}  // namespace mme
