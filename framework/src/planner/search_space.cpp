// The planner's search space (docs/planner.md, "The search space"): the engine setup of a
// layout, the PP splits and VPP sizes that partition the layers, and the slices of TP, CP, EP
// and ETP that Megatron's divisibility rules and the block models (through the engine's own
// block checks) accept, in enumeration order.
#include <algorithm>
#include <iterator>
#include <numeric>
#include <optional>

#include <fmt/core.h>

#include "mme/engine/pipeline.hpp"
#include "mme/engine/setup_checks.hpp"
#include "mme/sdk/error.hpp"

#include "engine/communication_buffers.hpp"
#include "planner/planner_internal.hpp"

namespace mme {

using namespace planning;

namespace {

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

// TP (and ETP) stays within an NVLink domain, and at most 8 without --max-tp: on an NVL72 rack
// wider TP groups are possible but not what recipes use, and each would multiply the search.
std::int64_t max_tp_of(const PlanOptions& o) {
  return o.max_tp > 0 ? o.max_tp : std::min<std::int64_t>(8, plan_gpus_per_node(o));
}

// a x b x c, or nullopt when it does not fit in 64 bits (then it divides no GPU count).
std::optional<std::int64_t> product3(std::int64_t a, std::int64_t b, std::int64_t c) {
  std::int64_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return std::nullopt;
  return abc;
}

}  // namespace

namespace planning {

std::string chunk_layout_string(std::int64_t pp, std::int64_t vpp, std::int64_t first, std::int64_t middle,
                                std::int64_t last, std::int64_t extra, std::int64_t mtp) {
  // pipeline_parallel_layer_layout.py: stages in virtual-stage order (vpp_rank x PP + pp_rank),
  // separated by '|'; E the embedding, t a decoder layer, m an MTP layer, L the loss. Runs of
  // equal chunks are written (X|)*n.
  // (Appended in place: the planner writes one for every chunk split it judges.)
  std::string out;
  out.reserve(64);
  auto layers = [&out](std::int64_t n) {
    if (n == 1)
      out += 't';
    else if (n > 1)
      fmt::format_to(std::back_inserter(out), "t*{}", n);
  };
  const std::int64_t chunks = pp * vpp;
  out += 'E';
  layers(first);
  out += '|';
  auto in_chunk = [&](std::int64_t k) {
    const std::int64_t vr = k / pp, pr = k % pp;
    return middle + (vr == vpp - 1 && pr >= 1 && pr <= extra ? 1 : 0);
  };
  for (std::int64_t k = 1; k + 1 < chunks;) {
    std::int64_t run = 1;
    while (k + run + 1 < chunks && in_chunk(k + run) == in_chunk(k)) ++run;
    if (run > 1) {
      out += '(';
      layers(in_chunk(k));
      fmt::format_to(std::back_inserter(out), "|)*{}", run);
    } else {
      layers(in_chunk(k));
      out += '|';
    }
    k += run;
  }
  layers(last);
  out.append(static_cast<std::size_t>(mtp), 'm');
  out += 'L';
  return out;
}

namespace {

// Whether the account-for flags express a chunk split: they say "one layer lighter"
// (transformer_block.py get_num_layers_to_build: the embedding and the loss count as a layer
// each); anything else, and MTP, needs a layout string.
bool account_for_flags_say(const PlanLayout& l, std::int64_t mtp_layers) {
  const std::int64_t m = l.chunk_layers, f = l.first_chunk_layers, z = l.last_chunk_layers;
  return mtp_layers == 0 && l.chunk_extra_layers == 0 && (f == m - 1 || f == m) && (z == m - 1 || z == m);
}

}  // namespace

std::string pipeline_layout_text(const PlanLayout& l, std::int64_t mtp_layers) {
  if (!l.chunk_split || account_for_flags_say(l, mtp_layers)) return {};
  return chunk_layout_string(l.pp, l.vpp, l.first_chunk_layers, l.chunk_layers, l.last_chunk_layers,
                             l.chunk_extra_layers, mtp_layers);
}

// The PP size, VPP size and first/last-stage flags (or chunk split) of a layout.
void apply_pipeline(TrainingSetup& s, const PlanLayout& l, std::int64_t mtp_layers, const std::string* layout_text) {
  s.parallel.pp = l.pp;
  s.parallel.vpp = l.vpp;
  s.pipeline.first_stage_layers.reset();
  s.pipeline.last_stage_layers.reset();
  s.pipeline.account_for_embedding = s.pipeline.account_for_loss = false;
  s.pipeline.layout.clear();
  if (l.chunk_split) {
    if (account_for_flags_say(l, mtp_layers)) {
      s.pipeline.account_for_embedding = l.first_chunk_layers == l.chunk_layers - 1;
      s.pipeline.account_for_loss = l.last_chunk_layers == l.chunk_layers - 1;
    } else {
      s.pipeline.layout = layout_text ? *layout_text : pipeline_layout_text(l, mtp_layers);
    }
    return;
  }
  if (l.pp > 1 && !l.even_split) {
    if (l.pp == 2 || l.first_stage_layers != l.middle_stage_layers)
      s.pipeline.first_stage_layers = l.first_stage_layers;
    if (l.pp == 2 || l.last_stage_layers != l.middle_stage_layers) s.pipeline.last_stage_layers = l.last_stage_layers;
  }
}

// The searched memory-for-time knobs of a candidate (unset: the base setup's).
void apply_knobs(TrainingSetup& s, const PlanKnobs& k) {
  if (k.dp_sharding) {
    if (*k.dp_sharding == DpSharding::kDistributedOptimizer) {
      s.fsdp = FsdpSettings{};
    } else {
      s.fsdp.kind = FsdpKind::kMegatron;
      switch (*k.dp_sharding) {
        case DpSharding::kOptim: s.fsdp.strategy = FsdpSharding::kOptim; break;
        case DpSharding::kOptimGrads: s.fsdp.strategy = FsdpSharding::kOptimGrads; break;
        default: s.fsdp.strategy = FsdpSharding::kOptimGradsParams; break;
      }
    }
  }
  if (k.optimizer_offload_fraction) s.optimizer.cpu_offload_fraction = *k.optimizer_offload_fraction;
  if (k.cuda_graphs) {
    if (!k.cuda_graphs->on) {
      s.cuda_graph.impl = CudaGraphImpl::kNone;
      s.cuda_graph.modules = 0;
    } else {
      // The base setup's implementation when it names one, else Transformer Engine's.
      if (!s.cuda_graph.on()) s.cuda_graph.impl = CudaGraphImpl::kTransformerEngine;
      s.cuda_graph.modules = k.cuda_graphs->modules;
    }
  }
}

// The split of a layout.
void apply_split(PlanLayout& l, const Split& s) {
  l.vpp = s.vpp;
  l.first_stage_layers = s.first;
  l.middle_stage_layers = s.middle;
  l.last_stage_layers = s.last;
  l.even_split = s.even;
  l.chunk_split = s.chunks;
  l.first_chunk_layers = s.first_chunk;
  l.chunk_layers = s.chunk_layers;
  l.last_chunk_layers = s.last_chunk;
  l.chunk_extra_layers = s.extra;
}

}  // namespace planning

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
  apply_pipeline(s, l, model().mtp_num_layers);
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
  if (o.recipe_overlaps) {
    // What Megatron-Bridge's performance recipes set (CommOverlapConfig): the distributed
    // optimizer's bucketed gradient reduce-scatter and parameter all-gather overlapped with
    // backward and forward, and TE's userbuffer overlap of the SP collectives with the GEMMs.
    s.comm.overlap_grad_reduce = true;
    s.comm.overlap_param_gather = true;
    if (l.tp > 1 && s.transformer_engine) s.comm.tp_comm_overlap = true;
  }
  apply_knobs(s, l.knobs);
  return s;
}

