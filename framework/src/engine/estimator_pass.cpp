// One pass of the estimate: Pass builds the inputs of each phase (estimator_phases.hpp)
// once, estimate_stage runs the phases for one pipeline stage, point_estimate makes the point
// estimate of them, and add_assumptions words what the pass assumed.
#include <algorithm>
#include <cstring>

#include <fmt/core.h>

#include "activation_offload.hpp"
#include "communication_buffers.hpp"
#include "cuda_graphs.hpp"
#include "device_memory.hpp"
#include "estimator_phases.hpp"
#include "low_precision.hpp"
#include "thread_instance.hpp"

namespace mme {

namespace {

// `inflight`: the stage's micro-batches in flight per chunk (inflight_microbatches). Fills `st`, a
// new StageEstimate in place (the planner makes millions).
void estimate_stage(const Pass& ps, std::int64_t r, const std::vector<std::int64_t>& inflight, StageEstimate& st) {
  const StagePlan& plan = ps.stages;
  const TrainingSetup& s = plan.s;
  st.pp_rank = r;
  ComponentSink comps(ps.options.components);
  // 1. The stage's layers and what its micro-batches in flight keep.
  const StageLayers layers = stage_layers(plan, r, inflight, comps, st);
  // 3. What the optimizer keeps for the stage's parameters: weights, gradients, states.
  const ModelState state = model_state(s, ps.parameters, layers, comps, st);
  // 2. The framework's buffers.
  const StageBuffers buffers = stage_buffers(plan, ps.workspaces, ps.options.compute_capability, layers, state, comps);
  st.other_bytes = buffers.total.value();
  st.dummy_wgrad_bytes = buffers.dummy_wgrads.value();
  // Newer Megatron-LM takes the output layer's placeholder from TE's cache too (layers.py
  // get_dummy_wgrad): its [V/TP, h] then stays; the bound's (StageEstimate).
  if (r == plan.p - 1 && s.gradient_accumulation_fusion && !s.lora.on() && s.fsdp.kind != FsdpKind::kTorchFsdp2)
    st.cached_output_wgrad_bytes = (plan.blocks.vocab_local * plan.h * plan.blocks.act_bytes).value();
  // Newer TE's fp32 loss gradient (language_model.cpp OutputHeadModel::activations): beside the
  // logits in its forward (6 B per logit against the in-place kernel's 2), or cast back beside
  // them in backward; at most 4 B per logit more, per loss (the main one and each MTP depth's).
  if (r == plan.p - 1 && s.cross_entropy_fusion && s.cross_entropy_te)
    st.te_loss_fp32_gradient_bytes =
        (CheckedInt(4) * plan.blocks.tokens * plan.blocks.vocab_local * (1 + plan.im.model.mtp_num_layers)).value();
  // Communication overlap (communication_buffers.cpp): the combined 1F1B schedule's extra
  // attention block; the userbuffers and the bucket padding count in the upper bound only.
  const StageCommunication comm =
      stage_communication(plan, ps.parameters, r, state.trained_dense, state.trained_expert);
  st.outside_allocator_bytes = comm.userbuffers.value();
  st.bucket_padding_bytes = comm.bucket_padding.value();
  // The peak of a step is the larger of its phases, not their sum.
  const CheckedInt static_bytes = state.weights + state.gradients + state.optimizer + buffers.total;
  st.static_bytes = static_bytes.value();
  forward_backward_peak(plan, layers, state, buffers, comm.ep_overlap_saved, static_bytes, comps, st);  // 2.
  optimizer_step_peak(state, static_bytes, st);                                                         // 3.
  st.total_bytes = std::max({st.forward_backward_bytes, st.optimizer_step_bytes, st.cuda_graph_capture_bytes});
  st.peak_phase = st.cuda_graph_capture_bytes > std::max(st.forward_backward_bytes, st.optimizer_step_bytes)
                      ? "cuda-graph-capture"
                  : st.optimizer_step_bytes > st.forward_backward_bytes ? "optimizer-step"
                                                                        : "forward-backward";
  st.inflight_microbatches = inflight.front();
  st.components = comps.take();
}

// The assumptions the report lists (the planner asks for none).
void add_assumptions(const Pass& ps, Estimate& est) {
  // The pass's values under the names the terms below use.
  const auto& s = ps.stages.s;
  const auto& attn = ps.attn;
  const auto& p = ps.stages.p;
  const auto& im = ps.stages.im;
  auto& a = est.assumptions;
  a.push_back(fused_kernel_attention(attn.backend) ? attn.reason + ": no s^2 score tensors" : attn.reason);
  if (!s.environment_used.empty()) {
    std::string env;
    for (const auto& e : s.environment_used) env += (env.empty() ? "" : ", ") + e;
    a.push_back("environment: " + env);
  }
  if (!s.environment_ignored.empty()) {
    std::string env;
    for (const auto& e : s.environment_ignored) env += (env.empty() ? "" : ", ") + e;
    a.push_back("environment without a memory effect mme models: " + env);
  }
  if (s.num_micro_batches == 0 && p > 1)
    a.push_back("global batch size not given: enough micro-batches assumed to fill the pipeline");
  if (im.any_moe)
    a.push_back(s.moe_capacity_factor
                    ? fmt::format("MoE capacity factor {}{}", *s.moe_capacity_factor,
                                  s.moe_pad_to_capacity ? ", expert inputs padded to capacity" : "")
                    : "dropless MoE with balanced routing (each rank receives its average share of tokens)");
  a.push_back(fmt::format("{} cross entropy: fp32 [tokens, vocab/TP] kept for backward",
                          !s.cross_entropy_fusion ? "unfused"
                          : s.cross_entropy_te    ? "fused (te)"
                                                  : "fused (native)"));
  if (!s.gradient_accumulation_fusion)
    a.push_back("no gradient accumulation fusion: each weight gradient is a separate tensor before it joins main_grad");
  // fused_bias_dropout.py: the same function, compiled or eager; both keep dropout's 1-byte mask.
  if (!s.bias_dropout_fusion.value_or(true))
    a.push_back(experts_refuse_bias_dropout_fusion(im.model, s)
                    ? "no bias-dropout-add fusion, which Megatron-LM refuses for the experts' linear biases under "
                      "grouped GEMM (experts.py TEGroupedMLP; a launch needs --no-bias-dropout-fusion): the eager "
                      "bias-dropout-add keeps the same dropout mask (no memory effect)"
                    : "no bias-dropout-add fusion: the eager bias-dropout-add keeps the same dropout mask (no memory "
                      "effect)");
  if (s.create_attention_mask)
    a.push_back(
        "the dataloader's attention mask (--create-attention-mask-in-dataloader): a bool [b, 1, s/CP, s] per "
        "micro-batch on the first and last stages, kept until its backward only by recompute's checkpoints; "
        "without recompute it lives through the forward alone, and is not in the estimate");
  add_offload_assumptions(ps.stages, a);
  add_graph_assumptions(s.cuda_graph, a);
  for (const auto& st : est.stages) {
    if (st.step_only_bytes > 0) {
      a.push_back(
          "16-bit gradients: their fp32 copies exist only from the optimizer step to the next zero_grad, "
          "not next to the activations");
      break;
    }
  }
  add_communication_assumptions(ps.stages, a);
  add_low_precision_assumptions(s, ps.options.compute_capability, a);
  if (const std::string lora = lora_assumption(s.lora); !lora.empty()) a.push_back(lora);
  a.push_back(
      ps.options.device_memory
          ? "totals are allocator-visible bytes (torch.cuda.max_memory_allocated); the device total adds the caching "
            "allocator's segments (reserved) and what lies outside PyTorch (CUDA context, NCCL, TE userbuffers)"
          : "totals are allocator-visible bytes (torch.cuda.max_memory_allocated); the CUDA context, NCCL buffers "
            "and allocator fragmentation are covered by the fit verdict's reserve and headroom");
}

// StageSelection::kMaySetPeak: whether a middle stage can set the peak or the bound, given the
// middle stages evaluated before it. Every figure of a stage (estimate_stage and the bound,
// upper_bound.cpp) is a function of the layers its chunks hold and of the micro-batches in flight
// per chunk, and grows with the latter, except for what depends on the rank itself: the first
// stage's DDP buckets (bucket_padding_bytes) and embedding, the last stage's loss and cached
// output-layer placeholder, activation offloading (its schedule and the PP-rank delta), and terms
// not checked for it here: CUDA graphs, --first-last-layers-bf16 (the layers' own evaluation),
// the named components and the device total (the allocator's replay). A middle stage is
// dominated, and skipped, when one evaluated before it holds, chunk by chunk, as many layers of
// every kind and MTP layers, and at least as many micro-batches in flight.
//
// Whether a pass's stages are the planner's (StageSelection::kMaySetPeak) and free of the terms
// the reasoning above does not cover, so that PeakCandidates and StageMemo may apply.
bool stage_shortcuts_apply(const Pass& ps) {
  const StagePlan& plan = ps.stages;
  return ps.selection == StageSelection::kMaySetPeak && !ps.options.components && !ps.options.device_memory &&
         !plan.s.cuda_graph.on() && plan.layers->bf16_evals.empty() && !StageOffload(plan, 0).on();
}

class PeakCandidates {
 public:
  explicit PeakCandidates(const Pass& ps) : plan_(ps.stages) {
    const StagePlan& plan = ps.stages;
    on_ = plan.p > 3 && stage_shortcuts_apply(ps);
    if (on_) {
      // (Reused across the thread's calls: the planner makes millions.)
      struct Seen {
        std::vector<std::int64_t> v;
      };
      seen_ = &thread_instance<Seen>().v;
      seen_->clear();
    }
  }

