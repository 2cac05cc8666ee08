// The planner's speed proxy (docs/planner.md, "The speed proxy"): per layer kind and
// micro-batch a roofline of its GEMMs and attention core and its TP/EP/CP traffic, per pipeline
// rank the sum over its layers, then the pipeline bubble and the data-parallel
// synchronisation of a step. Its figures come from the engine: the block models' single-GPU
// parameter terms and attention-core widths (EngineTables), the element sizes
// (element_bytes) and the embedding/output/MTP parameters (stage_extras).
#include <algorithm>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

#include "planner/planner_internal.hpp"

namespace mme {

using namespace planning;

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

}  // namespace

namespace planning {

// In floating point: GPUs (up to 2^40) x micro-batch (up to 2^24) need not fit in 64 bits.
double nominal_sequences(const PlanOptions& o) {
  if (o.base.global_batch_size > 0) return static_cast<double>(o.base.global_batch_size);
  const std::int64_t largest = *std::max_element(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end());
  return static_cast<double>(o.num_gpus) * static_cast<double>(largest);
}

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
      if (term.shard == ShardClass::kExpert)
        f.expert_active += active;
      else if (bp == &kp.attention)
        f.attn_active += active;
      else
        f.mlp_active += active;
      if (term.group == ParamGroup::kSharedExperts) f.shared_active += active;
    }
  }
  f.core_width = lt.core.width;
  f.kv_width = lt.core.kv_width;
  f.moe = lt.moe;
  f.top_k = static_cast<double>(lt.spec.mlp.top_k);
  return f;
}

}  // namespace planning

Planner::Impl::Impl(const ModelSpec& model, const Registry& registry)
    : estimator(model, registry), tables(engine_tables(estimator)) {
  for (const LayerType& lt : tables.types) figures.push_back(figures_of(lt, lt.single_gpu));
  if (model.mtp_num_layers > 0) mtp_figures = figures_of(tables.types[tables.mtp_type], tables.mtp_single_gpu);
}

SliceCost Planner::Impl::slice_cost(const Slice& q, std::int64_t mbs, RecomputeVariant rc, const PlanOptions& o) const {
  const ModelSpec& m = model();
  const Figures f = figures_of(o);
  const double tp = static_cast<double>(q.tp), cp = static_cast<double>(q.cp);
  const double ep = static_cast<double>(q.ep), etp = static_cast<double>(q.etp);
  const double h = static_cast<double>(m.hidden_size);
  const double seq = static_cast<double>(o.base.seq_length);
  const double T = static_cast<double>(mbs) * seq;  // tokens of one micro-batch
  const double Tg = T / (tp * cp);                  // of them, per GPU of a TP x CP group
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
    c.ideal_flops_per_token += static_cast<double>(m.mtp_num_layers) *
                               (6 * (t.attn_active + t.mlp_active + t.expert_active) + 3 * t.core_width * seq +
                                12 * h * h + 6 * h * static_cast<double>(m.vocab_size));
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
      if (t.moe && (modules & kRecomputeMoe))
        fwd += 2 * (t.mlp_active + t.expert_active) * Tg;
      else if (t.moe && (modules & kRecomputeSharedExperts))
        fwd += 2 * t.shared_active * Tg;
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
  s.ideal_seconds =
      sequences * static_cast<double>(o.base.seq_length) * c.ideal_flops_per_token / (static_cast<double>(N) * f.flops);
  s.score = s.step_seconds > 0 ? s.ideal_seconds / s.step_seconds : 0;
  s.communication_seconds = slots * (s.tp_seconds + s.ep_seconds + s.cp_seconds + s.pp_seconds) + s.dp_seconds;
  return s;
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

}  // namespace mme
