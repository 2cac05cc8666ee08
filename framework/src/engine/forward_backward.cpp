// Phase 2 of a pass, the forward/backward peak (estimator_phases.hpp): the framework's buffers
// that live for the whole run (workspaces, the global memory buffer, FP8/FP4 weight copies,
// CUDA graphs' static buffers) and the forward/backward phase of a step, with or without
// per-layer CUDA graphs (cuda_graphs.cpp).
// Each memory term names, in one comment line, the Megatron-LM behaviour it models.
#include <algorithm>

#include "estimator_phases.hpp"
#include "low_precision.hpp"
#include "weight_gradients.hpp"

namespace mme {

Workspaces workspaces(const TrainingSetup& s, int compute_capability, bool any_moe) {
  Workspaces w;
  const bool hopper_or_newer = compute_capability >= 90;
  // transformer_engine/pytorch/module/base.py get_workspace(): one cuBLAS workspace,
  // 32 MiB + 1 KiB on Hopper and newer, 4 MiB before.
  w.te = !s.transformer_engine ? 0 : hopper_or_newer ? 32 * kMiB + 1024 : 4 * kMiB;
  // PyTorch's own cuBLAS and cuBLASLt workspaces (CublasHandlePool.cpp), one each, sized by
  // CUBLAS_WORKSPACE_CONFIG or the default: 4096 KiB x 8 on Hopper, else 4096 KiB x 2 +
  // 16 KiB x 8. Recent releases give Blackwell the Hopper size too, older ones the small one
  // (the GB200 golden files without CUBLAS_WORKSPACE_CONFIG show both, 48 MiB apart); the
  // estimate takes the larger.
  w.torch = !s.cublas_workspace_config.empty() ? parse_cublas_workspace_config(s.cublas_workspace_config)
            : hopper_or_newer                  ? 4096 * 1024 * 8
                                               : 4096 * 1024 * 2 + 16 * 1024 * 8;
  w.grouped_gemm = any_moe && s.moe_grouped_gemm && s.transformer_engine;
  return w;
}

StageBuffers stage_buffers(const StagePlan& plan, const Workspaces& w, int compute_capability,
                           const StageLayers& layers, const ModelState& state, ComponentSink& comps) {
  const TrainingSetup& s = plan.s;
  // The workspaces every stage keeps: Transformer Engine's and PyTorch's cuBLAS workspaces, TE
  // grouped GEMM's and Megatron's global memory buffer.
  const CheckedInt te_workspace = w.te, torch_workspace = w.torch;
  CheckedInt other = te_workspace + 2 * torch_workspace;
  comps.add(MemoryCategory::kOther, "other/te_cublas_workspace", te_workspace);
  comps.add(MemoryCategory::kOther, "other/torch_cublas_workspaces", 2 * torch_workspace);
  if (w.grouped_gemm) {
    // TE grouped GEMM (TEGroupedMLP) adds one cuBLAS workspace per extra stream
    // (get_multi_stream_cublas_workspace, 4 streams).
    other += 4 * te_workspace;
    comps.add(MemoryCategory::kOther, "other/te_grouped_gemm_workspaces", 4 * te_workspace);
  }
  other += layers.sp_gather_buffer;
  comps.add(MemoryCategory::kOther, "other/megatron_global_memory_buffer", layers.sp_gather_buffer);
  // TE's weight-gradient placeholders, one per distinct weight shape of the stage (module/base.py
  // get_dummy_wgrad), from the first backward on.
  const CheckedInt dummy_wgrads =
      uses_cached_dummy_wgrads(s) ? layers.dummy_elements * plan.bytes.param : CheckedInt(0);
  other += dummy_wgrads;
  comps.add(MemoryCategory::kOther, "other/te_dummy_wgrads", dummy_wgrads);
  if (plan.bytes.fp8) {
    // The recipe's copies of the GEMM weights (low_precision.cpp): TE's workspace cache across
    // micro-batches, or the column-wise copy of primary quantized weights; its scaling state.
    const QuantizedWeightCopies copies =
        quantized_weight_copies(s, layers.fp8_params, compute_capability, state.fsdp.has_value());
    const CheckedInt scaling = scaling_state_bytes(s, layers.gemms);
    other += copies.workspace + copies.columnwise + scaling;
    comps.add(MemoryCategory::kOther, "other/te_fp8_weight_cache", copies.workspace);
    comps.add(MemoryCategory::kOther, "other/fp8_primary_weight_columnwise", copies.columnwise);
    comps.add(MemoryCategory::kOther, "other/fp8_scaling_state", scaling);
  }
  if (state.fsdp) {
    other += state.fsdp->persistent_buffers;
    for (const auto& [name, bytes] : state.fsdp->other_terms) comps.add(MemoryCategory::kOther, name, bytes);
  }
  // CUDA graphs (cuda_graphs.cpp): the static inputs and gradient buffers stay allocated.
  const StageGraphs& graphs = layers.graphs;
  const CheckedInt graph_buffer_bytes = graphs.static_inputs == 0 ? CheckedInt(0) : graph_buffers(plan, graphs);
  other += graph_buffer_bytes;
  comps.add(MemoryCategory::kOther, "other/cuda_graph_static_inputs", graphs.static_inputs);
  comps.add(MemoryCategory::kOther, "other/cuda_graph_gradient_buffers", graph_buffer_bytes - graphs.static_inputs);
  return StageBuffers{other, graph_buffer_bytes, dummy_wgrads};
}

void forward_backward_peak(const StagePlan& plan, const StageLayers& layers, const ModelState& state,
                           const StageBuffers& buffers, CheckedInt ep_overlap_saved, CheckedInt static_bytes,
                           ComponentSink& comps, StageEstimate& st) {
  CheckedInt saved = layers.saved, transient = layers.transient;
  if (transient > 0) comps.add(MemoryCategory::kActivations, "activations/transient_peak", transient);
  if (state.fsdp && state.fsdp->transient > 0) {
    // Gathered layers and unsharded gradient buckets at the backward's start, next to the
    // activations and the block's own working set.
    transient += state.fsdp->transient;
    for (const auto& [name, bytes] : state.fsdp->transient_terms) comps.add(MemoryCategory::kActivations, name, bytes);
  }
  // Communication overlap (communication_buffers.cpp): the combined 1F1B schedule's extra
  // attention block.
  saved += ep_overlap_saved;
  comps.add(MemoryCategory::kActivations, "activations/ep_overlap_forward_attention", ep_overlap_saved);
  const CheckedInt activation_bytes = saved + transient;
  st.activation_bytes = activation_bytes.value();
  // Static memory without the optimizer step's copies, plus the activations.
  st.forward_backward_bytes = (static_bytes - state.step_only + activation_bytes).value();
  if (plan.s.cuda_graph.on()) {
    // With CUDA graphs: the eager warm-up steps (before the buffers exist), the capture and the
    // replayed steps (cuda_graphs.hpp).
    const GraphPhases graph = graph_phases(plan.s.cuda_graph, layers.graphs, buffers.graphs,
                                           static_bytes - state.step_only - buffers.graphs, saved, transient);
    st.forward_backward_bytes = std::max(graph.replay, graph.eager).value();
    st.cuda_graph_capture_bytes = graph.capture.value();
    st.cuda_graph_replay_bytes = graph.replay.value();
    st.cuda_graph_pool_bytes = graph.pool.value();
  }
  // The blocks of the live activation tensors at the forward/backward peak can exceed their
  // sizes (kLargeAlloc above): the bound allows the worst case.
  st.allocator_slack_bytes = (layers.large_tensors * kLargeAlloc).value();
}

}  // namespace mme
