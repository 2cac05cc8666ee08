// The planner's speed proxy (docs/planner.md, "The speed proxy"): per layer kind and
// micro-batch a roofline of its GEMMs and attention core and its TP/EP/CP traffic, per pipeline
// rank the sum over its layers, then the pipeline bubble and the data-parallel
// synchronisation of a step. Its figures come from the block models of the engine's layer table
// (EngineTables), decoder layers and the blocks around them alike: their costs per micro-batch
// under the slice's layout (LayerMemoryModel::costs: FLOPs, weight bytes, collective bytes) and
// their parameters; the element sizes are the engine's (element_bytes).
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

}  // namespace planning

namespace {

BlockCosts costs_of(const LayerMemoryModel& block, const BlockContext& ctx) {
  BlockCosts c;
  call_plugin("layer model costs", [&] { block.costs(ctx, c); });
  return c;
}

double forward_flops(const BlockCosts& c) { return c.gemm_flops + c.attention_flops + c.expert_flops; }

double per_rank_params(const LayerMemoryModel& block, const BlockContext& ctx) {
  BlockParams p;
  call_plugin("layer model parameters", [&] { block.parameters(ctx, p); });
  return static_cast<double>(sum_per_rank(p));
}

// Bandwidths of the slice's process groups: one node's links while the group fits in a node.
struct GroupBandwidth {
  double tp = 0, cp = 0, ep = 0, etp = 0;
};

// Seconds of a unit of blocks for one micro-batch: the roofline of its dense and, apart, its
// expert GEMMs over three passes (forward, and a backward of twice the work), the recompute and
// its collectives. `layer`: a decoder (or MTP) layer, which recompute runs again in part or, under
// full recompute, whole (its collectives included).
LayerTime unit_time(std::initializer_list<const BlockCosts*> blocks, const Figures& f, const GroupBandwidth& bw,
                    bool full_recompute, bool layer) {
  double dense = 0, expert = 0, dense_bytes = 0, expert_bytes = 0, recompute = 0;
  double tp = 0, cp = 0, ep = 0, etp = 0;
  const bool again = full_recompute && layer;
  for (const BlockCosts* c : blocks) {
    dense += c->gemm_flops + c->attention_flops;
    expert += c->expert_flops;
    dense_bytes += c->weight_bytes;
    expert_bytes += c->expert_weight_bytes;
    recompute += c->recompute_flops;
    auto passes = [&](CommGroup g) { return sum_forward_bytes(*c, g) * (again ? 2 : 1) + sum_backward_bytes(*c, g); };
    tp += passes(CommGroup::kTensor);
    cp += passes(CommGroup::kContext);
    ep += passes(CommGroup::kExpert);
    etp += passes(CommGroup::kExpertTensor);
  }
  auto roofline = [&](double flops, double bytes) { return std::max(flops / f.flops, bytes / f.hbm); };
  LayerTime t;
  t.compute = roofline(3 * dense, 3 * dense_bytes);
  if (expert > 0 || expert_bytes > 0) t.compute += roofline(3 * expert, 3 * expert_bytes);
  if (again)
    t.recompute = t.compute / 3;  // one more forward pass
  else if (layer)
    t.recompute = recompute / f.flops;
  t.tp = tp / bw.tp;
  t.cp = cp / bw.cp;
  t.ep = ep / bw.ep + etp / bw.etp;
  t.dense_params = dense_bytes / f.weight_bytes;
  t.expert_params = expert_bytes / f.weight_bytes;
  return t;
}

void add_time(LayerTime& a, const LayerTime& b) {
  a.compute += b.compute, a.recompute += b.recompute, a.tp += b.tp, a.ep += b.ep, a.cp += b.cp, a.launch += b.launch;
}

// Kernels one decoder layer launches forward, by part (an assumption: the profile has no such
// figure; docs/planner.md lists them). The backward launches about twice as many.
constexpr double kAttentionKernels = 16;     // input norm, QKV GEMM, RoPE, core attention, projection, BDA
constexpr double kDenseMlpKernels = 8;       // pre-MLP norm, FC1, activation, FC2, BDA
constexpr double kMoeKernels = 24;           // router, permutation, dispatch, grouped GEMMs, combine
constexpr double kMoeRouterKernels = 6;      // of them: pre-MLP norm, router GEMM, top-k, aux loss
constexpr double kMoePreprocessKernels = 4;  // of them: the dispatcher's preprocess

// The host time of one layer's launches per micro-batch, and what of it the GPU work does not
// hide: the CPU runs ahead of the GPU, so a layer is launch-bound only when launching its
// kernels takes longer than running them. Per-layer CUDA graphs (core/transformer/cuda_graphs.py,
// CudaGraphManager / TE make_graphed_callables: one captured graph per graphed scope, replayed
// forward and backward) replace the scope's kernel launches by one graph launch a pass. The
// scopes follow the engine's rule (transformer_layer.py _get_submodules_under_cudagraphs).
double exposed_launch_seconds(double gpu_seconds, bool moe, const TrainingSetup& s, const PlanOptions& o) {
  const CudaGraphSettings& g = s.cuda_graph;
  std::uint32_t mods = g.modules;
  if (g.impl == CudaGraphImpl::kLocal && (mods & (kGraphMoeRouter | kGraphMoePreprocess)))
    mods |= kGraphMoeRouter | kGraphMoePreprocess;
  const bool whole = g.on() && mods == 0;
  const bool attn_in = g.on() && (whole || (mods & kGraphAttn));
  const bool mlp_in = g.on() && (whole || (moe ? (mods & kGraphMoe) : (mods & kGraphMlp)));
  const double attn = kAttentionKernels, mlp = moe ? kMoeKernels : kDenseMlpKernels;
  double graphed = 0, graphs = 0;
  if (whole) {
    graphed = attn + mlp, graphs = 1;
  } else {
    if (attn_in) graphed += attn, graphs += 1;
    if (mlp_in) graphed += mlp, graphs += 1;
    if (moe && !mlp_in && (mods & (kGraphMoeRouter | kGraphMoePreprocess))) {
      graphs += 1;
      if (mods & kGraphMoeRouter) graphed += kMoeRouterKernels;
      if (mods & kGraphMoePreprocess) graphed += kMoePreprocessKernels;
    }
  }
  // Forward, and a backward of twice the kernels; full recompute runs the forward again.
  const double passes = s.recompute.granularity == RecomputeGranularity::kFull ? 4 : 3;
  const double host =
      passes * (attn + mlp - graphed) * o.kernel_launch_us * 1e-6 + 2 * graphs * o.graph_launch_us * 1e-6;
  return std::max(0.0, host - gpu_seconds);
}

// Megatron-FSDP's data-parallel traffic beyond the distributed optimizer's one gradient
// reduce-scatter and one parameter all-gather a step, for `shared` parameters of a rank sent
// over its data-parallel group (megatron_fsdp.py). _process_post_backward_gradients reduces the
// gradients on every backward under optim_grads and optim_grads_params
// (grad_reduce_every_bprop), once a step otherwise; under optim_grads_params
// _pre_forward_param_unshard and _pre_backward_param_unshard all-gather the weights before each
// forward and each backward of every micro-batch (released after each: release_module_parameters),
// where the other strategies keep them whole and gather them once a step (the optimizer's update).
double fsdp_extra_seconds(const SliceCost& c, double shared, double micro_batches, double bandwidth) {
  const double m = std::max(micro_batches, 1.0);
  double bytes = 0;
  if (c.sharding == DpSharding::kOptimGrads) bytes = (m - 1) * c.grad_bytes;
  if (c.sharding == DpSharding::kOptimGradsParams) bytes = (m - 1) * c.grad_bytes + (2 * m - 1) * c.weight_bytes;
  return shared * bytes / bandwidth;
}

// Optimizer CPU offload of a rank's optimizer shard of `params` parameters
// (optimizer/cpu_offloading/hybrid_optimizer.py, HybridDeviceOptimizer): step() copies the main
// gradients of the offloaded share to the host (_set_sub_optimizer_grads, on the D2H stream),
// steps the CPU optimizer on them, and its step post-hook copies the updated parameters back
// (param_copy_back_gpu_hook, on the H2D stream). With --overlap-cpu-optimizer-d2h-h2d each
// parameter has its own host optimizer, so the copies of one overlap the step of another: the
// longer of the two counts.
double offload_seconds(const SliceCost& c, double params) {
  if (c.offload_fraction <= 0) return 0;
  const double offloaded = c.offload_fraction * params;
  const double copies = offloaded * c.offload_bytes_per_param / c.host_link;
  const double step = offloaded / c.cpu_params_per_s;
  return c.offload_overlap ? std::max(copies, step) : copies + step;
}

}  // namespace

