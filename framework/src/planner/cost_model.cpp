// The planner's step-time model (docs/planner.md, "The step-time model"): per layer kind and
// micro-batch, each GEMM at the efficiency of its sharded shape and dtype, the attention core,
// the memory-bound kernels, and the TP/CP/EP traffic that the overlaps of the setup do not hide;
// per pipeline rank the sum over its layers and the blocks around them, then the pipeline
// schedule, the data-parallel synchronisation and the optimizer step. Its figures come from the
// block models of the engine's layer table (EngineTables): their GEMMs, FLOPs, saved bytes,
// collective bytes and parameters under the slice's layout (LayerMemoryModel::costs,
// activations, parameters); the hardware figures from the GPU profile; four efficiency constants
// (StepTimeConstants) are calibrated on measured runs (tests/planner/calibration/calibrate_planner.cpp).
#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include "mme/engine/setup_checks.hpp"
#include "mme/sdk/error.hpp"

#include "planner/planner_internal.hpp"

namespace mme {

using namespace planning;

namespace {

// Hardware facts the model uses beyond the profile (docs/planner.md lists them):
// - NCCL's ring all-gather / reduce-scatter reach about 80 % of one direction of NVLink
//   (nccl-tests bus bandwidth on 8 H100s: about 360 GB/s of the 450 each way; the profiles give
//   the bidirectional 900), and about 85 % of a 400 Gb/s NIC (40-45 of 50 GB/s).
constexpr double kNvlinkShare = 0.4;  // of the bidirectional figure
constexpr double kNetworkShare = 0.85;
// - Hopper and Blackwell GEMM kernels (cuBLAS, CUTLASS) compute whole 128 x 128 (or 128 x 256)
//   output tiles: each output dimension is rounded up to a multiple of 128.
constexpr double kTile = 128;
// - FlashAttention's backward runs five matmuls of the forward's size (it recomputes Q K^T)
//   against the forward's two: 2.5x the forward FLOPs (Dao, FlashAttention-2, section 3.1).
constexpr double kFlashBackward = 2.5;
// - Adam's update (multi_tensor_adam, TE FusedAdam) is memory-bound: per parameter of the rank's
//   shard it reads the gradient and reads and writes the main parameter and both moments, and
//   writes the model's parameter (bytes from the setup's dtypes).

Figures figures_of(const PlanOptions& o) {
  Figures f;
  const auto& hw = *o.gpu;
  const StepTimeConstants& k = o.step_time;
  const double bf16 = std::max(hw.bf16_tflops, 1e-3) * 1e12;
  f.bf16_flops = bf16 * k.gemm_bf16;
  f.attention_flops = bf16 * k.attention;
  f.gemm_flops = f.bf16_flops;
  f.gemm_in_bytes = 2;
  if (o.base.precision == Precision::kFP8 && hw.fp8_tflops > 0) {
    // Transformer Engine's FP8 recipes (delayed, current/tensorwise, blockwise, MXFP8) run the
    // GEMMs of its linears on the FP8 tensor cores; NVFP4 (--fp4-format) on the FP4 ones.
    const bool fp4 = o.base.low_precision.fp4 && hw.fp4_tflops > 0;
    f.gemm_flops = (fp4 ? hw.fp4_tflops : hw.fp8_tflops) * 1e12 * k.gemm_fp8;
    f.gemm_in_bytes = fp4 ? 0.5 : 1;
  }
  if (o.base.precision == Precision::kFP32) {
    f.gemm_flops = f.bf16_flops = bf16 / 2 * k.gemm_bf16;  // TF32 tensor cores
    f.gemm_in_bytes = 4;
  }
  f.hbm = std::max(hw.hbm_bandwidth_gbps, 1e-3) * 1e9;
  f.link = std::max(hw.link_bandwidth_gbps, 1e-3) * 1e9 * kNvlinkShare;
  f.inter = std::max(plan_inter_node_bandwidth(o), 1e-3) * 1e9 * kNetworkShare;
  f.node = plan_gpus_per_node(o);
  f.elementwise_passes = k.elementwise_passes;
  const ElementBytes bytes = element_bytes(o.base);
  f.act_bytes = static_cast<double>(bytes.act);
  // Weights as the GEMMs read them: the parameters' dtype, or under FP8 the 1-byte copies TE
  // casts them to (the engine's other/te_fp8_weight_cache).
  f.weight_bytes = static_cast<double>(bytes.fp8 ? 1 : bytes.param);
  return f;
}

// A ceiling to whole GEMM tiles.
double tiles(double x) { return std::ceil(x / kTile) * kTile; }

// One GEMM [m, k] x [k, n] on a rank: its tile-rounded FLOPs at the rate of its dtype, or the HBM
// traffic of its operands and output when that takes longer (a roofline).
double gemm_pass(double m, double n, double k, double rate, double in_bytes, double out_bytes, double hbm) {
  const double compute = 2 * tiles(m) * tiles(n) * k / rate;
  const double traffic = ((m * k + k * n) * in_bytes + m * n * out_bytes) / hbm;
  return std::max(compute, traffic);
}

// A GEMM of a block: forward [m, k] x [k, n], input gradient [m, n] x [n, k] and, unless its
// weight is frozen (LoRA), weight gradient [k, m] x [m, n] accumulated in fp32 (main_grad,
// gradient_accumulation_fusion). Seconds of each pass, count times.
struct GemmPasses {
  double forward = 0, dgrad = 0, wgrad = 0;
};
GemmPasses gemm_seconds(const GemmTerm& g, const Figures& f, bool frozen) {
  const double rate = g.high_precision ? f.bf16_flops : f.gemm_flops;
  const double in = g.high_precision ? f.act_bytes : f.gemm_in_bytes;
  GemmPasses p;
  p.forward = g.count * gemm_pass(g.m, g.n, g.k, rate, in, f.act_bytes, f.hbm);
  p.dgrad = g.count * gemm_pass(g.m, g.k, g.n, rate, in, f.act_bytes, f.hbm);
  if (!frozen) p.wgrad = g.count * gemm_pass(g.k, g.n, g.m, rate, in, 4, f.hbm);
  return p;
}

// Transformer Engine's userbuffer overlap of the SP collectives (--tp-comm-overlap;
// transformer_engine/pytorch/module/base.py initialize_ub, its default methods) around one block
// of column-parallel GEMMs (QKV, FC1: their input all-gathered) and row-parallel ones (proj, FC2:
// their output reduce-scattered), `ag` and `rs` seconds of each collective per pass:
// - forward: the all-gather by ring exchange, chunk by chunk under the column GEMM; the
//   reduce-scatter pipelined with the row GEMM in 4 splits (the last split's shows), its
//   communication kernels on 16 SMs the GEMM then lacks;
// - backward: the output gradient's all-gather by ring exchange under the row GEMM's dgrad; the
//   input gradient's reduce-scatter in bulk (16 SMs) beside the column GEMM's wgrad (its dgrad
//   when the weight is frozen), and the column GEMMs run without those SMs.
// Only what outlasts its GEMM, and the SMs' share of the GEMMs beside them, shows.
constexpr double kUbSplits = 4;
// 16 of H100's 132 SMs (Blackwell's 148: 0.11).
constexpr double kUbSmShare = 16.0 / 132.0;
double tp_overlap_seconds(double ag, double rs, double ag_b, double rs_b, const GemmPasses& column,
                          const GemmPasses& row) {
  const double pipelined = 0.75 * std::max(0.0, rs - row.forward) + rs / kUbSplits;
  const double beside = column.wgrad > 0 ? column.wgrad : column.dgrad;
  const double exposed =
      std::max(0.0, ag - column.forward) + pipelined + std::max(0.0, ag_b - row.dgrad) + std::max(0.0, rs_b - beside);
  const double sm_margin = (row.forward + column.dgrad + column.wgrad) * kUbSmShare / (1 - kUbSmShare);
  return exposed + sm_margin;
}

// Seconds of `bytes` of an expert-parallel all-to-all (token_dispatcher.py) among `ep` ranks,
// spread evenly over the others. Expert ranks are ordered ETP fastest, then EP, so a node of
// `node` GPUs holds node / ETP ranks of the group: their share goes over NVLink, the rest over the
// network, in parallel. DeepEP and HybridEP (--moe-token-dispatcher-type flex) send a token once
// to each remote node that holds one of its top-k experts and forward it inside that node over
// NVLink (deep_ep internode dispatch): the network carries n (1 - (1 - 1/n)^k) / k of what the
// plain all-to-all sends to n nodes.
double all_to_all_seconds(double bytes, std::int64_t ep, std::int64_t etp, std::int64_t top_k, bool dedup,
                          const Figures& f) {
  if (ep <= 1 || bytes <= 0) return 0;
  const std::int64_t in_node = std::clamp<std::int64_t>(f.node / std::max<std::int64_t>(etp, 1), 1, ep);
  const double others = static_cast<double>(ep - 1);
  const double intra = bytes * static_cast<double>(in_node - 1) / others;
  double inter = bytes * static_cast<double>(ep - in_node) / others;
  if (dedup && inter > 0 && top_k > 0) {
    const double nodes = static_cast<double>(ep) / static_cast<double>(in_node), k = static_cast<double>(top_k);
    inter *= std::min(1.0, nodes * (1 - std::pow(1 - 1 / nodes, k)) / k);
  }
  return std::max(intra / f.link, inter / f.inter);
}

BlockCosts costs_of(const LayerMemoryModel& block, const BlockContext& ctx) {
  BlockCosts c;
  call_plugin("layer model costs", [&] { block.costs(ctx, c); });
  return c;
}

double forward_flops(const BlockCosts& c) { return c.gemm_flops + c.attention_flops + c.expert_flops; }

// The bytes a block keeps for backward per micro-batch: what its memory-bound kernels write
// forward and read backward (the elementwise term's measure).
double saved_bytes(const LayerMemoryModel& block, const BlockContext& ctx) {
  BlockActivations a;
  call_plugin("layer model activations", [&] { block.activations(ctx, a); });
  return static_cast<double>(sum_saved(a));
}

// A block's parameters per rank that the data-parallel collectives and the optimizer handle:
// all of them, or under LoRA only the adapters (the base is frozen: no gradient, no state).
struct TrainedParams {
  double dense = 0, expert = 0;
};
TrainedParams trained_params(const LayerMemoryModel& block, const BlockContext& ctx) {
  BlockParams p;
  call_plugin("layer model parameters", [&] { block.parameters(ctx, p); });
  TrainedParams out;
  const bool lora = ctx.setup.lora.on();
  for (const ParamTerm& t : p.terms) {
    if (lora && t.group != ParamGroup::kLoraAdapter) continue;
    (t.shard == ShardClass::kExpert ? out.expert : out.dense) += static_cast<double>(t.per_rank);
  }
  return out;
}

// What decides how a unit's communication overlaps (the setup's flags).
struct UnitRules {
  bool layer = false;  // a decoder (or MTP) layer, which recompute repeats
  bool full_recompute = false;
  bool attention_recompute = false;  // selective core_attn: the attention core again
  bool moe_recompute = false;        // selective moe: the dispatch and combine again
  bool tp_overlap = false;           // --tp-comm-overlap
  bool ep_overlap = false;           // --overlap-moe-expert-parallel-comm
  bool shared_overlap = false;       // --moe-shared-expert-overlap
  bool cp_ring = false;              // --cp-comm-type p2p (or a2a+p2p)
  bool dedup = false;                // the flex dispatcher (DeepEP, HybridEP)
  bool frozen = false;               // LoRA: the base weights have no weight gradient
  std::int64_t top_k = 0;
};

struct GroupBandwidth {
  double tp = 0, cp = 0, etp = 0;
  std::int64_t ep = 1, etp_size = 1;
};

// Seconds of a unit of blocks for one micro-batch on one rank: its GEMMs one by one, the
// attention core, the memory-bound kernels over its saved bytes, recompute, and the collectives
// the setup's overlaps leave exposed.
LayerTime unit_time(std::initializer_list<const BlockCosts*> blocks, double saved, const Figures& f,
                    const GroupBandwidth& bw, const UnitRules& r) {
  LayerTime t;
  double gemm_fwd = 0, gemm_bwd = 0, attention_fwd = 0, rc_attention = 0, rc_gemm = 0;
  double tp = 0, tp_fwd = 0, cp = 0, cp_fwd = 0, ep = 0, ep_fwd = 0, etp = 0, etp_fwd = 0, moe_dense_gemm = 0;
  double tp_overlapped = 0, tp_overlapped_fwd = 0;  // --tp-comm-overlap: what shows, all passes / forward
  for (const BlockCosts* c : blocks) {
    double block_dense = 0;
    const double tp_f = sum_forward_bytes(*c, CommGroup::kTensor) / bw.tp;
    const double tp_b = sum_backward_bytes(*c, CommGroup::kTensor) / bw.tp;
    if (!c->gemms.empty()) {
      GemmPasses column, row;  // the block's TP-split GEMMs (not the experts', not the replicated)
      for (const GemmTerm& g : c->gemms) {
        const GemmPasses p = gemm_seconds(g, f, r.frozen);
        gemm_fwd += p.forward, gemm_bwd += p.dgrad + p.wgrad;
        if (g.expert) continue;
        block_dense += p.forward + p.dgrad + p.wgrad;
        if (g.split == GemmSplit::kReplicated) continue;
        GemmPasses& side = g.split == GemmSplit::kRow ? row : column;
        side.forward += p.forward, side.dgrad += p.dgrad, side.wgrad += p.wgrad;
      }
      if (r.tp_overlap && (tp_f > 0 || tp_b > 0)) {
        if (column.forward > 0 && row.forward > 0) {
          // Half of each pass's bytes before the column GEMMs, half after the row GEMMs.
          tp_overlapped += tp_overlap_seconds(tp_f / 2, tp_f / 2, tp_b / 2, tp_b / 2, column, row);
          tp_overlapped_fwd += std::max(0.0, tp_f / 2 - column.forward) + 0.75 * std::max(0.0, tp_f / 2 - row.forward) +
                               tp_f / 2 / kUbSplits;
        } else {
          // One kind of GEMM (the output layer): its collectives beside it.
          const double fw = std::max(0.0, tp_f - column.forward - row.forward);
          tp_overlapped += fw + std::max(0.0, tp_b - column.dgrad - column.wgrad - row.dgrad - row.wgrad);
          tp_overlapped_fwd += fw;
        }
      }
    } else {
      // A block that lists no GEMM (an older plugin): its summed FLOPs at a large GEMM's rate,
      // or its weights' reads if those take longer, three passes.
      const double dense = std::max(c->gemm_flops / f.gemm_flops, c->weight_bytes / f.hbm);
      const double expert = std::max(c->expert_flops / f.gemm_flops, c->expert_weight_bytes / f.hbm);
      gemm_fwd += dense + expert, gemm_bwd += 2 * (dense + expert);
      block_dense += 3 * dense;
      if (r.tp_overlap) {
        tp_overlapped += std::max(0.0, tp_f + tp_b - block_dense);
        tp_overlapped_fwd += std::max(0.0, tp_f - dense);
      }
    }
    if (c->expert_flops > 0) moe_dense_gemm += block_dense;
    attention_fwd += c->attention_flops / f.attention_flops;
    if (r.attention_recompute) rc_attention += c->attention_flops / f.attention_flops;
    // Selective recompute's GEMM FLOPs (mlp, moe, shared_experts, mla_up_proj) at a GEMM's rate.
    rc_gemm += std::max(0.0, c->recompute_flops - (r.attention_recompute ? c->attention_flops : 0)) / f.gemm_flops;
    tp_fwd += sum_forward_bytes(*c, CommGroup::kTensor);
    tp += sum_forward_bytes(*c, CommGroup::kTensor) + sum_backward_bytes(*c, CommGroup::kTensor);
    cp_fwd += sum_forward_bytes(*c, CommGroup::kContext);
    cp += sum_forward_bytes(*c, CommGroup::kContext) + sum_backward_bytes(*c, CommGroup::kContext);
    ep_fwd += sum_forward_bytes(*c, CommGroup::kExpert);
    ep += sum_forward_bytes(*c, CommGroup::kExpert) + sum_backward_bytes(*c, CommGroup::kExpert);
    etp_fwd += sum_forward_bytes(*c, CommGroup::kExpertTensor);
    etp += sum_forward_bytes(*c, CommGroup::kExpertTensor) + sum_backward_bytes(*c, CommGroup::kExpertTensor);
  }
  t.gemm = gemm_fwd + gemm_bwd;
  t.attention = attention_fwd * (1 + kFlashBackward);
  // Norms, activation functions, RoPE, bias-dropout-add, FP8 casts and token permutation:
  // memory-bound kernels that write what backward reads (and read it back), a calibrated number
  // of passes over the saved bytes.
  // A block that counts some of these kernels itself (the loss) takes their saved bytes out.
  double counted = 0, counted_saved = 0;
  for (const BlockCosts* c : blocks) counted += c->elementwise_bytes, counted_saved += c->elementwise_saved_bytes;
  t.elementwise = (f.elementwise_passes * std::max(0.0, saved - counted_saved) + counted) / f.hbm;
  t.compute = t.gemm + t.attention + t.elementwise;
  t.forward = gemm_fwd + attention_fwd + t.elementwise / 3;
  const bool again = r.full_recompute && r.layer;
  if (again)
    t.recompute = t.forward;  // checkpointed layers run their forward again before backward
  else if (r.layer)
    t.recompute = rc_attention + rc_gemm;

  // Tensor parallelism (tensor_parallel/mappings.py): the SP all-gathers and reduce-scatters (or
  // all-reduces) around each block, exposed; under --tp-comm-overlap what tp_overlap_seconds
  // leaves of them.
  const double tp_s =
      r.tp_overlap ? tp_overlapped + (again ? tp_overlapped_fwd : 0) : (tp + (again ? tp_fwd : 0)) / bw.tp;
  // Context parallelism (TE attention/dot_product_attention/context_parallel.py): the p2p ring
  // sends the next K/V chunk while the core attends to the current one; all-gather and a2a
  // exchange before and after the core.
  double cp_s = (cp + (again ? cp_fwd : 0)) / bw.cp;
  if (r.cp_ring) cp_s = std::max(0.0, cp_s - t.attention);
  // Expert parallelism: dispatch and combine (token_dispatcher.py), forward and backward, again
  // under full or `moe` recompute; ETP's all-gather and reduce-scatter of the routed tokens.
  const bool ep_again = again || r.moe_recompute;
  double ep_s = all_to_all_seconds(ep + (ep_again ? ep_fwd : 0), bw.ep, bw.etp_size, r.top_k, r.dedup, f);
  if (r.ep_overlap)
    // combined_1f1b.py: one micro-batch's all-to-all runs under another's compute.
    ep_s = std::max(0.0, ep_s - t.compute);
  else if (r.shared_overlap)
    // --moe-shared-expert-overlap: the shared experts (and router) compute during the dispatch.
    ep_s = std::max(0.0, ep_s - moe_dense_gemm);
  ep_s += (etp + (ep_again ? etp_fwd : 0)) / bw.etp;
  t.tp = tp_s, t.cp = cp_s, t.ep = ep_s;
  return t;
}

void add_time(LayerTime& a, const LayerTime& b) {
  a.compute += b.compute, a.gemm += b.gemm, a.attention += b.attention, a.elementwise += b.elementwise;
  a.forward += b.forward, a.recompute += b.recompute, a.tp += b.tp, a.ep += b.ep, a.cp += b.cp;
  a.launch += b.launch;
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

// A rank's share of layers that the block method does not recompute (types_plain) and that it
// offloads, from its layer count n: min(n, VPP x k) of them recomputed, min(n, offload_layers)
// offloaded (or the fine-grained share of every layer).
struct RankShares {
  double plain = 0, offload = 0;
};
RankShares rank_shares(const SliceCost& c, const std::int32_t* counts, std::size_t nt, double vpp) {
  RankShares g;
  if (c.full_recompute_layers < 0 && c.offload_layers <= 0 && c.offload_share <= 0) return g;
  double layers = 0;
  for (std::size_t i = 0; i < nt; ++i) layers += counts[i];
  if (layers <= 0) return g;
  if (c.full_recompute_layers >= 0)
    g.plain = 1 - std::min(layers, vpp * static_cast<double>(c.full_recompute_layers)) / layers;
  g.offload = c.offload_share > 0 ? c.offload_share : std::min(layers, c.offload_layers) / layers;
  return g;
}

// Activation offloading (transformer_engine/pytorch/cpu_offload.py, the offload handler's
// double buffer): a layer's saved tensors go to the host on a side stream while the next layer
// runs forward, and come back while the layer after it runs backward. Per offloaded layer and
// micro-batch, what of each copy outlasts the compute it overlaps shows.
double offload_transfer_seconds(double saved, const LayerTime& t, double host_link) {
  const double copy = saved / host_link;
  const double backward = t.compute - t.forward + t.recompute;
  return std::max(0.0, copy - t.forward) + std::max(0.0, copy - backward);
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

Planner::Impl::Impl(const ModelSpec& model, const Registry& registry)
    : estimator(model, registry), tables(engine_tables(estimator)) {}

SliceCost Planner::Impl::slice_cost(const Slice& q, std::int64_t mbs, RecomputeVariant rc, const PlanKnobs& knobs,
                                    const PlanOptions& o) const {
  // What the block models see of this slice: the engine's block layout of its setup.
  PlanLayout pl;
  pl.tp = q.tp, pl.cp = q.cp, pl.ep = q.ep, pl.etp = q.etp;
  pl.micro_batch_size = mbs;
  pl.recompute = rc;
  pl.knobs = knobs;
  TrainingSetup setup = setup_for(pl, o);
  setup.parallel.sequence_parallel = q.sequence_parallel;
  return setup_cost(setup, q, o);
}

SliceCost Planner::Impl::setup_cost(const TrainingSetup& setup, const Slice& q, const PlanOptions& o) const {
  const ModelSpec& m = model();
  const EngineTables& im = tables;
  const Figures f = figures_of(o);
  const RecomputeSettings& rs = setup.recompute;
  // Transformer Engine's attention choice on this GPU, as Estimator::run makes it (flash, or the
  // unfused fallback that saves the score matrix).
  const BlockLayout b = block_layout(m, setup, resolve_attention(setup, o.gpu->compute_capability, &m).backend, 1.0);
  // The saved bytes the memory-bound kernels touch do not depend on recompute or offloading
  // (`plain`: what offloading would move), nor on LoRA (`base`): the base model's norms and
  // activations run as before, and no such kernel writes what the adapters keep, their inputs
  // (the base linears', or under SP their all-gather) and rank-r GEMM outputs
  // (block_helpers.hpp add_lora_acts); an adapter dropout (0 by default) is left out.
  BlockLayout plain = b;
  plain.setup.recompute = RecomputeSettings{};
  plain.setup.activation_offload = ActivationOffloadSettings{};
  BlockLayout base = plain;
  base.setup.lora = LoraSettings{};
  const std::int64_t node = f.node;
  GroupBandwidth bw;
  bw.tp = q.tp <= node ? f.link : f.inter;
  bw.cp = q.tp * q.cp <= node ? f.link : f.inter;
  bw.etp = q.etp <= node ? f.link : f.inter;
  bw.ep = q.ep;
  bw.etp_size = q.etp;
  UnitRules rules;
  rules.full_recompute = rs.granularity == RecomputeGranularity::kFull;
  rules.attention_recompute = rs.granularity == RecomputeGranularity::kSelective && rs.has(kRecomputeCoreAttn);
  rules.moe_recompute = rs.granularity == RecomputeGranularity::kSelective && rs.has(kRecomputeMoe);
  // Only TE's linears use the userbuffers (the local ones run NCCL's collectives, unhidden).
  rules.tp_overlap = setup.comm.tp_comm_overlap && setup.transformer_engine && q.tp > 1;
  rules.ep_overlap = setup.comm.ep_overlap;
  rules.shared_overlap = setup.comm.shared_expert_overlap;
  rules.cp_ring = setup.cp_comm_type == CpCommType::kP2P || setup.cp_comm_type == CpCommType::kA2AP2P;
  rules.dedup = setup.dispatcher == TokenDispatcher::kFlex;
  rules.frozen = setup.lora.on();
  auto lm_context = [&](const BlockLayout& layout, const LmBlock& block) {
    return make_context(m, layout, *block.layer, &block == &im.mtp_projection);
  };
  auto layer_rules = [&](const LayerSpec& spec) {
    UnitRules r = rules;
    r.layer = true;
    r.top_k = spec.mlp.top_k;
    return r;
  };

  SliceCost c;
  c.figures = f;
  c.types.reserve(im.types.size());
  // Full recompute by the block method checkpoints the first --recompute-num-layers layers of
  // each virtual chunk (transformer_block.py _checkpointed_forward; 0: none): the rest run as
  // without recompute (types_plain).
  const bool block_full = rules.full_recompute && rs.method == RecomputeMethod::kBlock;
  TrainingSetup no_full = setup;
  no_full.recompute = RecomputeSettings{};
  if (block_full) c.full_recompute_layers = rs.num_layers;
  // Activation offloading (TE cpu_offload.py: the saved tensors of the first
  // --cpu-offloading-num-layers layers; the fine-grained offload: a share of every layer's).
  const ActivationOffloadSettings& ao = setup.activation_offload;
  if (ao.fine_grained)
    c.offload_share = std::clamp(ao.fraction, 0.0, 1.0);
  else if (ao.cpu_offloading && ao.cpu_offloading_activations)
    c.offload_layers = static_cast<double>(ao.cpu_offloading_num_layers);
  const bool offloads = c.offload_share > 0 || c.offload_layers > 0;
  const double host = plan_host_link_bandwidth(o) * 1e9;
  for (const LayerType& lt : im.types) {
    const BlockContext ctx = make_context(m, b, lt.spec, false);
    const BlockContext ctx0 = make_context(m, base, lt.spec, false), kept = make_context(m, plain, lt.spec, false);
    const BlockCosts attn = costs_of(*lt.attention, ctx), mlp = costs_of(*lt.mlp, ctx);
    const double saved = saved_bytes(*lt.attention, ctx0) + saved_bytes(*lt.mlp, ctx0);
    LayerTime t = unit_time({&attn, &mlp}, saved, f, bw, layer_rules(lt.spec));
    t.launch = exposed_launch_seconds(t.total(), lt.moe, setup, o);
    for (const LayerMemoryModel* block : {lt.attention, lt.mlp}) {
      const TrainedParams p = trained_params(*block, ctx);
      t.dense_params += p.dense, t.expert_params += p.expert;
    }
    if (offloads)
      t.offload = offload_transfer_seconds(saved_bytes(*lt.attention, kept) + saved_bytes(*lt.mlp, kept), t, host);
    c.types.push_back(t);
    if (block_full) {
      // The same layer kind where the block method checkpoints nothing.
      UnitRules r = layer_rules(lt.spec);
      r.full_recompute = false;
      LayerTime u = unit_time({&attn, &mlp}, saved, f, bw, r);
      u.launch = exposed_launch_seconds(u.total(), lt.moe, no_full, o);
      u.dense_params = t.dense_params, u.expert_params = t.expert_params, u.offload = t.offload;
      c.types_plain.push_back(u);
    }
  }
  const BlockContext embedding_ctx = lm_context(b, im.embedding), output_ctx = lm_context(b, im.output_head);
  const BlockCosts embedding = costs_of(*im.embedding.model, embedding_ctx);
  const BlockCosts output = costs_of(*im.output_head.model, output_ctx);
  c.embedding = unit_time({&embedding}, saved_bytes(*im.embedding.model, lm_context(base, im.embedding)), f, bw, rules);
  c.output = unit_time({&output}, saved_bytes(*im.output_head.model, lm_context(base, im.output_head)), f, bw, rules);
  c.embedding_params = trained_params(*im.embedding.model, embedding_ctx).dense;
  BlockLayout staged = b;
  staged.pp = 1;
  c.output_params_pp1 = trained_params(*im.output_head.model, lm_context(staged, im.output_head)).dense;
  staged.pp = 2;
  c.output_params_pp = trained_params(*im.output_head.model, lm_context(staged, im.output_head)).dense;
  // An MTP depth: a decoder layer of the MTP kind, the projection and its own pass through the
  // output head (whose weights are the main model's).
  if (m.mtp_num_layers > 0) {
    const LayerType& lt = im.types[im.mtp_type];
    const BlockContext ctx = make_context(m, b, lt.spec, true);
    const BlockContext ctx0 = make_context(m, base, lt.spec, true);
    const BlockCosts attn = costs_of(*lt.attention, ctx), mlp = costs_of(*lt.mlp, ctx);
    const BlockContext projection_ctx = lm_context(b, im.mtp_projection);
    const BlockCosts projection = costs_of(*im.mtp_projection.model, projection_ctx);
    c.mtp = unit_time({&attn, &mlp}, saved_bytes(*lt.attention, ctx0) + saved_bytes(*lt.mlp, ctx0), f, bw,
                      layer_rules(lt.spec));
    add_time(c.mtp, unit_time({&projection}, saved_bytes(*im.mtp_projection.model, lm_context(base, im.mtp_projection)),
                              f, bw, rules));
    add_time(c.mtp, c.output);
    for (const LayerMemoryModel* block : {lt.attention, lt.mlp}) {
      const TrainedParams p = trained_params(*block, ctx);
      c.mtp.dense_params += p.dense, c.mtp.expert_params += p.expert;
    }
    c.mtp_projection_params = trained_params(*im.mtp_projection.model, projection_ctx).dense;
  }

  // The ideal: the model's forward FLOPs per token (one sequence on one GPU, the unpadded
  // vocabulary), three passes of it, at the dense peak of the precision.
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
  const double peak = o.base.precision == Precision::kFP8 && o.gpu->fp8_tflops > 0 ? o.gpu->fp8_tflops
                      : o.base.precision == Precision::kFP32                       ? o.gpu->bf16_tflops / 2
                                                                                   : o.gpu->bf16_tflops;
  c.peak_flops = std::max(peak, 1e-3) * 1e12;
  c.megatron_flops_per_sequence = megatron_model_flops(m, setup, 1.0);
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
  c.weight_bytes = f.weight_bytes;
  c.overlap_grad_reduce = setup.comm.overlap_grad_reduce;
  c.overlap_param_gather = setup.comm.overlap_param_gather;
  // Adam per parameter of the shard: the gradient read, the main parameter and both moments read
  // and written, the model parameter written.
  const OptimizerSettings& opt = setup.optimizer;
  c.optimizer_bytes_per_param = static_cast<double>(
      eb.grad + 2 * (dtype_bytes(opt.main_params) + dtype_bytes(opt.exp_avg) + dtype_bytes(opt.exp_avg_sq)) + eb.param);
  c.offload_fraction = setup.optimizer.cpu_offload_fraction;
  // HybridDeviceOptimizer: the main gradient of each offloaded parameter goes to the host, its
  // updated main parameter comes back.
  c.offload_bytes_per_param = static_cast<double>(eb.grad + dtype_bytes(setup.optimizer.main_params));
  c.offload_overlap = setup.optimizer.overlap_cpu_d2h_h2d;
  c.host_link = host;
  c.cpu_params_per_s = o.cpu_optimizer_params_per_second;
  // p2p_communication.py: [s / CP (/ TP with sequence parallelism), b, h]. With the interleaved
  // schedule the sends overlap the next chunk's compute (--overlap-p2p-communication, on by
  // default: arguments.py turns it off without VPP).
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
  const double bw_dp = N / l.pp <= f.node ? f.link : f.inter;
  const double p = static_cast<double>(l.pp), v = static_cast<double>(l.vpp);
  // Each virtual chunk sends its output forward and receives the gradient back: 2 v transfers
  // per micro-batch; neighbouring stages are N / PP ranks apart, in one node only if N fits.
  // Blocking under 1F1B; under the interleaved schedule they overlap the next chunk's compute.
  const double p2p = l.pp > 1 ? 2 * v * c.p2p_bytes / (N <= f.node ? f.link : f.inter) : 0;

  const double sequences = nominal_sequences(o);
  const double micro_batches = sequences / (static_cast<double>(l.micro_batch_size) * static_cast<double>(l.dp));
  double worst = -1, worst_dp = 0, worst_fsdp = 0, worst_offload = 0, worst_optimizer = 0, pp_exposed = 0;
  std::size_t worst_rank = 0;
  for (std::size_t r = 0; r < np; ++r) {
    const std::int32_t* cr = counts + r * nt;
    double t = 0, forward = 0, dense = 0, expert = 0;
    const RankShares g = rank_shares(c, cr, nt, v);
    for (std::size_t i = 0; i < nt; ++i) {
      const double n = cr[i];
      const LayerTime& lt = c.types[i];
      t += n * lt.total();
      if (g.plain > 0) t += n * g.plain * (c.types_plain[i].total() - lt.total());
      t += n * g.offload * lt.offload;
      forward += n * lt.forward;
      dense += n * lt.dense_params;
      expert += n * lt.expert_params;
    }
    const std::size_t ri = split * np + r;
    if (r == 0) t += c.embedding.total(), forward += c.embedding.forward;  // the first chunk runs the embedding
    // What the last chunk holds beyond its layers: the output layer, a tied embedding's copy
    // on the last stage, MTP.
    double dense_last = 0, expert_last = 0;
    if (ps.loss[ri]) {
      t += c.output.total(), forward += c.output.forward;
      dense_last += loss_params;
    }
    if (ps.embed[ri]) (r == 0 ? dense : dense_last) += embedding_params;
    if (ps.mtp[ri] > 0) {
      t += ps.mtp[ri] * c.mtp.total(), forward += ps.mtp[ri] * c.mtp.forward;
      dense_last += ps.mtp[ri] * mtp_params;
      expert_last += ps.mtp[ri] * c.mtp.expert_params;
    }
    dense += dense_last, expert += expert_last;
    const double sends = l.vpp > 1 ? std::max(0.0, p2p - t / v) : p2p;
    if (t + sends > worst) {
      worst = t + sends;
      worst_rank = r;
      pp_exposed = sends;
    }
    const double shared = (dcp - 1) / dcp * dense + (edp - 1) / edp * expert;
    // The distributed optimizer (distributed/param_and_grad_buffer.py): the gradients'
    // reduce-scatter after the last micro-batch's backward, the parameters' all-gather before the
    // next step's first forward; --overlap-grad-reduce and --overlap-param-gather hide them as the
    // schedule allows (exposed_grad_reduce, exposed_param_gather).
    const double shared_first = r == 0 && ps.embed[ri] ? (dcp - 1) / dcp * embedding_params : 0;
    const double shared_last = (dcp - 1) / dcp * dense_last + (edp - 1) / edp * expert_last;
    const planning::ChunkTraffic params{
        .layers = shared - shared_first - shared_last, .first = shared_first, .last = shared_last};
    const double per_byte = shared > 0 ? 1 / bw_dp : 0;
    const planning::ChunkTraffic rs = params.scaled(c.grad_bytes * per_byte),
                                 ag = params.scaled(c.weight_bytes * per_byte);
    const auto vn = static_cast<std::size_t>(l.vpp);
    const double reduce =
        c.overlap_grad_reduce ? planning::exposed_grad_reduce(rs, t - forward, r, np, vn) : rs.total();
    const double gather = c.overlap_param_gather ? planning::exposed_param_gather(ag, forward, r, np, vn) : ag.total();
    worst_dp = std::max(worst_dp, reduce + gather);
    worst_fsdp = std::max(worst_fsdp, planning::fsdp_extra_seconds(c, shared, micro_batches, bw_dp, t));
    const double shard = dense / dcp + expert / edp;
    worst_offload = std::max(worst_offload, offload_seconds(c, shard));
    worst_optimizer = std::max(worst_optimizer, (1 - c.offload_fraction) * shard * c.optimizer_bytes_per_param / f.hbm);
  }
  PlanScore s;
  s.pp_seconds = pp_exposed;
  s.micro_batches = micro_batches;
  s.bubble = (p - 1) / (s.micro_batches * v + p - 1);
  s.stage_seconds = worst;
  // The breakdown of the slowest rank.
  {
    const std::int32_t* cr = counts + worst_rank * nt;
    const std::size_t ri = split * np + worst_rank;
    auto add = [&s](const LayerTime& lt, double n) {
      s.compute_seconds += n * lt.compute;
      s.gemm_seconds += n * lt.gemm;
      s.attention_seconds += n * lt.attention;
      s.elementwise_seconds += n * lt.elementwise;
      s.recompute_seconds += n * lt.recompute;
      s.tp_seconds += n * lt.tp;
      s.ep_seconds += n * lt.ep;
      s.cp_seconds += n * lt.cp;
      s.launch_seconds += n * lt.launch;
    };
    const RankShares g = rank_shares(c, cr, nt, v);
    for (std::size_t i = 0; i < nt; ++i) {
      add(c.types[i], cr[i] * (1 - g.plain));
      if (g.plain > 0) add(c.types_plain[i], cr[i] * g.plain);
      s.activation_offload_seconds += cr[i] * g.offload * c.types[i].offload;
    }
    if (worst_rank == 0) add(c.embedding, 1);
    if (ps.loss[ri]) add(c.output, 1);
    if (ps.mtp[ri] > 0) add(c.mtp, ps.mtp[ri]);
  }
  // 1F1B and the interleaved schedule (pipeline_parallel/schedules.py): m micro-batches through
  // the slowest rank, plus the warm-up and cool-down of (p - 1) / v of its micro-batch time.
  const double slots = s.micro_batches + (p - 1) / v;
  s.dp_seconds = worst_dp;
  s.fsdp_seconds = worst_fsdp;
  s.offload_seconds = worst_offload;
  s.optimizer_seconds = worst_optimizer;
  s.step_seconds = slots * worst + worst_dp + worst_fsdp + worst_offload + worst_optimizer;
  // The same work with no bubble, recompute, communication or inefficiency.
  s.ideal_seconds = sequences * static_cast<double>(o.base.seq_length) * c.ideal_flops_per_token /
                    (static_cast<double>(N) * c.peak_flops);
  s.score = s.step_seconds > 0 ? std::min(1.0, s.ideal_seconds / s.step_seconds) : 0;
  const double gpu_seconds = s.step_seconds * static_cast<double>(N);
  if (gpu_seconds > 0) {
    s.tokens_per_second_per_gpu = sequences * static_cast<double>(o.base.seq_length) / gpu_seconds;
    // The slice's setup has the plan's TP, whose padded vocabulary Megatron's figure counts.
    s.model_tflops_per_gpu = sequences * c.megatron_flops_per_sequence / gpu_seconds / 1e12;
  }
  s.communication_seconds =
      slots * (s.tp_seconds + s.ep_seconds + s.cp_seconds + s.pp_seconds) + s.dp_seconds + s.fsdp_seconds;
  return s;
}

PlanScore Planner::score_setup(const TrainingSetup& s, const PlanOptions& options) const {
  const auto& im = *impl_;
  PlanOptions o = options;
  const TrainingSetup r = resolve_setup(s);
  o.base = r;
  o.num_gpus = r.parallel.world_size;
  o.micro_batch_sizes = {r.micro_batch_size};
  im.check_options(o);
  // The setup's own pipeline partition as the one split of its PP size.
  PpSplits ps;
  ps.pp = r.parallel.pp;
  Split split;
  split.vpp = r.parallel.vpp;
  ps.splits.push_back(split);
  im.count_layers(ps, {partition_pipeline(im.model().num_layers, im.model().mtp_num_layers, r.parallel, r.pipeline)});
  Slice q;
  q.tp = r.parallel.tp, q.cp = r.parallel.cp, q.ep = r.parallel.ep, q.etp = effective_etp(r.parallel);
  q.sequence_parallel = sequence_parallel_on(r.parallel);
  PlanLayout l;
  l.tp = q.tp, l.cp = q.cp, l.ep = q.ep, l.etp = q.etp, l.pp = r.parallel.pp, l.vpp = r.parallel.vpp;
  l.dp = r.parallel.dp;
  l.micro_batch_size = r.micro_batch_size;
  return im.score_of(im.setup_cost(r, q, o), ps, 0, l, o);
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
    if (s.first == l.first_stage_layers && s.last == l.last_stage_layers && s.middle == l.middle_stage_layers &&
        s.vpp == l.vpp && s.chunks == l.chunk_split && s.extra == l.chunk_extra_layers) {
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

const char* to_string(StepBound b) {
  switch (b) {
    case StepBound::kCompute: return "compute";
    case StepBound::kBubble: return "pipeline bubble";
    case StepBound::kTensorParallel: return "TP collectives";
    case StepBound::kExpertParallel: return "EP all-to-all";
    case StepBound::kContextParallel: return "CP exchange";
    case StepBound::kPipelineSends: return "pipeline sends";
    case StepBound::kDataParallel: return "DP traffic";
    case StepBound::kRecompute: return "recompute";
    case StepBound::kLaunches: return "kernel launches";
    case StepBound::kFsdp: return "Megatron-FSDP traffic";
    case StepBound::kOffload: return "optimizer offload";
  }
  return "?";
}

std::pair<StepBound, double> step_bound(const PlanScore& s) {
  if (!(s.step_seconds > 0)) return {StepBound::kCompute, 0};
  const double slots = s.micro_batches + (s.bubble > 0 ? s.bubble / (1 - s.bubble) * s.micro_batches : 0);
  const std::pair<StepBound, double> parts[] = {
      {StepBound::kBubble, (slots - s.micro_batches) * s.stage_seconds},
      {StepBound::kTensorParallel, slots * s.tp_seconds},
      {StepBound::kExpertParallel, slots * s.ep_seconds},
      {StepBound::kContextParallel, slots * s.cp_seconds},
      {StepBound::kPipelineSends, slots * s.pp_seconds},
      {StepBound::kDataParallel, s.dp_seconds},
      {StepBound::kRecompute, slots * s.recompute_seconds},
      {StepBound::kLaunches, slots * s.launch_seconds},
      {StepBound::kFsdp, s.fsdp_seconds},
      {StepBound::kOffload, s.offload_seconds + slots * s.activation_offload_seconds},
  };
  std::pair<StepBound, double> best{StepBound::kCompute, 0};
  for (const auto& [b, seconds] : parts)
    if (seconds > best.second) best = {b, seconds};
  const double share = best.second / s.step_seconds;
  if (share < 0.05) return {StepBound::kCompute, slots * s.compute_seconds / s.step_seconds};
  return {best.first, share};
}

}  // namespace mme