void Planner::Impl::check_options(const PlanOptions& o) const {
  if (o.num_gpus <= 0) throw UsageError(fmt::format("--num-gpus must be a positive integer, got {}", o.num_gpus));
  if (!o.gpu) throw UsageError("plan needs a GPU profile (--gpu)");
  if (o.micro_batch_sizes.empty()) throw UsageError("--micro-batch-size: give at least one size");
  for (auto b : o.micro_batch_sizes)
    if (b <= 0) throw UsageError(fmt::format("--micro-batch-size: expected positive sizes, got {}", b));
  if (o.recompute.empty()) throw UsageError("--recompute: give at least one variant");
  if (o.gpus_per_node < 0) throw UsageError("--gpus-per-node must be positive");
  if (!(o.inter_node_bandwidth_gbps >= 0)) throw UsageError("--inter-node-bandwidth must be positive");
  for (double k : {o.step_time.gemm_bf16, o.step_time.gemm_fp8, o.step_time.attention})
    if (!(k > 0 && k <= 1)) throw UsageError("the step-time model's efficiencies must be in (0, 1]");
  if (!(o.step_time.elementwise_passes >= 0 && o.step_time.elementwise_passes < 1e6))
    throw UsageError("the step-time model's elementwise passes must not be negative");
  if (o.max_tp < 0) throw UsageError("--max-tp must be positive");
  if (!(o.headroom_fraction >= 0 && o.headroom_fraction < 1))
    throw UsageError("--headroom must be in [0, 1)");  // NaN too
  if (o.top_k == 0) throw UsageError("--top must be positive");
  for (const auto* v : {&o.tp, &o.pp, &o.vpp, &o.ep, &o.etp, &o.cp})
    if (*v && **v <= 0) throw UsageError("fixed layout sizes must be positive");
  for (double f : o.optimizer_offload_fractions)
    if (!(f >= 0 && f <= 1))
      throw UsageError(fmt::format("--optimizer-offload-fraction: expected fractions in [0, 1], got {}", f));
  if (!(o.host_link_bandwidth_gbps >= 0) || !(o.cpu_optimizer_params_per_second > 0) || !(o.kernel_launch_us >= 0) ||
      !(o.graph_launch_us >= 0))
    throw UsageError("the host bandwidth and CPU optimizer rate must be positive, the launch times not negative");
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
  // Interleaved schedules whose layers do not split evenly over the PP x VPP virtual chunks (or
  // whose first and last chunks carry the embedding, the loss and MTP): every chunk holds c
  // layers but the first and the last, which hold f and l, and the last chunks of r middle ranks
  // (1..r), which hold c + 1: f + (C - 2) c + r + l = L, max(1, c - 3) <= f, l <= c,
  // 0 <= r <= PP - 2, not f = l = c with r = 0 (that is the even split above).
  // Megatron-Bridge's recipes lighten the two end chunks by the embedding and the loss
  // (--account-for-*-in-pipeline-split: Qwen3-235B-A22B's 94 layers over 32 chunks, Llama-3.1-405B's
  // 126 over 64) or by a layout string (DeepSeek-V3's "Et*4|(t*4|)*14tmL"; Llama-3-70B's 80 layers
  // over 40 chunks with two in the first, one in the last and one chunk of three); the blocks
  // around the layers weigh at most about three layers, so no chunk is lightened by more, and the
  // layers left over go one each to ranks that carry neither.
  if (p > 1) {
    const std::int64_t spare = p - 2;  // middle ranks, each can take one layer more
    for (std::int64_t v = 2; v <= L; ++v) {
      if (o.vpp && *o.vpp != v) continue;
      std::int64_t chunks = 0;
      if (__builtin_mul_overflow(p, v, &chunks) || chunks > L + 2) break;
      for (std::int64_t c = std::max<std::int64_t>(1, (L - spare + chunks - 1) / chunks);
           chunks > 2 && c * (chunks - 2) <= L - 2; ++c) {
        const std::int64_t ends = L - (chunks - 2) * c;
        const std::int64_t low = std::max<std::int64_t>(1, c - 3);
        if (ends > 2 * c + spare || ends < 2 * low) continue;
        for (std::int64_t f = c; f >= low; --f) {
          for (std::int64_t l = c; l >= low; --l) {
            const std::int64_t r = ends - f - l;
            if (r < 0 || r > spare || (f == c && l == c && r == 0)) continue;
            Split s;
            s.vpp = v;
            s.chunks = true;
            s.even = false;
            s.first_chunk = f, s.chunk_layers = c, s.last_chunk = l, s.extra = r;
            s.first = f + (v - 1) * c, s.middle = v * c, s.last = l + (v - 1) * c;
            out.splits.push_back(s);
          }
        }
      }
    }
  }
  // Layers of each type per pipeline rank, as the engine partitions them. A chunk split the
  // engine's partition refuses (a rule of pipeline_parallel_layer_layout.py) is left out.
  std::vector<PipelinePartition> parts;
  std::erase_if(out.splits, [&](const Split& s) {
    PlanLayout l;
    l.pp = p;
    apply_split(l, s);
    const TrainingSetup setup = setup_for(l, o);
    ParallelLayout par;
    par.pp = p;
    par.vpp = s.vpp;
    try {
      parts.push_back(partition_pipeline(L, m.mtp_num_layers, par, setup.pipeline));
    } catch (const LayoutError&) {
      if (!s.chunks) throw;
      return true;
    }
    return false;
  });
  count_layers(out, parts);
  return out;
}