  // Whether stage r must be evaluated; remembers it when it is.
  bool may_set_peak(std::int64_t r, const std::vector<std::int64_t>& inflight) {
    if (!on_ || r == 0 || r == plan_.p - 1) return true;
    // seen_: per evaluated middle stage, its rank and then its micro-batches in flight per chunk.
    const std::size_t v = inflight.size(), stride = v + 1;
    for (std::size_t at = 0; at + stride <= seen_->size(); at += stride) {
      const std::int64_t* mbs = seen_->data() + at + 1;
      bool covered = true;
      for (std::size_t i = 0; i < v && covered; ++i) covered = mbs[i] >= inflight[i];
      if (covered && same_layers((*seen_)[at], r)) return false;
    }
    if (seen_->size() < kRemembered * stride) {
      seen_->push_back(r);
      seen_->insert(seen_->end(), inflight.begin(), inflight.end());
    }
    return true;
  }

 private:
  static constexpr std::size_t kRemembered = 8;
  // Whether stages a and b hold, chunk by chunk, the same MTP layers, embedding, loss and
  // decoder layers of each kind.
  bool same_layers(std::int64_t a, std::int64_t b) const {
    const EngineTables& im = plan_.im;
    for (std::int64_t vr = 0; vr < plan_.v; ++vr) {
      const ChunkLayout& x = plan_.part->at(a, vr);
      const ChunkLayout& y = plan_.part->at(b, vr);
      if (x.mtp_layers != y.mtp_layers || x.embedding != y.embedding || x.loss != y.loss ||
          x.num_layers != y.num_layers)
        return false;
      for (std::size_t ti = 0; ti < im.types.size(); ++ti)
        if (im.count_in(ti, x.first_layer, x.num_layers) != im.count_in(ti, y.first_layer, y.num_layers)) return false;
    }
    return true;
  }

