#include "moe.hpp"

#include <cmath>

#include <fmt/core.h>

#include <mme/sdk/block_helpers.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/limits.hpp>
#include <mme/sdk/low_precision.hpp>

namespace mme::plugins {

void MoeModel::validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const {
  const auto& f = layer.mlp;
  require_layer_field(model, index, "num_experts", f.num_experts, limits::kMaxCount);
  require_layer_field(model, index, "moe_router_topk", f.top_k, limits::kMaxCount);
  if (f.top_k > f.num_experts)
    throw ConfigError(fmt::format("{}: layer {}: moe_router_topk = {} exceeds num_experts = {}", model.name, index,
                                  f.top_k, f.num_experts));
  require_layer_field(model, index, "moe_ffn_hidden_size", f.expert_ffn_hidden_size, limits::kMaxDimension);
  if (f.shared_expert_ffn_hidden_size < 0 || f.shared_expert_ffn_hidden_size > limits::kMaxDimension)
    throw ConfigError(fmt::format("{}: layer {}: shared expert size out of range", model.name, index));
}

void MoeModel::validate(const BlockContext& ctx) const {
  const auto& f = ctx.layer.mlp;
  if (f.num_experts % ctx.ep != 0)
    throw LayoutError(fmt::format("{} experts are not divisible by --ep {}", f.num_experts, ctx.ep));
  if (f.expert_ffn_hidden_size % ctx.etp != 0)
    throw LayoutError(
        fmt::format("moe_ffn_hidden_size {} is not divisible by --etp {}", f.expert_ffn_hidden_size, ctx.etp));
  if (f.shared_expert_ffn_hidden_size % ctx.tp != 0)
    throw LayoutError(
        fmt::format("shared expert size {} is not divisible by --tp {}", f.shared_expert_ffn_hidden_size, ctx.tp));
  // experts.py TEGroupedMLP.forward asserts "Bias is not supported with fused weighted squared relu".
  if (ctx.setup.fused_weighted_squared_relu && ctx.model.activation == "squared_relu" && !ctx.model.gated_linear_unit &&
      ctx.model.add_bias_linear)
    throw LayoutError(
        "--use-fused-weighted-squared-relu with linear biases in the experts: Megatron-LM refuses it (experts.py)");
  // Linear biases in the experts (--add-bias-linear, or a model whose linears have them): Megatron-LM
  // supports them only with ETP 1 (transformer_config.py __post_init__), and TE's grouped experts
  // only without the fused bias-dropout-add (experts.py, TEGroupedMLP.__init__).
  // The shared experts run MLP.forward (shared_experts.py), which raises for a fused quick-GEGLU.
  if (f.shared_expert_ffn_hidden_size > 0 && mlp_refuses_fused_activation(ctx))
    throw LayoutError(
        "shared experts with a quick-GEGLU and the bias-activation fusion: Megatron-LM's MLP.forward fuses only gelu "
        "and SwiGLU and raises (mlp.py, \"Only support fusion of gelu and swiglu\"); give --no-bias-gelu-fusion");
  if (ctx.model.add_bias_linear && ctx.etp > 1)
    throw LayoutError(fmt::format(
        "the experts' linear biases need --etp 1, not {}: Megatron-LM refuses them otherwise (transformer_config.py: "
        "\"Bias in Moe is only supported when ETP==1\")",
        ctx.etp));
  if (experts_refuse_bias_dropout_fusion(ctx.model, ctx.setup) && ctx.setup.bias_dropout_fusion.value_or(false))
    throw LayoutError(
        "the experts' linear biases with --moe-grouped-gemm need --no-bias-dropout-fusion: Megatron-LM refuses them "
        "otherwise (experts.py TEGroupedMLP: \"bias_dropout_fusion is not supported in TEGroupedMLP when "
        "add_bias_linear=True\")");
}

CheckedInt MoeModel::expert_capacity(const BlockContext& ctx) {
  const auto& f = ctx.layer.mlp;
  const auto& s = ctx.setup;
  // moe_utils.py get_capacity: ceil(num_tokens / num_experts * capacity_factor), with the router's
  // local tokens times top-k (router.py apply_router_token_dropping; the alltoall dispatcher's
  // preprocess). HybridEP counts the TP copies of every expert among the experts
  // (_HybridEPManager.setup_metadata: num_experts = TP x E).
  const bool hybridep = s.dispatcher == TokenDispatcher::kFlex && s.comm.flex_backend == FlexBackend::kHybridEP;
  const double experts = static_cast<double>(f.num_experts) * static_cast<double>(hybridep ? ctx.etp : 1);
  const double cap = std::ceil(static_cast<double>((CheckedInt(ctx.local_tokens) * f.top_k).value()) / experts *
                               *s.moe_capacity_factor);
  // A capacity beyond 2^62 tokens cannot be converted (nor held): the same error as any other
  // size that does not fit.
  if (!(cap < 0x1p62)) throw_overflow('*', ctx.local_tokens, f.top_k);
  return CheckedInt(static_cast<std::int64_t>(cap));
}

CheckedInt MoeModel::expert_tokens(const BlockContext& ctx) {
  const auto& f = ctx.layer.mlp;
  CheckedInt n = CheckedInt(ctx.local_tokens) * f.top_k * ctx.etp;
  // Every expert takes at most `capacity` tokens from each of the ETP x EP ranks that route to
  // it, so a rank's E / EP experts at most capacity x ETP x E.
  const CheckedInt capped = ctx.setup.moe_capacity_factor ? expert_capacity(ctx) * ctx.etp * f.num_experts : n;
  if (ctx.setup.moe_capacity_factor && ctx.setup.moe_pad_to_capacity) {
    // --moe-pad-expert-input-to-capacity: every expert's input is padded to the capacity
    // (token_dispatcher.py preprocess, drop_and_pad).
    return capped;
  }
  if (const auto& f_imb = ctx.setup.moe_routing_imbalance; f_imb && *f_imb > 1.0) {
    // The upper bound's pass: the busiest expert rank receives f times its even share
    // (TrainingSetup::moe_routing_imbalance; the point estimate leaves it unset).
    const double busiest = std::ceil(static_cast<double>(n.value()) * *f_imb);
    if (!(busiest < 0x1p62)) throw_overflow('*', n.value(), 2);
    n = CheckedInt(static_cast<std::int64_t>(busiest));
  }
  // A capacity factor drops what exceeds the capacity (apply_router_token_dropping).
  return ctx.setup.moe_capacity_factor ? std::min(n, capped) : n;
}

void MoeModel::parameters(const BlockContext& ctx, BlockParams& out) const {
  const auto& m = ctx.model;
  const auto& f = ctx.layer.mlp;
  const CheckedInt h = m.hidden_size, E = f.num_experts, F = f.expert_ffn_hidden_size;
  const CheckedInt S = f.shared_expert_ffn_hidden_size, t = ctx.tp;
  const CheckedInt g = m.gated_linear_unit ? 2 : 1;
  // The MoE layer's pre-MLP norm is a separate TENorm (replicated).
  add_param(out, "pre_mlp_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
  // TopKRouter weight [E, h], replicated on every TP/EP rank (router.py).
  add_param(out, "router", ParamGroup::kRouter, ShardClass::kReplicated, E * h, 1);
  if (m.add_bias_linear) add_param(out, "router_bias", ParamGroup::kRouter, ShardClass::kReplicated, E, 1);
  // DeepSeek-V3 expert bias (e_score_correction_bias): stored by HF checkpoints, held by
  // Megatron as an fp32 buffer, not a trained parameter: no per-rank gradient or optimizer.
  if (f.router_expert_bias)
    out.terms.push({"router_expert_bias", ParamGroup::kRouter, ShardClass::kReplicated, E.value(), 0, E.value()});
  // Routed experts: E/EP local experts, each fc1 [h -> g F] and fc2 [F -> h], split over ETP
  // (experts.py TEGroupedMLP). A token uses top-k of them.
  const CheckedInt per_expert = h * g * F + F * h + (m.add_bias_linear ? g * F + h : CheckedInt(0));
  const CheckedInt local = (E / ctx.ep) * per_expert / ctx.etp;
  out.terms.push({"routed_experts", ParamGroup::kRoutedExperts, ShardClass::kExpert, (E * per_expert).value(),
                  local.value(), (per_expert * f.top_k).value()});
  // TEGroupedLinear's per-expert weights: fc1 [g F / ETP, h], fc2 [h, F / ETP].
  add_gemm_weight(out, ParamGroup::kRoutedExperts, g * F / ctx.etp, h);
  add_gemm_weight(out, ParamGroup::kRoutedExperts, h, F / ctx.etp);
  if (S > 0) {
    // Shared experts: an ordinary TP-sharded MLP of width S (shared_experts.py).
    add_param(out, "shared_experts", ParamGroup::kSharedExperts, ShardClass::kTensorParallel, h * g * S + S * h, t);
    add_gemm_weight(out, ParamGroup::kSharedExperts, g * S / t, h);
    add_gemm_weight(out, ParamGroup::kSharedExperts, h, S / t);
    if (m.add_bias_linear) {
      add_param(out, "shared_experts_fc1_bias", ParamGroup::kSharedExperts, ShardClass::kTensorParallel, g * S, t);
      add_param(out, "shared_experts_fc2_bias", ParamGroup::kSharedExperts, ShardClass::kReplicated, h, 1);
    }
    // Qwen2-MoE shared_expert_gate: Linear h -> 1 (moe_shared_expert_gate).
    if (f.shared_expert_gate)
      add_param(out, "shared_expert_gate", ParamGroup::kSharedExperts, ShardClass::kReplicated, h, 1);
  }
  if (ctx.layer.post_mlp_norm)
    add_param(out, "post_mlp_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
  // LoRA adapters beside linear_fc1 and linear_fc2: one per routed expert, and the shared experts'.
  add_lora_params(ctx, out, kLoraLinearFc1, LoraScope::kRoutedExperts, h, g * F, E, f.top_k);
  add_lora_params(ctx, out, kLoraLinearFc2, LoraScope::kRoutedExperts, F, h, E, f.top_k);
  if (S > 0) {
    add_lora_params(ctx, out, kLoraLinearFc1, LoraScope::kSharedExperts, h, g * S);
    add_lora_params(ctx, out, kLoraLinearFc2, LoraScope::kSharedExperts, S, h);
  }
}

void MoeModel::activations(const BlockContext& ctx, BlockActivations& out) const {
  const auto& m = ctx.model;
  const auto& f = ctx.layer.mlp;
  const auto& rc = ctx.setup.recompute;
  const CheckedInt h = m.hidden_size, E = f.num_experts, F = f.expert_ffn_hidden_size;
  const CheckedInt S = f.shared_expert_ffn_hidden_size, t = ctx.tp, etp = ctx.etp, ep = ctx.ep;
  const CheckedInt T = ctx.tokens, Tl = ctx.local_tokens, ab = ctx.act_bytes;
  const CheckedInt g = m.gated_linear_unit ? 2 : 1;
  const CheckedInt N = expert_tokens(ctx);
  // A probability-weighted kernel runs the experts' activation: the fused SwiGLU or quick-GEGLU
  // (gated_activation_fused), or squared ReLU's under --use-fused-weighted-squared-relu
  // (experts.py TEGroupedMLP.forward: weighted_squared_relu_impl keeps fc1's output and the
  // probabilities).
  const bool expert_glu_fused = g == 2 ? gated_activation_fused(ctx, true)
                                       : m.activation == "squared_relu" && ctx.setup.fused_weighted_squared_relu;

  // Offload groups (transformer_layer.py, moe/experts.py): the pre-MLP TENorm in the mlp_norm
  // context, grouped fc1 in expert_fc1's, the expert activation in moe_act's; the router, the
  // token dispatcher, fc2 and the shared experts run outside any offload context.
  // The separate pre-MLP TENorm keeps its input ...
  // CUDA graphs' moe_router scope (transformer_layer.py _get_submodules_under_cudagraphs)
  // captures the pre-MLP norm, the router and the shared experts when they are not overlapped;
  // moe_preprocess the dispatcher's preprocess (mark_graph_scope below).
  const std::size_t router_scope_first = out.saved.size();
  add_act(out, "moe/norm_input", ab * Tl * h, kOffloadMlpNorm, Tl * h);
  // ... and its output is kept by the router and shared-expert GEMMs (or by the `moe`
  // checkpoint as its input); `layernorm` recompute discards and recomputes it.
  if (!rc.has(kRecomputeLayernorm) || rc.has(kRecomputeMoe)) add_act(out, "moe/norm_output", ab * Tl * h, 0, Tl * h);
  mark_graph_scope(out, router_scope_first, kGraphMoeRouter);
  const auto& comm = ctx.setup.comm;
  const bool flex = ctx.setup.dispatcher == TokenDispatcher::kFlex;
  const bool hybridep = flex && comm.flex_backend == FlexBackend::kHybridEP;
  // moe_layer.py shared_experts_compute: with --moe-shared-expert-overlap the shared experts run
  // from the dispatcher on a side stream, outside the `shared_experts` recompute checkpoint.
  const bool shared_overlap = S > 0 && comm.shared_expert_overlap;
  const CheckedInt score_b = f.router_fp32 ? CheckedInt(4) : ab;
  if (!rc.has(kRecomputeMoe)) {
    // router.py: logits and scores per token and expert (fp32), and the routing map (bool).
    const std::size_t router_first = out.saved.size();
    add_act(out, "moe/router", Tl * E * (score_b + 4 + 1), 0, Tl * E);
    mark_graph_scope(out, router_first, kGraphMoeRouter);
    if (flex && !hybridep) {
      const std::size_t preprocess_first = out.saved.size();
      // _DeepepManager.setup_metadata: torch.topk turns the routing map into int64 indices of
      // the TP x top-k chosen experts, which topk keeps for its backward.
      add_act(out, "moe/deepep_topk_indices", 8 * Tl * f.top_k * etp, 0, Tl * f.top_k * etp);
      mark_graph_scope(out, preprocess_first, kGraphMoePreprocess);
    }
    // Grouped GEMM fc1 keeps the dispatched tokens [N, h] (token_dispatcher.py permute + A2A).
    // Offloading expert_fc1 makes it keep the original 16-bit input instead of its FP8 copy
    // (experts.py set_save_original_input).
    const auto& off = ctx.setup.activation_offload;
    const bool original_input = off.fine_grained && (off.modules & kOffloadExpertFc1) != 0;
    // GroupedLinear quantizes the tokens of each local expert apart; their scale_inv are sized
    // here as one [N, h] tensor (padding per expert left out). Under LoRA the frozen grouped GEMMs
    // keep no input (grouped_linear.py: only with weight.requires_grad); the experts' adapters keep
    // their own.
    const bool frozen = lora_frozen(ctx);
    if (!frozen)
      add_act(out, "moe/expert_fc1_input", original_input ? ab * N * h : saved_gemm_input_bytes(ctx, N, h),
              kOffloadExpertFc1, N * h);
    add_lora_acts(ctx, out, kLoraLinearFc1, LoraScope::kRoutedExperts, N, h, false, N, g * F / etp);
    // The expert activation keeps fc1's output [N, g F / ETP] ...
    add_act(out, "moe/expert_fc1_output", ab * N * g * F / etp, kOffloadMoeAct, N * g * F / etp);
    // ... and fc2 keeps the activation output [N, F / ETP], unless moe_act recompute drops it.
    if (!rc.has(kRecomputeMoeAct)) {
      if (!frozen)
        add_act(out, "moe/expert_activation_output", saved_gemm_input_bytes(ctx, N, F / etp), 0, N * F / etp);
      add_lora_acts(ctx, out, kLoraLinearFc2, LoraScope::kRoutedExperts, N, F / etp, false, N, h);
      // SwiGLU and a gated quick_gelu have fused probability-weighted kernels
      // (weighted_bias_swiglu_impl, weighted_bias_quick_geglu_impl; off with --no-bias-swiglu-fusion
      // and --no-bias-gelu-fusion); otherwise experts.py bias_act_func multiplies the activation by
      // the routing probabilities in torch, which keeps the unscaled activation for the
      // probabilities' gradient ...
      // (torch's squared ReLU keeps relu's output, counted as fc1's above, for relu and pow alike.)
      if (!expert_glu_fused)
        add_act(out, "moe/expert_activation_unscaled", ab * N * F / etp, kOffloadMoeAct, N * F / etp);
      // ... and a gated one's glu() (experts.py bias_act_func) keeps act(x_glu) [N, F / ETP] for
      // the product with x_linear.
      if (g == 2 && !expert_glu_fused)
        add_act(out, "moe/expert_activation_glu_act", ab * N * F / etp, kOffloadMoeAct, N * F / etp);
      // ... and its clamped or offset inputs (block_helpers.hpp unfused_glu_extra_tensors).
      if (g == 2 && !expert_glu_fused && unfused_glu_extra_tensors(ctx.model) > 0)
        add_act(out, "moe/expert_activation_glu_clamped", unfused_glu_extra_tensors(ctx.model) * ab * N * F / etp,
                kOffloadMoeAct, N * F / etp);
    }
    // Routing probabilities of the dispatched tokens (fp32), applied inside the activation.
    add_act(out, "moe/permuted_probs", 4 * N, kOffloadMoeAct, N);
    if (S > 0 && (!rc.has(kRecomputeSharedExperts) || shared_overlap)) {
      // Shared experts on the full sequence: fc1 output and activation output (shared_experts.py).
      const std::size_t shared_first = out.saved.size();
      add_act(out, "moe/shared_fc1_output", ab * T * g * S / t, 0, T * g * S / t);
      if (!frozen) add_act(out, "moe/shared_activation_output", saved_gemm_input_bytes(ctx, T, S / t), 0, T * S / t);
      // The shared experts' adapters: fc1's takes the pre-MLP norm's output (kept above; under SP
      // the adapter gathers it itself), fc2's the activation output.
      add_lora_acts(ctx, out, kLoraLinearFc1, LoraScope::kSharedExperts, T, h, !ctx.sequence_parallel, T, g * S / t);
      add_lora_acts(ctx, out, kLoraLinearFc2, LoraScope::kSharedExperts, T, S / t, false, Tl, h);
      // shared_experts.py (MLP.forward, or linear_fc1_forward_and_act when overlapped): glu()
      // without the fused kernel keeps act(x_glu) [s, b, S/TP] for the product with x_linear.
      if (g == 2 && !gated_activation_fused(ctx, false)) {
        add_act(out, "moe/shared_activation_glu_act", ab * T * S / t, 0, T * S / t);
        if (unfused_glu_extra_tensors(ctx.model) > 0)
          add_act(out, "moe/shared_activation_glu_clamped", unfused_glu_extra_tensors(ctx.model) * ab * T * S / t, 0,
                  T * S / t);
      }
      if (!shared_overlap) mark_graph_scope(out, shared_first, kGraphMoeRouter);
    }
    if (shared_overlap && ctx.sequence_parallel && !frozen) {
      // shared_experts.py pre_forward_comm: the overlapped shared experts gather their input
      // over TP themselves (parallel_mode None), so fc1 keeps the gathered [T, h]
      // (set_save_original_input: in the activation dtype) instead of the local shard.
      add_act(out, "moe/shared_fc1_gathered_input", ab * T * h, 0, T * h);
    }
  }
  if (ctx.layer.post_mlp_norm) add_act(out, "moe/post_norm_input", ab * Tl * h, 0, Tl * h);
  add_act(out, "moe/bda_dropout_mask", bda_dropout_mask_bytes(ctx), 0, Tl * h);

  // Busiest moment: the dispatched tokens exist twice around the all-to-all (send and
  // receive buffers; DeepEP's receive buffer and its permuted copy), and in backward the
  // gradients of fc1's output and of the expert input. HybridEP dispatches and permutes in one
  // step (fused_a2a.py HybridEPDispatch: dispatch_with_permute), so only one [N, h] exists.
  CheckedInt transient = ab * N * h * (hybridep ? 1 : 2) + ab * N * g * F / etp;
  if (ctx.setup.dispatcher == TokenDispatcher::kAllGather) {
    // MoEAllGatherTokenDispatcher gathers the hidden states over the expert TP x EP group into
    // the global memory buffer (use_global_buffer=True), and the probabilities and routing map
    // into ordinary tensors.
    out.global_buffer = (ab * Tl * etp * ep * h).value();
    transient += 5 * Tl * etp * ep * E;
  }
  if (S > 0) {
    const CheckedInt shared = ab * T * (g * S + S) / t + ab * T * h;
    // Overlapped shared experts run their backward on the side stream next to the routed
    // experts' (shared_experts.py _BackwardStreamWait): both working sets at once.
    transient = shared_overlap ? transient + shared : std::max(transient, shared);
  }
  if (comm.ep_overlap) {
    // combined_1f1b.py / model_chunk_schedule_plan.py run(): this block's backward runs while the
    // next micro-batch's forward of the same layer has passed its pre-dispatch part (norm and
    // router), whose tensors exist next to the backward's working set.
    transient += ab * Tl * h * 2 + Tl * E * (score_b + 4 + 1);
  }
  out.transient = transient.value();
}

void MoeModel::costs(const BlockContext& ctx, BlockCosts& out) const {
  BlockParams params;
  parameters(ctx, params);
  add_gemm_costs(ctx, params, out);
  const auto& rc = ctx.setup.recompute;
  // `moe` recompute (moe_layer.py, checkpointing the whole MoE layer) runs router, shared and
  // routed experts again; `shared_experts` recompute only the shared experts.
  if (rc.has(kRecomputeMoe))
    out.recompute_flops += out.gemm_flops + out.expert_flops;
  else if (rc.has(kRecomputeSharedExperts))
    out.recompute_flops += group_gemm_flops(ctx, params, ParamGroup::kSharedExperts);
  add_tp_block_collectives(ctx, out, "moe_tp");
  // token_dispatcher.py: every token of the rank's TP share goes to top-k experts, once out
  // (dispatch) and once back (combine) per pass, by all-to-all over EP ((EP - 1) / EP of it
  // leaves the rank) and all-gathered / reduce-scattered over the ETP group.
  const double routed = static_cast<double>(ctx.tokens) / static_cast<double>(ctx.tp) *
                        static_cast<double>(ctx.layer.mlp.top_k) * static_cast<double>(ctx.model.hidden_size) *
                        static_cast<double>(ctx.act_bytes);
  const double ep = 2 * ring_bytes(routed, ctx.ep);
  const double etp = 2 * static_cast<double>(ctx.etp - 1) * routed;
  add_collective(out, "moe_dispatch_combine", CommGroup::kExpert, ep, ep);
  add_collective(out, "moe_expert_tp_gather", CommGroup::kExpertTensor, etp, etp);
  // The router [h -> E] (router.py, in the input's dtype), the shared experts' fc1/fc2
  // (shared_experts.py, TP-sharded) and the local experts' grouped fc1 [h -> (2) F] and fc2 [F -> h].
  const auto& f = ctx.layer.mlp;
  const double h = static_cast<double>(ctx.model.hidden_size), g = ctx.model.gated_linear_unit ? 2 : 1;
  add_gemm(ctx, out, "router", h, static_cast<double>(f.num_experts), GemmSplit::kReplicated, true);
  if (f.shared_expert_ffn_hidden_size > 0) {
    const double S = static_cast<double>(f.shared_expert_ffn_hidden_size);
    add_gemm(ctx, out, "shared_experts_fc1", h, g * S, GemmSplit::kColumn);
    add_gemm(ctx, out, "shared_experts_fc2", S, h, GemmSplit::kRow);
  }
  const double F = static_cast<double>(f.expert_ffn_hidden_size);
  add_expert_gemm(ctx, out, "experts_fc1", h, g * F, true);
  add_expert_gemm(ctx, out, "experts_fc2", F, h, false);
}

void register_moe(Registrar& registry) { registry.add_layer_model(std::make_shared<MoeModel>()); }

}  // namespace mme::plugins
