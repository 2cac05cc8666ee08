#include "sharded_data_parallel.hpp"

#include <algorithm>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

namespace mme {

namespace {

__extension__ typedef __int128 Wide;  // a product of two 64-bit counts

CheckedInt ceil_div(CheckedInt a, CheckedInt b) { return (a + b - 1) / b; }

// Megatron-FSDP (distributed/fsdp/src/megatron_fsdp/, v1 through mcore_fsdp_adapter.py).
ShardedDpMemory megatron_fsdp(const ShardedDpStage& st, const FsdpSettings& f, const OptimizerSettings& opt,
                              DType param_dtype) {
  if (f.outer != FsdpSharding::kNoShard) {
    // _init_each_parameter_group_buffers: the outer "optim" sharding needs full inner sharding.
    if (f.outer != FsdpSharding::kOptim)
      throw LayoutError(
          fmt::format("--outer-dp-sharding-strategy {}: Megatron-FSDP takes no_shard or optim", to_string(f.outer)));
    if (f.strategy != FsdpSharding::kOptimGradsParams)
      throw LayoutError(
          "--outer-dp-sharding-strategy optim needs --data-parallel-sharding-strategy optim_grads_params");
    if (st.instances <= 1)
      throw LayoutError("--outer-dp-sharding-strategy optim needs --num-distributed-optimizer-instances > 1 (HSDP)");
  }
  ShardedDpMemory out;
  const CheckedInt P = st.unit_dense + st.unit_expert + st.other_dense;
  const CheckedInt dense = st.unit_dense + st.other_dense, expert = st.unit_expert;
  const CheckedInt unit_total = st.unit_dense + st.unit_expert;
  // Bytes of `count` model weights: 16-bit, except the GEMM weights that --fp8-param-gather keeps
  // in a uint8 buffer (param_and_grad_buffer.py: the model weight buffer takes the param dtype);
  // a part of the stage holds FP8 weights in the stage's proportion. NVFP4 weights
  // (--fp4-param-gather) take 1 B too, not the packed half byte of the distributed optimizer:
  // mixed_precision.py is_float8tensor tests for TE's QuantizedTensor, which NVFP4Tensor is, so
  // _get_parameter_groups gives them the "float8" group whose buffer is uint8 per element.
  auto weight = [&](CheckedInt count) {
    CheckedInt w = count * st.param_bytes;
    // count x fp8_params / P in 128 bits: the product of two parameter counts passes 2^63 at
    // about 3 billion each (Llama-3-8B under Megatron-FSDP), the quotient is at most `count`.
    if (st.fp8_param_gather && P > 0)
      w -= (CheckedInt(st.param_bytes) - 1) *
           CheckedInt(static_cast<std::int64_t>(static_cast<Wide>(count.value()) * CheckedInt(st.fp8_params).value() /
                                                P.value()));
    return w;
  };
  // ParamAndGradBuffer._resolve_group_grad_dtype: "auto" main grads are the param dtype (bf16
  // for FP8 params too); the gradient communication dtype defaults to the main grads'.
  const std::int64_t pb = param_dtype == DType::kFP32 ? 4 : 2;
  const std::int64_t gw = f.main_grads ? dtype_bytes(*f.main_grads) : pb;
  const std::int64_t cw = f.grad_comm ? dtype_bytes(*f.grad_comm) : gw;
  const std::int64_t mw = dtype_bytes(f.main_params);
  // Adam's moments follow the tensor the optimizer steps (the fp32 main weight shard), or the
  // precision-aware optimizer's --exp-avg-dtype / --exp-avg-sq-dtype.
  const std::int64_t ow = opt.precision_aware ? dtype_bytes(opt.exp_avg) + dtype_bytes(opt.exp_avg_sq) : 2 * mw;
  const CheckedInt Dd = st.dense_group, De = st.expert_group;
  // HSDP with outer "optim": the main weights and Adam states shard over the outer group too.
  const CheckedInt outer = f.outer == FsdpSharding::kOptim ? st.instances : 1;
  auto sharded = [&](CheckedInt bytes_per, CheckedInt d_count, CheckedInt e_count, CheckedInt extra) {
    return ceil_div(d_count * bytes_per, Dd * extra) + ceil_div(e_count * bytes_per, De * extra);
  };
  const bool no_shard = f.strategy == FsdpSharding::kNoShard;
  const bool grads_sharded = f.strategy == FsdpSharding::kOptimGrads || f.strategy == FsdpSharding::kOptimGradsParams;
  const bool params_sharded = f.strategy == FsdpSharding::kOptimGradsParams;

  // Model weights (model_weight_buffer): sharded under optim_grads_params, where the buckets of
  // the non-layer parameters (embedding, output layer, final norm) are gathered in the first
  // forward and kept (AllGatherPipeline.reset(preserve_non_fsdp_units=True)).
  if (params_sharded) {
    out.weights = ceil_div(weight(dense), Dd) + ceil_div(weight(expert), De);
    out.weight_terms.emplace_back("weights/fsdp_weight_shards", out.weights);
    const CheckedInt kept = weight(st.other_dense);
    out.weights += kept;
    out.weight_terms.emplace_back("weights/fsdp_gathered_non_layer_params", kept);
  } else {
    out.weights = weight(P);
    out.weight_terms.emplace_back("weights/fsdp_weight_buffer", out.weights);
  }
  // Main gradients (main_grad_buffer), in the main-grads dtype.
  out.gradients = grads_sharded ? sharded(gw, dense, expert, 1) : P * gw;
  out.gradient_terms.emplace_back(grads_sharded ? "gradients/fsdp_grad_shards" : "gradients/fsdp_grad_buffer",
                                  out.gradients);
  // Main weights (main_weight_buffer) and Adam states: unsharded only with no_shard.
  const CheckedInt main = no_shard ? P * mw : sharded(mw, dense, expert, outer);
  const CheckedInt moments = no_shard ? P * ow : sharded(ow, dense, expert, outer);
  out.optimizer = main + moments;
  out.optimizer_terms.emplace_back("optimizer/fsdp_main_params", main);
  out.optimizer_terms.emplace_back("optimizer/adam_moments", moments);
  // ParamAndGradBuffer.update_main_grads: optimizer_grad.to(main dtype) copies the gradient
  // shard when its dtype differs from the main weights' (not with the precision-aware
  // optimizer's decoupled grads); the copy lives until the next zero_grad_buffer.
  if (gw != mw && !opt.precision_aware) {
    out.step_only = no_shard ? P * mw : sharded(mw, dense, expert, 1);
    out.optimizer += out.step_only;
    out.optimizer_terms.emplace_back("optimizer/fsdp_main_grad_copies", out.step_only);
  }

  // In flight. _init_fsdp_param_and_grad_buffer: the suggested communication unit U (default
  // max(1e9, 2 x the average layer's parameters)) bounds the reduce-scatter queue; the
  // all-gather prefetch reaches U / 2 parameters ahead of the layer that runs.
  const CheckedInt avg_unit = st.units > 0 ? unit_total / st.units : CheckedInt(0);
  const CheckedInt U = f.communication_unit_size > 0 ? CheckedInt(f.communication_unit_size)
                                                     : std::max(CheckedInt(1'000'000'000), 2 * avg_unit);
  const CheckedInt prefetch = U / 2;
  if (f.double_buffer && grads_sharded) {
    // FixedPoolAllocator: two slots of the largest layer for weights and for gradients, taken
    // from the global memory buffer and never freed.
    const CheckedInt pool =
        params_sharded ? 2 * weight(st.largest_unit) + 2 * st.largest_unit * cw : 2 * st.largest_unit * cw;
    out.persistent_buffers = pool;
    out.other_terms.emplace_back("other/fsdp_double_buffer_pool", pool);
  }
  if (params_sharded && !f.double_buffer) {
    // AllGatherPipeline.all_gather_params: the running layer plus the prefetch window, released
    // after each layer's forward and gathered again in backward (_pre_backward_param_unshard).
    const CheckedInt window = std::min(unit_total, st.largest_unit + prefetch);
    out.transient += weight(window);
    out.transient_terms.emplace_back("activations/fsdp_in_flight/gathered_layers", weight(window));
    // DistributedOptimizer.start_param_sync after the step: the next forward's first window is
    // gathered while the gradient copies of the step still live.
    out.step_transient = weight(std::min(unit_total, prefetch));
  }
  if (grads_sharded) {
    // main_grad_getter: unsharded temporary gradient buckets until their reduce-scatter; at the
    // backward's start the non-layer bucket (first touched by the output layer's wgrad, last
    // completed by the embedding's) and the first layer's.
    const CheckedInt temp = f.double_buffer ? st.other_dense * cw : (st.other_dense + st.largest_unit) * cw;
    out.transient += temp;
    out.transient_terms.emplace_back("activations/fsdp_in_flight/unsharded_gradient_buckets", temp);
  } else if (cw != gw) {
    // A communication copy of one bucket in flight.
    out.transient += st.largest_unit * cw;
    out.transient_terms.emplace_back("activations/fsdp_in_flight/gradient_communication_copy", st.largest_unit * cw);
  }
  return out;
}

// PyTorch FSDP2 (torch_fully_sharded_data_parallel.py): fully_shard per TransformerLayer,
// embedding and output layer over the DP x CP group, no mixed-precision policy (everything in
// the param dtype), and Megatron's Float16OptimizerWithFloat16Params on the shards.
ShardedDpMemory torch_fsdp2(const ShardedDpStage& st, const FsdpSettings& f, DType param_dtype) {
  ShardedDpMemory out;
  const CheckedInt P = st.unit_dense + st.unit_expert + st.other_dense;
  const std::int64_t pb = param_dtype == DType::kFP32 ? 4 : 2;
  const CheckedInt D = st.dense_group;
  out.weights = ceil_div(P * pb, D);
  out.weight_terms.emplace_back("weights/fsdp2_weight_shards", out.weights);
  out.gradients = ceil_div(P * pb, D);  // sharded .grad in the param dtype
  out.gradient_terms.emplace_back("gradients/fsdp2_grad_shards", out.gradients);
  // fp32 main copy of the shard and two fp32 Adam moments (fp32 training: no main copy).
  const CheckedInt main = param_dtype == DType::kFP32 ? CheckedInt(0) : ceil_div(P * 4, D);
  const CheckedInt moments = ceil_div(P * 8, D);
  out.optimizer = main + moments;
  out.optimizer_terms.emplace_back("optimizer/main_params", main);
  out.optimizer_terms.emplace_back("optimizer/adam_moments", moments);
  if (param_dtype != DType::kFP32) {
    // _copy_model_grads_to_main_grads: the fp32 copy of the gradient shard in the step.
    out.step_only = ceil_div(P * 4, D);
    out.optimizer += out.step_only;
    out.optimizer_terms.emplace_back("optimizer/fp32_main_grads", out.step_only);
  }
  // Gathered modules: the running one and the one prefetched, and the unsharded gradient of a
  // module before its reduce-scatter. The embedding and output layer are modules of their own.
  const CheckedInt largest = std::max(st.largest_unit, st.other_dense);
  if (f.reshard_after_forward) {
    out.transient = 3 * largest * pb;
    out.transient_terms.emplace_back("activations/fsdp_in_flight/gathered_modules", 2 * largest * pb);
  } else {
    // --torch-fsdp2-no-reshard-after-forward: every module stays gathered from its forward to
    // its backward.
    out.transient = P * pb - out.weights + largest * pb;
    out.transient_terms.emplace_back("activations/fsdp_in_flight/gathered_modules", P * pb - out.weights);
  }
  out.transient_terms.emplace_back("activations/fsdp_in_flight/unsharded_gradient", largest * pb);
  return out;
}

}  // namespace

ShardedDpMemory sharded_data_parallel_memory(const ShardedDpStage& stage, const FsdpSettings& fsdp,
                                             const OptimizerSettings& optimizer, DType param_dtype) {
  return fsdp.kind == FsdpKind::kTorchFsdp2 ? torch_fsdp2(stage, fsdp, param_dtype)
                                            : megatron_fsdp(stage, fsdp, optimizer, param_dtype);
}

}  // namespace mme
