// Phase 4 of an estimate, the bound (estimator_phases.hpp): what the point estimate cannot pin
// down, each a named mechanism (docs/memory-model.md, "Upper bound"): a second pass where the
// routing of MoE tokens or TE's attention kernel is uncertain, the allocator's block rounding,
// activation offloading's and CUDA graphs' extra memory, and the communication buffers outside
// PyTorch's allocator.
#include <algorithm>
#include <stdexcept>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

#include "communication_buffers.hpp"
#include "estimator_phases.hpp"
#include "moe_routing.hpp"

namespace mme {

namespace {

constexpr std::string_view kUnfusedFallbackTerm =
    "attention may fall back to unfused (score tensors of s^2 per head kept)";
constexpr std::string_view kFlashAttnTerm =
    "attention may run on flash-attn instead of cuDNN (Transformer Engine's FlashAttention keeps a "
    "second copy of a micro-batch's attention output per layer)";

// What the bound's pass evaluates differently from the point estimate's: the routed-token factor
// of the busiest expert rank and the attention backend the blocks see.
struct BoundCase {
  double imbalance = 1.0;
  AttentionBackend attention = AttentionBackend::kFlash;
  bool uncertain(const AttentionChoice& attn) const { return imbalance > 1.0 || attention != attn.backend; }
};

// `s`: the point estimate's resolved setup.
BoundCase bound_case(const EngineTables& im, const TrainingSetup& s, const AttentionChoice& attn) {
  BoundCase c;
  if (im.any_moe && !(s.moe_capacity_factor && s.moe_pad_to_capacity)) {
    // Routing imbalance: the busiest expert rank receives more than its even share (most of
    // all early in training); a capacity factor drops tokens beyond it (moe_utils.py
    // get_capacity), so it caps the excess. Forced balancing leaves only uniform routing's
    // chance fluctuation (moe_routing.hpp); a value the user gives wins.
    c.imbalance = s.moe_routing_imbalance      ? *s.moe_routing_imbalance
                  : s.moe_force_load_balancing ? uniform_routing_imbalance(im, s)
                                               : kDefaultMoeRoutingImbalance;
    if (s.moe_capacity_factor) c.imbalance = std::min(c.imbalance, std::max(1.0, *s.moe_capacity_factor));
  }
  c.attention = attn.may_fall_back_to_unfused ? AttentionBackend::kUnfused
                : attn.may_use_flash_attn     ? AttentionBackend::kFlash
                                              : attn.backend;
  return c;
}

// The bound's pass on the estimate's resolved setup: only its stages are read (no setup, model
// summary or components). `words`: a refused fallback is worded in `est`.
std::vector<StageEstimate> bound_stages(const EngineTables& im, const TrainingSetup& resolved,
                                        const EstimateOptions& options, const AttentionChoice& attn,
                                        const BoundCase& bound, bool words, StageSelection which, Estimate& est) {
  EstimateOptions quiet = options;
  quiet.components = false;
  quiet.layer_breakdown = false;
  quiet.bound_terms = false;
  quiet.device_memory = false;  // the bound's device total derives from the estimate's (finish_device_memory)
  try {
    return stage_estimates(Pass(im, resolved, quiet, attn, bound.attention, bound.imbalance, PassKind::kBound, which));
  } catch (const LayoutError& e) {
    if (bound.attention == attn.backend) throw;
    // A fallback the blocks refuse under this layout (unfused attention cannot run context
    // parallelism) is no state the run can reach: without flash-attn it stops instead.
    if (words) {
      est.assumptions.push_back(fmt::format(
          "no unfused-attention fallback in the upper bound: {}; without flash-attn this run stops instead", e.what()));
      std::erase(est.bound_terms, std::string(kUnfusedFallbackTerm));
    }
    return stage_estimates(Pass(im, resolved, quiet, attn, attn.backend, bound.imbalance, PassKind::kBound, which));
  }
}

// The largest of each extra the bound adds on a stage, for its terms.
struct BoundExtras {
  std::int64_t allocator_slack = 0, offload_slack = 0, graph_pool = 0, cached_wgrad = 0, te_loss_fp32 = 0;
};

// Each stage's upper_bytes from the worse of its two passes (`bound`: empty without a second
// pass; else the same stages, as both passes select them from the same partition and schedule),
// and the upper stage.
BoundExtras stage_upper_bytes(const std::vector<StageEstimate>& bound, Estimate& est) {
  BoundExtras x;
  if (!bound.empty() && bound.size() != est.stages.size())
    throw std::logic_error("upper bound: the passes evaluated different stages");
  for (std::size_t i = 0; i < est.stages.size(); ++i) {
    auto& st = est.stages[i];
    const StageEstimate& worst = bound.empty() ? st : bound[i];
    if (worst.pp_rank != st.pp_rank) throw std::logic_error("upper bound: the passes evaluated different stages");
    // The allocator's block rounding and what activation offloading may keep on the GPU apply to
    // the forward/backward phase of the worse pass.
    // With CUDA graphs a replayed step holds the graphs' private pool next to what it allocates
    // (cuda_graphs.hpp).
    const CheckedInt graphed = CheckedInt(worst.cuda_graph_replay_bytes) + worst.cuda_graph_pool_bytes;
    const CheckedInt fb = CheckedInt(std::max(worst.forward_backward_bytes, graphed.value())) +
                          worst.allocator_slack_bytes + worst.offload_slack_bytes;
    x.offload_slack = std::max(x.offload_slack, worst.offload_slack_bytes);
    x.graph_pool = std::max(x.graph_pool, worst.cuda_graph_pool_bytes);
    // Communication buffers outside the allocator and the buckets' padding, next to either phase
    // (communication_buffers.cpp).
    st.upper_bytes =
        (CheckedInt(std::max({st.total_bytes, worst.total_bytes, fb.value()})) + st.outside_allocator_bytes +
         st.bucket_padding_bytes + st.cached_output_wgrad_bytes + st.te_loss_fp32_gradient_bytes)
            .value();
    x.cached_wgrad = std::max(x.cached_wgrad, st.cached_output_wgrad_bytes);
    x.te_loss_fp32 = std::max(x.te_loss_fp32, st.te_loss_fp32_gradient_bytes);
    x.allocator_slack = std::max(x.allocator_slack, worst.allocator_slack_bytes);
    if (st.upper_bytes > est.stages[est.upper_stage].upper_bytes) est.upper_stage = i;
  }
  return x;
}

void add_extra_terms(const BoundExtras& x, Estimate& est) {
  add_communication_bound_terms(est, est.bound_terms);
  if (x.graph_pool > 0)
    est.bound_terms.push_back(
        fmt::format("CUDA graphs: the graphs' private memory pool ({} MiB at most on a stage), reserved but not "
                    "allocated while they replay",
                    x.graph_pool / kMiB));
  if (x.offload_slack > 0)
    est.bound_terms.push_back(
        fmt::format("activation offloading: a second layer's offloaded tensors on the GPU during backward ({} MiB "
                    "at most on a stage)",
                    x.offload_slack / kMiB));
  if (x.cached_wgrad > 0)
    est.bound_terms.push_back(
        fmt::format("the output layer's weight-gradient placeholder kept for the run, as Megatron-LM releases "
                    "after core_r0.14 keep it in Transformer Engine's cache ({} MiB on the loss stage)",
                    x.cached_wgrad / kMiB));
  if (x.te_loss_fp32 > 0)
    est.bound_terms.push_back(
        fmt::format("Transformer Engine's cross-entropy may keep an fp32 gradient beside the logits, as its code "
                    "newer than the 2.11 release does ({} MiB on the loss stage)",
                    x.te_loss_fp32 / kMiB));
  if (x.allocator_slack > 0)
    est.bound_terms.push_back(
        fmt::format("allocator block rounding: up to 1 MiB for each live activation tensor "
                    "above 1 MiB ({} MiB at most on a stage)",
                    x.allocator_slack / kMiB));
}

}  // namespace

void add_upper_bound(const EngineTables& im, const EstimateOptions& options, const AttentionChoice& attn, Estimate& est,
                     StageSelection which) {
  for (auto& st : est.stages) st.upper_bytes = st.total_bytes;
  est.upper_stage = est.peak_stage;
  if (!options.upper_bound) return;
  const BoundCase bound = bound_case(im, est.setup, attn);
  // The terms' text is worded only for a caller that shows it (the planner does not).
  const bool words = options.bound_terms;
  if (bound.imbalance > 1.0 && words)
    est.bound_terms.push_back(
        fmt::format("MoE routing imbalance: the busiest expert rank receives {:.4g}x its even share "
                    "of tokens ({})",
                    bound.imbalance,
                    !est.setup.moe_routing_imbalance && est.setup.moe_force_load_balancing
                        ? "the chance excess of random routing under --moe-router-force-load-balancing, passed with "
                          "probability below 0.1 %"
                        : "--moe-routing-imbalance"));
  if (bound.attention != attn.backend && words)
    est.bound_terms.emplace_back(bound.attention == AttentionBackend::kUnfused ? kUnfusedFallbackTerm : kFlashAttnTerm);
  const bool second_pass = bound.uncertain(attn) && est.peak().total_bytes <= options.bound_pass_up_to_bytes;
  const std::vector<StageEstimate> worse =
      second_pass ? bound_stages(im, est.setup, options, attn, bound, words, which, est) : std::vector<StageEstimate>{};
  const BoundExtras extras = stage_upper_bytes(worse, est);
  if (words) add_extra_terms(extras, est);
}

}  // namespace mme