  const StagePlan& plan_;
  bool on_ = false;
  std::vector<std::int64_t>* seen_ = nullptr;
};

// StageSelection::kMaySetPeak: the stages this thread evaluated lately, by what decides them.
// A stage's estimate (estimate_stage) is a function of the pass's setup, its layer evaluations
// and the layers and micro-batches in flight of its chunks (PeakCandidates lists the exceptions,
// which turn the memo off too, and what depends on the rank: whether it is the first or the last
// stage). The setup enters through the layer evaluations: a LayerEvals is evaluated for one
// BlockLayout, which is the whole setup but its pipeline partition (the chunks here), the pass's
// attention backend and routed-token factor (here both the setup's and the blocks'), and VPP
// (here). So the planner's splits of a layout, whose stages often hold the same layers with the
// same micro-batches in flight, evaluate each such stage once. A hit compares the whole key; the
// slot a key hashes to holds the last stage that hashed there.
class StageMemo {
 public:
  // Builds the key of stage r of the pass; find and add use the last key built.
  void key(const Pass& ps, std::int64_t r, const std::vector<std::int64_t>& inflight) {
    const StagePlan& plan = ps.stages;
    const EngineTables& im = plan.im;
    const std::size_t nt = im.types.size();
    key_.resize(8 + static_cast<std::size_t>(plan.v) * (nt + 3));
    std::int64_t* k = key_.data();
    *k++ = static_cast<std::int64_t>(plan.layers->serial);
    *k++ = ps.options.compute_capability;
    *k++ = static_cast<std::int64_t>(plan.s.attention_backend);
    *k++ = plan.s.moe_routing_imbalance.has_value();
    const double imbalance = plan.s.moe_routing_imbalance.value_or(0.0);
    std::memcpy(k++, &imbalance, sizeof imbalance);  // its bits (no std::bit_cast in the web build's library)
    *k++ = plan.v;
    *k++ = plan.extra_warmup;
    *k++ = (r == 0 ? 1 : 0) + (r == plan.p - 1 ? 2 : 0);
    for (std::int64_t vr = 0; vr < plan.v; ++vr) {
      const ChunkLayout& ch = plan.part->at(r, vr);
      for (std::size_t ti = 0; ti < nt; ++ti) *k++ = im.count_in(ti, ch.first_layer, ch.num_layers);
      *k++ = ch.mtp_layers;
      *k++ = (ch.embedding ? 1 : 0) + (ch.loss ? 2 : 0);
      *k++ = inflight[static_cast<std::size_t>(vr)];
    }
    hash_ = fnv1a_words(key_);
  }
  const StageEstimate* find() const {
    const Slot& s = slots_[hash_ % kSlots];
    return s.filled && s.hash == hash_ && s.key == key_ ? &s.stage : nullptr;
  }
  void add(const StageEstimate& st) {
    Slot& s = slots_[hash_ % kSlots];
    s.filled = true;
    s.hash = hash_;
    s.key = key_;
    s.stage = st;
  }

