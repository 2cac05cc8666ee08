// Per-layer CUDA graphs: what the graphs capture of each layer kind, the static buffers they keep
// and the phases of a step with them (cuda_graphs.hpp says how Megatron-LM captures them).
#include "cuda_graphs.hpp"

#include <algorithm>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

namespace mme {

namespace {

// transformer_config.py __post_init__: the local implementation does not tell moe_router and
// moe_preprocess apart, so either one sets both.
std::uint32_t graph_modules(const CudaGraphSettings& g) {
  std::uint32_t m = g.modules;
  if (g.impl == CudaGraphImpl::kLocal && (m & (kGraphMoeRouter | kGraphMoePreprocess)))
    m |= kGraphMoeRouter | kGraphMoePreprocess;
  return m;
}

// One static hidden-states input of a layer's graph, [s/TP (SP)/CP, b, h] in bf16 (module.py
// GraphableMegatronModule.get_layer_static_inputs); a layer output's gradient is as large.
CheckedInt hidden_state_bytes(const BlockLayout& b, CheckedInt hidden) {
  return CheckedInt(2) * b.local_tokens * hidden;
}

CheckedInt sum_terms(const BlockActivations& a, std::uint32_t partial_scope) {
  CheckedInt sum = 0;
  for (const auto& t : a.saved)
    if (partial_scope == 0 || (t.graph_scope & partial_scope)) sum += t.bytes;
  return sum;
}

}  // namespace

void validate_cuda_graphs(const ModelSpec& m, const TrainingSetup& s) {
  const CudaGraphSettings& g = s.cuda_graph;
  if (!g.on()) return;
  const std::uint32_t mods = graph_modules(g);
  if (g.warmup_steps < 0) throw LayoutError("--cuda-graph-warmup-steps must not be negative");
  // transformer_config.py __post_init__.
  if (s.activation_offload.cpu_offloading) throw LayoutError("CUDA graphs not supported with CPU offloading.");
  if (s.activation_offload.fine_grained)
    throw LayoutError(
        "CUDA graphs with fine-grained activation offloading are not modelled (the graphs' timing of the offloads, "
        "--delay-offload-until-cuda-graph)");
  if ((mods & kGraphMoe) && (mods & kGraphMoeRouter))
    throw LayoutError("cuda_graph_modules must not contain both moe and moe_router.");
  if ((mods & kGraphMoePreprocess) && !(mods & kGraphMoeRouter))
    throw LayoutError("moe_preprocess cuda graph is only supported with moe_router cuda graph.");
  const bool any_moe =
      std::any_of(m.layers.begin(), m.layers.end(), [](const LayerSpec& l) { return l.mlp.num_experts > 1; });
  const bool any_dense =
      std::any_of(m.layers.begin(), m.layers.end(), [](const LayerSpec& l) { return l.mlp.num_experts <= 1; });
  if (!any_moe && (mods & (kGraphMoe | kGraphMoeRouter)))
    throw LayoutError("moe cuda graph is only supported for MoE.");
  if (any_moe && !any_dense && (mods & kGraphMlp))
    throw LayoutError("mlp cuda graph is only supported for dense layers, but not found in the model.");
  const bool drop_and_pad = s.moe_capacity_factor && s.moe_pad_to_capacity;
  if (any_moe && (mods & kGraphMoe) && !drop_and_pad)
    throw LayoutError("moe cuda graph is only supported with drop-padding MoE.");
  if (any_moe && !drop_and_pad && (mods & kGraphMoePreprocess) && s.dispatcher == TokenDispatcher::kAllToAll &&
      s.moe_capacity_factor)
    throw LayoutError(
        "moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations in the "
        "preprocess step.");
  const auto& rc = s.recompute;
  if (rc.granularity == RecomputeGranularity::kFull)
    throw LayoutError("full recompute is only supported with full iteration CUDA graph.");
  if (g.impl == CudaGraphImpl::kTransformerEngine && rc.has(kRecomputeMoe) && (mods & kGraphMoeRouter))
    throw LayoutError(
        "moe recompute is not supported with moe_router CUDA graph with: --cuda-graph-impl transformer_engine.");
  const bool whole = mods == 0;
  if (s.attention_dropout.value_or(m.attention_dropout) != 0.0 && (whole || (mods & kGraphAttn)) &&
      rc.has(kRecomputeCoreAttn))
    throw LayoutError("attention dropout is not supported with graphed attention recomputation.");
  if (s.hidden_dropout.value_or(m.hidden_dropout) != 0.0 && (((whole || (mods & kGraphMlp)) && rc.has(kRecomputeMlp)) ||
                                                             ((whole || (mods & kGraphMoe)) && rc.has(kRecomputeMoe))))
    throw LayoutError("hidden dropout is not supported with graphed MLP/MoE recomputation.");
  // transformer_layer.py _te_cuda_graph_replay_impl.
  if (s.comm.ep_overlap && any_moe && (whole || (mods & kGraphMoe)))
    throw LayoutError("EP overlap must be disabled when CUDA graph captures the whole MLP/MoE part.");
  // transformer_config.py __post_init__, under overlap_moe_expert_parallel_comm: TE graphs may
  // not take the mlp scope either (the dense layers' MLP beside the MoE layers').
  if (s.comm.ep_overlap && g.impl == CudaGraphImpl::kTransformerEngine && (mods & kGraphMlp))
    throw LayoutError("CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm.");
}

void evaluate_layer_graphs(const ModelSpec& m, const BlockLayout& blocks, const LayerSpec& layer, bool moe,
                           TypeEval& e) {
  const CudaGraphSettings& g = blocks.setup.cuda_graph;
  LayerGraphs& out = e.graphs;
  out = LayerGraphs{};
  if (!g.on()) return;
  const std::uint32_t mods = graph_modules(g);
  const bool whole = mods == 0;
  // transformer_layer.py _get_submodules_under_cudagraphs and cuda_graphs.py _layer_is_graphable.
  const bool attn_in = whole || (mods & kGraphAttn);
  const bool mlp_in = whole || (moe ? (mods & kGraphMoe) : (mods & kGraphMlp));
  const std::uint32_t partial = moe && !mlp_in ? mods & (kGraphMoeRouter | kGraphMoePreprocess) : 0;
  // The working set the layer adds beyond its blocks' (the weight gradient without gradient
  // accumulation fusion) goes with either part.
  const CheckedInt blocks_transient = std::max(e.attn_acts.transient, e.mlp_acts.transient);
  const CheckedInt extra = e.transient - blocks_transient;
  out.graphed = attn_in || mlp_in || partial != 0;
  if (!out.graphed) {
    out.transient_outside = e.transient;
    return;
  }
  out.attention_inside = attn_in;
  if (attn_in) out.saved += sum_saved(e.attn_acts);
  if (mlp_in) out.saved += sum_saved(e.mlp_acts);
  if (partial) out.saved += sum_terms(e.mlp_acts, partial);
  out.transient_inside = std::max(attn_in ? CheckedInt(e.attn_acts.transient) : CheckedInt(0),
                                  mlp_in ? CheckedInt(e.mlp_acts.transient) : CheckedInt(0)) +
                         extra;
  out.transient_outside = std::max(attn_in ? CheckedInt(0) : CheckedInt(e.attn_acts.transient),
                                   mlp_in ? CheckedInt(0) : CheckedInt(e.mlp_acts.transient)) +
                          extra;
  // TE graph.py: one gradient buffer per output that requires grad. The layer's output (the
  // hidden states, [s/TP (SP)/CP, b, h] bf16); a partial MoE graph returns the normed hidden
  // states, the fp32 routing probabilities [local tokens, experts], the residual and the shared
  // experts' output when they are not overlapped (transformer_layer.py _te_cuda_graph_capture).
  const CheckedInt hidden = hidden_state_bytes(blocks, m.hidden_size);
  out.grad_output_bytes = hidden;
  if (partial) {
    out.grad_output_bytes = 2 * hidden + CheckedInt(4) * blocks.local_tokens * layer.mlp.num_experts;
    if (layer.mlp.shared_expert_ffn_hidden_size > 0 && !blocks.setup.comm.shared_expert_overlap)
      out.grad_output_bytes += hidden;
  }
}

void StageGraphs::add_layers(const StagePlan& plan, const TypeEval& e, CheckedInt n, std::int64_t mb) {
  eager_transient = std::max(eager_transient, e.graphs.transient_outside);
  if (!e.graphs.graphed || n == 0) return;
  saved += n * e.graphs.saved * mb;
  transient = std::max(transient, e.graphs.transient_inside);
  grad_outputs = std::max(grad_outputs, e.graphs.grad_output_bytes);
  // module.py / transformer_layer.py get_layer_static_inputs: hidden_states in bf16 and, with the
  // attention inside the graph, a causal mask (bool [b, 1, s/CP, s]); _get_sample_arguments
  // reuses a buffer set once its micro-batch's backward is done, so one set per layer and
  // micro-batch in flight.
  CheckedInt per_input = hidden_state_bytes(plan.blocks, plan.h);
  if (e.graphs.attention_inside) {
    const auto& s = plan.s;
    per_input += CheckedInt(s.micro_batch_size) * (s.seq_length / s.parallel.cp) * s.seq_length;
  }
  static_inputs += n * mb * per_input;
}

CheckedInt graph_buffers(const StagePlan& plan, const StageGraphs& g) {
  if (g.static_inputs == 0) return 0;
  // TE graph.py with _reuse_graph_input_output_buffers: the static outputs and all but the last
  // inputs' gradients (within a chunk and across chunks) are weak references; the gradient
  // buffers of one output signature stay.
  return g.static_inputs + g.grad_outputs + 2 * hidden_state_bytes(plan.blocks, plan.h);
}

GraphPhases graph_phases(const CudaGraphSettings& cg, const StageGraphs& g, CheckedInt buffers, CheckedInt base,
                         CheckedInt saved, CheckedInt transient) {
  GraphPhases out;
  if (!cg.on()) return out;
  out.capture = base + buffers + g.saved + g.transient;
  out.replay = base + buffers + (saved - g.saved) + g.eager_transient;
  const bool eager_steps = cg.impl == CudaGraphImpl::kLocal || cg.warmup_steps > 0;
  if (eager_steps) out.eager = base + saved + transient;
  out.pool = g.saved + g.transient;
  return out;
}

void add_graph_assumptions(const CudaGraphSettings& g, std::vector<std::string>& out) {
  if (!g.on()) return;
  const std::string scope = g.modules == 0 ? "the whole layer" : cuda_graph_modules_to_string(graph_modules(g));
  out.push_back(fmt::format(
      "CUDA graphs ({}, {}): the graphed scopes' activations live in the graphs' private pool, allocated during the "
      "capture and reserved but not allocated while the graphs replay; the static inputs and gradient buffers stay "
      "allocated (TE >= 2.7 buffer reuse assumed)",
      to_string(g.impl), scope));
  if (g.impl == CudaGraphImpl::kTransformerEngine && g.warmup_steps == 0)
    out.emplace_back(
        "--cuda-graph-warmup-steps 0: no eager step runs before the capture, so the peak is the capture's "
        "or a replayed step's");
}

}  // namespace mme
