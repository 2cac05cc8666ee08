// The phases of one pass of the estimate, each owning its inputs. Estimator::run (estimator.cpp)
// runs a pass for the point estimate and, where something is uncertain, a second one for the
// upper bound; a Pass (below) builds each phase's inputs once per pass and
// estimate_stage runs the phases for every pipeline stage:
//  1. the stages (estimator_stages.cpp): plan_stages resolves the setup, checks the blocks and
//     the layout, evaluates each layer kind once and partitions the pipeline (StagePlan,
//     estimator_internal.hpp); stage_layers adds up a stage's parameters and what its
//     micro-batches in flight keep for backward (StageLayers).
//  2. the forward/backward peak (forward_backward.cpp): the framework's buffers (StageBuffers,
//     from the Workspaces of the pass) and the activations at the busiest moment, with or
//     without CUDA graphs.
//  3. the optimizer step (optimizer_step.cpp): what the optimizer keeps for the trained
//     parameters, weights, gradients and states (ModelState, from the ParameterBytes of the
//     pass), and the step's own peak.
//  4. the bound (upper_bound.cpp): a second pass where the estimate cannot pin something down,
//     and what the point estimate does not count.
// Not part of the SDK.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mme/engine/estimator.hpp"

#include "cuda_graphs.hpp"
#include "estimator_internal.hpp"
#include "sharded_data_parallel.hpp"
#include "weight_gradients.hpp"