void Planner::Impl::count_layers(PpSplits& out, const std::vector<PipelinePartition>& parts) const {
  const std::int64_t p = out.pp;
  const std::size_t nt = tables.types.size();
  const auto np = static_cast<std::size_t>(p);
  out.counts.assign(out.splits.size() * np * nt, 0);
  out.loss.assign(out.splits.size() * np, 0);
  out.embed.assign(out.splits.size() * np, 0);
  out.mtp.assign(out.splits.size() * np, 0);
  for (std::size_t si = 0; si < out.splits.size(); ++si) {
    const Split& s = out.splits[si];
    const PipelinePartition& part = parts[si];
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
}

// Whether the block models accept a layout's TP, CP, EP and ETP (heads, query groups, widths,
// CP under the attention backend), asked with the block contexts the engine builds for it. A
// setup the engine rejects for its sizes (EP not dividing the experts, DeepEP with TP x EP = 1, ...)
// is refused too, its reason kept in `refusal` (the first one): when every slice is refused that
// way, the base flags are what no layout can work with, and the error says why.
bool Planner::Impl::blocks_accept(const TrainingSetup& setup, AttentionBackend attention, std::string& refusal) const {
  TrainingSetup resolved;
  try {
    resolved = resolve_pass_setup(model(), setup);
  } catch (const Error& e) {
    if (e.code() == ExitCode::kBadModel) return true;  // the model's problem: probe_base names it
    if (e.code() != ExitCode::kBadLayout) throw;
    if (refusal.empty()) refusal = e.what();
    return false;
  }
  try {
    // The dispatcher's and the overlaps' rules on the sizes (DeepEP needs ETP x EP > 1, ...).
    check_communication_model(model(), resolved);
  } catch (const LayoutError& e) {
    if (refusal.empty()) refusal = e.what();
    return false;
  }
  try {
    validate_blocks(tables, block_layout(model(), resolved, attention, 1.0));
  } catch (const LayoutError&) {
    return false;
  }
  return true;
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
  // EP > 1 only with routed experts, and only sizes that divide both the GPU count and every MoE
  // layer's expert count (moe_layer.py: num_local_experts = num_moe_experts / EP): at a highly
  // composite GPU count every other divisor would be a slice of invalid candidates. The MoE
  // blocks check the rest (below).
  std::int64_t experts = 0;
  for (const LayerSpec& l : m.layers)
    if (l.mlp.num_experts > 0) experts = std::gcd(experts, l.mlp.num_experts);
  const std::vector<std::int64_t> eps = fixed_or(
      o.ep, tables.any_moe && experts > 0 ? divisors_of(std::gcd(N, experts), N) : std::vector<std::int64_t>{1});
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
  const std::vector<PlanKnobs> knobs = plan_knob_combinations(o);
  const std::uint64_t budget = o.max_candidates;
  std::string refusal;  // the engine's reason for the first slice it refuses as a whole
  for (auto tp : tps) {
    if (o.cancel && o.cancel->load(std::memory_order_relaxed)) throw InterruptedError("plan: interrupted");
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
      // Transformer Engine's attention choice, as Estimator::run makes it: it reads the backend,
      // the implementation, the environment and, for the model's softmax and windows, CP and its
      // exchange. An --attention-backend that cannot run this CP refuses its slices (below).
      AttentionBackend attention = AttentionBackend::kAuto;
      std::string attention_refusal;
      try {
        attention = resolve_attention(probe, o.gpu->compute_capability, &model()).backend;
      } catch (const UsageError& e) {
        attention_refusal = e.what();
      }
      for (auto ep : eps) {
        const std::vector<std::int64_t> etps =
            tables.any_moe ? etps_all : std::vector<std::int64_t>{o.etp.value_or(tp)};
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
              if (o.base.global_batch_size > 0 &&
                  (__builtin_mul_overflow(mbs, dp, &per_step) || o.base.global_batch_size % per_step != 0))
                continue;
              spp.mbs.push_back(static_cast<std::uint32_t>(b));
            }
            if (spp.mbs.empty()) continue;
            q.count += sp.pp_splits[i].splits.size() * knobs.size() * spp.mbs.size() * o.recompute.size();
            q.pps.push_back(std::move(spp));
          }
          if (q.pps.empty()) continue;
          // The work bound: once a slice would pass it, it and every later one are skipped (and
          // counted, without asking the blocks).
          if (budget > 0 && (sp.skipped_slices > 0 || sp.total + q.count > budget)) {
            if (sp.skipped_slices++ == 0)
              sp.first_skipped = fmt::format("TP {}, CP {}, EP {}, ETP {}", tp, cp, ep, etp);
            sp.skipped_candidates += q.count;
            continue;
          }
          probe.parallel.ep = ep;
          probe.parallel.etp = etp;
          if (!attention_refusal.empty()) {
            if (refusal.empty()) refusal = attention_refusal;
            continue;
          }
          if (!blocks_accept(probe, attention, refusal)) continue;
          q.first_ordinal = sp.total;
          sp.total += q.count;
          sp.slices.push_back(std::move(q));
        }
      }
    }
  }

  if (sp.total == 0 && !allow_empty && !refusal.empty())
    throw LayoutError(fmt::format("no layout can work with these flags: {}", refusal));
  if (sp.total == 0 && !allow_empty)
    throw LayoutError(fmt::format(
        "no layout of {} GPUs suits {}: TP (at most {}) must divide the attention heads and divide or be a multiple of "
        "the query groups, "
        "EP the experts, CP the sequence ({}), PP at most the {} layers, TP x CP x PP and ETP x EP x PP the GPU "
        "count{}",
        N, m.name, max_tp, seq, L,
        o.base.global_batch_size > 0
            ? fmt::format(", and micro-batch x DP the global batch size {}", o.base.global_batch_size)
            : ""));
  return sp;
}

void Planner::enumerate(const PlanOptions& o, const std::function<void(const PlanLayout&)>& visit) const {
  const Space space = impl_->build_space(o, true);
  const std::vector<PlanKnobs> knobs = plan_knob_combinations(o);
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
        apply_split(l, s);
        for (const PlanKnobs& k : knobs) {
          l.knobs = k;
          for (auto mi : spp.mbs) {
            l.micro_batch_size = o.micro_batch_sizes[mi];
            // The engine refuses the VPP splits whose micro-batches the interleaved schedule
            // does not run (setup_checks.hpp); the search's engine call counts them invalid.
            if (l.vpp > 1 && o.base.global_batch_size > 0 &&
                !interleaved_schedule_runs(o.base.global_batch_size / (l.micro_batch_size * l.dp), l.pp,
                                           o.base.pipeline.microbatch_group_size.value_or(l.pp)))
              continue;
            for (RecomputeVariant rc : o.recompute) {
              l.recompute = rc;
              visit(l);
            }
          }
        }
      }
    }
  }
}

std::uint64_t Planner::count_candidates(const PlanOptions& options) const {
  return impl_->build_space(options, true).total;
}

}  // namespace mme