Planner::Impl::Impl(const ModelSpec& model, const Registry& registry)
    : estimator(model, registry), tables(engine_tables(estimator)) {}

SliceCost Planner::Impl::slice_cost(const Slice& q, std::int64_t mbs, RecomputeVariant rc, const PlanKnobs& knobs,
                                    const PlanOptions& o) const {
  const ModelSpec& m = model();
  const EngineTables& im = tables;
  const Figures f = figures_of(o);
  // What the block models see of this slice: the engine's block layout of its setup.
  PlanLayout pl;
  pl.tp = q.tp, pl.cp = q.cp, pl.ep = q.ep, pl.etp = q.etp;
  pl.micro_batch_size = mbs;
  pl.recompute = rc;
  pl.knobs = knobs;
  TrainingSetup setup = setup_for(pl, o);
  setup.parallel.sequence_parallel = q.sequence_parallel;
  const BlockLayout b = block_layout(m, setup, setup.attention_backend, 1.0);
  const std::int64_t node = o.gpus_per_node;
  GroupBandwidth bw;
  bw.tp = q.tp <= node ? f.link : f.inter;
  bw.cp = q.tp * q.cp <= node ? f.link : f.inter;
  bw.ep = q.etp * q.ep <= node ? f.link : f.inter;
  bw.etp = q.etp <= node ? f.link : f.inter;
  const bool full = rc == RecomputeVariant::kFull;
  auto lm_context = [&](const BlockLayout& layout, const LmBlock& block) {
    return make_context(m, layout, *block.layer, &block == &im.mtp_projection);
  };

  SliceCost c;
  c.figures = f;
  c.types.reserve(im.types.size());
  const bool launches = plan_counts_launches(o);
  for (const LayerType& lt : im.types) {
    const BlockContext ctx = make_context(m, b, lt.spec, false);
    const BlockCosts attn = costs_of(*lt.attention, ctx), mlp = costs_of(*lt.mlp, ctx);
    LayerTime t = unit_time({&attn, &mlp}, f, bw, full, true);
    if (launches) t.launch = exposed_launch_seconds(t.total(), lt.moe, setup, o);
    c.types.push_back(t);
  }
  const BlockCosts embedding = costs_of(*im.embedding.model, lm_context(b, im.embedding));
  const BlockCosts output = costs_of(*im.output_head.model, lm_context(b, im.output_head));
  c.embedding = unit_time({&embedding}, f, bw, full, false);
  c.output = unit_time({&output}, f, bw, full, false);
  c.embedding_params = per_rank_params(*im.embedding.model, lm_context(b, im.embedding));
  BlockLayout staged = b;
  staged.pp = 1;
  c.output_params_pp1 = per_rank_params(*im.output_head.model, lm_context(staged, im.output_head));
  staged.pp = 2;
  c.output_params_pp = per_rank_params(*im.output_head.model, lm_context(staged, im.output_head));
  // An MTP depth: a decoder layer of the MTP kind, the projection and its own pass through the
  // output head (whose weights are the main model's).
  if (m.mtp_num_layers > 0) {
    const LayerType& lt = im.types[im.mtp_type];
    const BlockContext ctx = make_context(m, b, lt.spec, true);
    const BlockCosts attn = costs_of(*lt.attention, ctx), mlp = costs_of(*lt.mlp, ctx);
    const BlockCosts projection = costs_of(*im.mtp_projection.model, lm_context(b, im.mtp_projection));
    c.mtp = unit_time({&attn, &mlp}, f, bw, full, true);
    add_time(c.mtp, unit_time({&projection}, f, bw, full, false));
    add_time(c.mtp, c.output);
    c.mtp_projection_params = per_rank_params(*im.mtp_projection.model, lm_context(b, im.mtp_projection));
  }

  // The ideal: the model's forward FLOPs per token (one sequence on one GPU, the unpadded
  // vocabulary), three passes of it.
  BlockLayout one = b;
  one.tp = one.cp = one.ep = one.etp = 1;
  one.sp = false;
  one.tokens = one.local_tokens = o.base.seq_length;
  one.vocab_local = m.vocab_size;
  const double seq = static_cast<double>(o.base.seq_length);
  auto per_token = [&](std::initializer_list<const LayerMemoryModel*> blocks, const LayerSpec& layer, bool is_mtp) {
    const BlockContext ctx = make_context(m, one, layer, is_mtp);
    double flops = 0;
    for (const LayerMemoryModel* block : blocks) flops += forward_flops(costs_of(*block, ctx));
    return 3 * flops / seq;
  };
  std::vector<double> layer_ideal;
  for (const LayerType& lt : im.types) layer_ideal.push_back(per_token({lt.attention, lt.mlp}, lt.spec, false));
  for (std::size_t i = 0; i < static_cast<std::size_t>(m.num_layers); ++i)
    c.ideal_flops_per_token += layer_ideal[im.layer_type[i]];
  const double head = per_token({im.output_head.model}, *im.output_head.layer, false);
  c.ideal_flops_per_token += head;
  if (m.mtp_num_layers > 0) {
    const LayerType& lt = im.types[im.mtp_type];
    c.ideal_flops_per_token += static_cast<double>(m.mtp_num_layers) *
                               (per_token({lt.attention, lt.mlp}, lt.spec, true) +
                                per_token({im.mtp_projection.model}, *im.mtp_projection.layer, true) + head);
  }
  // The distributed optimizer's gradient reduce-scatter (the gradient buffer's dtype) and
  // parameter all-gather.
  const ElementBytes eb = element_bytes(setup);
  c.grad_bytes = static_cast<double>(eb.grad);
  // The knobs, as the candidate's setup has them (searched or the base setup's).
  if (setup.fsdp.kind == FsdpKind::kMegatron) {
    switch (setup.fsdp.strategy) {
      case FsdpSharding::kOptimGrads: c.sharding = DpSharding::kOptimGrads; break;
      case FsdpSharding::kOptimGradsParams: c.sharding = DpSharding::kOptimGradsParams; break;
      default: c.sharding = DpSharding::kOptim; break;
    }
    // ParamAndGradBuffer._resolve_group_grad_dtype: Megatron-FSDP's gradients are the param
    // dtype unless --megatron-fsdp-main-grads-dtype says otherwise, and are reduced in
    // --megatron-fsdp-grad-comm-dtype, by default theirs (as the engine sizes them).
    const FsdpSettings& fs = setup.fsdp;
    const std::int64_t main_grads = fs.main_grads                    ? dtype_bytes(*fs.main_grads)
                                    : eb.param_dtype == DType::kFP32 ? 4
                                                                     : 2;
    c.grad_bytes = static_cast<double>(fs.grad_comm ? dtype_bytes(*fs.grad_comm) : main_grads);
  }
  c.sync_bytes_per_param = c.grad_bytes + f.weight_bytes;
  c.weight_bytes = f.weight_bytes;
  c.offload_fraction = setup.optimizer.cpu_offload_fraction;
  // HybridDeviceOptimizer: the main gradient of each offloaded parameter goes to the host, its
  // updated main parameter comes back.
  c.offload_bytes_per_param = static_cast<double>(eb.grad + dtype_bytes(setup.optimizer.main_params));
  c.offload_overlap = setup.optimizer.overlap_cpu_d2h_h2d;
  c.host_link = o.host_link_bandwidth_gbps * 1e9;
  c.cpu_params_per_s = o.cpu_optimizer_params_per_second;
  // p2p_communication.py: [s / CP (/ TP with sequence parallelism), b, h].
  c.p2p_bytes = static_cast<double>(b.local_tokens.value()) * static_cast<double>(m.hidden_size) * f.act_bytes;
  return c;
}