 private:
  static constexpr std::size_t kSlots = 1024;
  struct Slot {
    bool filled = false;
    std::uint64_t hash = 0;
    std::vector<std::int64_t> key;
    StageEstimate stage;  // as estimate_stage made it (no chunks or components under kMaySetPeak)
  };
  std::vector<std::int64_t> key_;
  std::uint64_t hash_ = 0;
  std::vector<Slot> slots_ = std::vector<Slot>(kSlots);
};

}  // namespace

std::vector<StageEstimate> stage_estimates(const Pass& ps) {
  const StagePlan& plan = ps.stages;
  const TrainingSetup& s = plan.s;
  std::vector<StageEstimate> out;
  out.reserve(static_cast<std::size_t>(plan.p));
  // (Reused: the planner makes millions of passes.)
  struct Inflight {
    std::vector<std::int64_t> v;
  };
  std::vector<std::int64_t>& inflight = thread_instance<Inflight>().v;
  PeakCandidates candidates(ps);
  StageMemo* memo = stage_shortcuts_apply(ps) ? &thread_instance<StageMemo>() : nullptr;
  for (std::int64_t r = 0; r < plan.p; ++r) {
    inflight_microbatches(inflight, plan.p, plan.v, r, s.num_micro_batches,
                          s.pipeline.microbatch_group_size.value_or(0), plan.extra_warmup);
    if (!candidates.may_set_peak(r, inflight)) continue;
    if (memo) {
      memo->key(ps, r, inflight);
      if (const StageEstimate* known = memo->find()) {
        out.push_back(*known);
        out.back().pp_rank = r;
      } else {
        estimate_stage(ps, r, inflight, out.emplace_back());
        memo->add(out.back());
      }
      continue;
    }
    estimate_stage(ps, r, inflight, out.emplace_back());
    // The device total: the caching allocator's replay and what lies outside it (device_memory.cpp).
    if (ps.options.device_memory) add_device_memory(ps, out.back());
  }
  return out;
}

Estimate point_estimate(const EngineTables& im, const TrainingSetup& requested, const EstimateOptions& options,
                        const AttentionChoice& choice, StageSelection which) {
  Pass ps(im, requested, options, choice, choice.backend, 1.0, PassKind::kEstimate, which);
  const ModelSpec& m = im.model;
  StagePlan& plan = ps.stages;
  Estimate est;
  est.attention = ps.attn.backend;
  const Estimator::ParamCount& pc = im.params;
  const std::int64_t vocab = padded_vocab_size(m.vocab_size, plan.s.make_vocab_size_divisible_by, plan.s.parallel.tp);
  if (which == StageSelection::kEvery)  // (the planner reads no model summary)
    est.model = ModelSummary{m.name,    m.family, m.model_type, m.adapter,    pc.total,
                             pc.active, pc.mtp,   vocab,        m.num_layers, plan.h.value()};
  if (options.components && options.layer_breakdown) describe_layer_kinds(plan, est);
  est.stages = stage_estimates(ps);
  for (std::size_t r = 0; r < est.stages.size(); ++r)
    if (est.stages[r].total_bytes > est.stages[est.peak_stage].total_bytes) est.peak_stage = r;
  if (options.components) add_assumptions(ps, est);  // for people; the planner needs none
  if (options.components && options.device_memory) add_device_assumptions(ps, est.assumptions);
  if (options.device_memory) est.allocator_config = allocator_config_text(plan.s);
  est.setup = std::move(plan.s);
  return est;
}

}  // namespace mme