namespace mme {

// ---- Phase 1: the stages (estimator_stages.cpp) ------------------------------------------

// The stage plan of a pass. The bound's pass (kBound) follows the estimate's on the same setup:
// it re-checks the blocks (they see another backend) but not the setup as a whole, and `setup` is
// the estimate's resolved one (Estimate::setup), not resolved again; the estimate's pass resolves
// the requested `setup`. `components`: the layer kinds keep their named activation terms.
enum class PassKind { kEstimate, kBound };
StagePlan plan_stages(const EngineTables& im, const TrainingSetup& setup, bool components, AttentionBackend attention,
                      double imbalance, PassKind kind);

// The layers and activations of one pipeline rank: parameters per shard class, what its
// micro-batches in flight keep for backward, its busiest moment and the global buffer.
struct StageLayers {
  CheckedInt tp_params, rep_params, exp_params, fp8_params, fp8_exp_params;  // fp8_exp: the experts' share of fp8
  CheckedInt gemms;                                         // quantized TE GEMMs of the stage (their scaling state)
  CheckedInt train_dense, train_exp;                        // of them, the trained ones (LoRA: the adapters)
  CheckedInt unit_dense, unit_expert, units, largest_unit;  // the decoder (and MTP) layers: FSDP's units
  CheckedInt saved, transient, sp_gather_buffer, large_tensors;
  StageGraphs graphs;         // with CUDA graphs (cuda_graphs.cpp)
  CheckedInt dummy_elements;  // of TE's cached weight-gradient placeholders (weight_gradients.hpp)
};
// `inflight`: the micro-batches in flight per chunk (inflight_microbatches). Fills the stage's
// chunks, layer counts and offload slack in `st`.
StageLayers stage_layers(const StagePlan& plan, std::int64_t pp_rank, const std::vector<std::int64_t>& inflight,
                         ComponentSink& comps, StageEstimate& st);

// The per-layer-kind breakdown (--verbose, Estimate::layer_kinds).
void describe_layer_kinds(const StagePlan& plan, Estimate& est);

// ---- Phase 3: the optimizer step (optimizer_step.cpp) ------------------------------------

// Bytes per parameter of the weights, the gradient buffer and the optimizer states, and how
// the states shard: from the setup alone (distributed_optimizer / param_and_grad_buffer.py).
struct ParameterBytes {
  DType param_dtype = DType::kBF16, grad_dtype = DType::kFP32;
  std::int64_t param = 2, grad = 4;
  std::int64_t adapter = 2;  // LoRA's adapters in LoRA.lora_dtype (unset: the parameters' dtype)
  // Optimizer state bytes per parameter, before sharding.
  std::int64_t main_param = 4, exp_avg = 4, exp_avg_sq = 4, main_grad_copy = 0;
  bool muon = false;
  double keep_on_gpu = 1.0;  // the optimizer states' share on the GPU (--optimizer-offload-fraction)
  std::int64_t dense_shards = 1, expert_shards = 1;
};
// `bytes`: element_bytes(s).
ParameterBytes parameter_bytes(const TrainingSetup& s, const ElementBytes& bytes);

// What one rank of a stage keeps for its parameters from step to step: the weights, the
// gradient buffer and the optimizer states of the trained parameters (or Megatron-FSDP's and
// FSDP2's sharded buffers).
struct ModelState {
  CheckedInt weights = 0, gradients = 0, optimizer = 0;
  CheckedInt step_only = 0;       // of `optimizer`: exists from the optimizer step to the next zero_grad
  CheckedInt step_transient = 0;  // gathered in the optimizer step next to step_only (Megatron-FSDP)
  CheckedInt trained_dense = 0, trained_expert = 0;  // what the gradient buffers hold, per rank
  std::optional<ShardedDpMemory> fsdp;               // sharded data parallelism's buffers (none without)
};
// Fills the stage's parameter counts, weight, gradient and optimizer bytes in `st`.
ModelState model_state(const TrainingSetup& s, const ParameterBytes& b, const StageLayers& layers, ComponentSink& comps,
                       StageEstimate& st);
// The optimizer step's peak: static memory with the step's own temporaries, no activations.
inline void optimizer_step_peak(const ModelState& state, CheckedInt static_bytes, StageEstimate& st) {
  st.step_only_bytes = state.step_only.value();
  st.step_transient_bytes = state.step_transient.value();
  st.optimizer_step_bytes = (static_bytes + st.step_transient_bytes).value();
}

// ---- Phase 2: the forward/backward peak (forward_backward.cpp) ---------------------------

// Framework workspaces that live for the whole run: from the setup and the GPU alone.
struct Workspaces {
  std::int64_t te = 0, torch = 0;  // Transformer Engine's and PyTorch's cuBLAS workspaces
  bool grouped_gemm = false;       // TE grouped GEMM's extra streams' workspaces
};
Workspaces workspaces(const TrainingSetup& s, int compute_capability, bool any_moe);

// A stage's persistent framework buffers (StageEstimate::other_bytes).
struct StageBuffers {
  CheckedInt total = 0;
  CheckedInt graphs = 0;        // of which CUDA graphs' static inputs and gradient buffers
  CheckedInt dummy_wgrads = 0;  // of which TE's weight-gradient placeholders
};
StageBuffers stage_buffers(const StagePlan& plan, const Workspaces& w, int compute_capability,
                           const StageLayers& layers, const ModelState& state, ComponentSink& comps);

// The forward/backward peak: static memory without the optimizer step's copies, plus the saved
// activations and the busiest moment's working set (`ep_overlap_saved`: the combined 1F1B
// schedule's extra attention block); with CUDA graphs the capture, replay and warm-up phases.
// Fills the activation, forward/backward, CUDA-graph and allocator-slack figures of `st`.
void forward_backward_peak(const StagePlan& plan, const StageLayers& layers, const ModelState& state,
                           const StageBuffers& buffers, CheckedInt ep_overlap_saved, CheckedInt static_bytes,
                           ComponentSink& comps, StageEstimate& st);

// ---- One pass (estimator_pass.cpp) -------------------------------------------------------

// Which stages a pass evaluates: every one, or (the planner: no components, no device total)
// only those that may set the peak or the bound. A middle stage whose chunks hold the same layers
// as an earlier middle stage's, with no more micro-batches in flight on any chunk, keeps no more
// on any term (estimator_pass.cpp, may_set_peak).
enum class StageSelection { kEvery, kMaySetPeak };

// Each phase's inputs, built once per pass: `choice` is resolve_attention's for the requested
// setup (it reads only what resolve_setup keeps); the blocks see `attention`. (A constructor, not
// an aggregate: aggregate initialisation would zero the stage plan's term lists first.)
struct Pass {
  // `setup`: as plan_stages takes it for `kind`.
  Pass(const EngineTables& im, const TrainingSetup& setup, const EstimateOptions& opts, const AttentionChoice& choice,
       AttentionBackend attention, double imbalance, PassKind kind, StageSelection which = StageSelection::kEvery)
      : options(opts),
        selection(which),
        attn(choice),
        stages(plan_stages(im, setup, opts.components, attention, imbalance, kind)),
        parameters(parameter_bytes(stages.s, stages.bytes)),
        workspaces(mme::workspaces(stages.s, opts.compute_capability, im.any_moe)) {
    stages.record_chunks = which == StageSelection::kEvery;
  }

  const EstimateOptions& options;
  StageSelection selection;
  const AttentionChoice& attn;  // TE's choice on this GPU, resolved once per estimate (Estimator::run)
  StagePlan stages;             // phase 1
  ParameterBytes parameters;    // phase 3
  Workspaces workspaces;        // phase 2
};
// The pipeline stages of a pass that its selection asks for, first to last.
std::vector<StageEstimate> stage_estimates(const Pass& ps);
// The point estimate's pass: its stages, the peak stage, the model summary and (with components)
// the assumptions and the layer kinds.
Estimate point_estimate(const EngineTables& im, const TrainingSetup& requested, const EstimateOptions& options,
                        const AttentionChoice& choice, StageSelection which = StageSelection::kEvery);

// ---- Phase 4: the bound (upper_bound.cpp) ------------------------------------------------

// Sets every stage's upper_bytes, the upper stage and (with EstimateOptions::bound_terms) the
// bound's terms of the point estimate `est` (its second pass runs on est.setup, the resolved setup).
void add_upper_bound(const EngineTables& im, const EstimateOptions& options, const AttentionChoice& attn, Estimate& est,
                     StageSelection which = StageSelection::kEvery);

}  // namespace mme