PlanScore Planner::Impl::score_of(const SliceCost& c, const PpSplits& ps, std::size_t split, const PlanLayout& l,
                                  const PlanOptions& o) const {
  const Figures& f = c.figures;
  const std::size_t nt = c.types.size();
  const auto np = static_cast<std::size_t>(ps.pp);
  // The parameters of the embedding, output head and MTP beyond their layers, with the
  // tied-output rule, as the block models count them on each stage.
  const double embedding_params = c.embedding_params;
  const double loss_params = l.pp == 1 ? c.output_params_pp1 : c.output_params_pp;
  const double mtp_params = c.mtp.dense_params + c.mtp_projection_params;
  const std::int32_t* counts = &ps.counts[split * np * nt];
  const std::int64_t N = o.num_gpus;
  const double dcp = static_cast<double>(l.dp * l.cp);
  const double edp = static_cast<double>(N / (l.etp * l.ep * l.pp));
  const double bw_dp = N / l.pp <= o.gpus_per_node ? f.link : f.inter;

  const double sequences = nominal_sequences(o);
  const double micro_batches = sequences / (static_cast<double>(l.micro_batch_size) * static_cast<double>(l.dp));
  double worst = -1, worst_dp = 0, worst_fsdp = 0, worst_offload = 0;
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
    if (r == 0) t += c.embedding.total();  // the first stage's first chunk runs the embedding
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
    const double shared = (dcp - 1) / dcp * dense + (edp - 1) / edp * expert;
    const double sync = shared * c.sync_bytes_per_param / bw_dp;
    worst_dp = std::max(worst_dp, sync);
    worst_fsdp = std::max(worst_fsdp, fsdp_extra_seconds(c, shared, micro_batches, bw_dp));
    worst_offload = std::max(worst_offload, offload_seconds(c, dense / dcp + expert / edp));
  }
  PlanScore s;
  const double p = static_cast<double>(l.pp), v = static_cast<double>(l.vpp);
  // Each virtual chunk sends its output forward and receives the gradient back: 2 v transfers
  // per micro-batch; neighbouring stages are N / PP ranks apart, in one node only if N fits.
  if (l.pp > 1) s.pp_seconds = 2 * v * c.p2p_bytes / (N <= o.gpus_per_node ? f.link : f.inter);
  worst += s.pp_seconds;
  s.micro_batches = micro_batches;
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
      s.launch_seconds += n * lt.launch;
    };
    for (std::size_t i = 0; i < nt; ++i) add(c.types[i], cr[i]);
    if (worst_rank == 0) add(c.embedding, 1);
    if (ps.loss[ri]) add(c.output, 1);
    if (ps.mtp[ri] > 0) add(c.mtp, ps.mtp[ri]);
  }
  const double slots = s.micro_batches + (p - 1) / v;
  s.dp_seconds = worst_dp;
  s.fsdp_seconds = worst_fsdp;
  s.offload_seconds = worst_offload;
  s.step_seconds = slots * worst + worst_dp + worst_fsdp + worst_offload;
  // The same work with no bubble, recompute, communication or memory-bound GEMM.
  s.ideal_seconds =
      sequences * static_cast<double>(o.base.seq_length) * c.ideal_flops_per_token / (static_cast<double>(N) * f.flops);
  s.score = s.step_seconds > 0 ? s.ideal_seconds / s.step_seconds : 0;
  s.communication_seconds =
      slots * (s.tp_seconds + s.ep_seconds + s.cp_seconds + s.pp_seconds) + s.dp_seconds + s.fsdp_seconds;
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
      return im.score_of(im.slice_cost(q, l.micro_batch_size, l.recompute, l.knobs, o), ps, si, l, o);
    }
  }
  throw UsageError(fmt::format("PP {} with stages {}/{}/{} and VPP {} is not a split the planner makes", l.pp,
                               l.first_stage_layers, l.middle_stage_layers, l.last_stage_layers, l.vpp));
}

}  // namespace mme
