// Phase 3 of a pass, the optimizer step (estimator_phases.hpp): the bytes per parameter of the
// weights, the gradient buffer and the optimizer states; what one rank of a stage keeps for its
// parameters (the distributed optimizer's shards, or the sharded data-parallel buffers,
// sharded_data_parallel.cpp); and the peak of the optimizer step.
// Each memory term names, in one comment line, the Megatron-LM behaviour it models.
#include <algorithm>

#include "estimator_phases.hpp"
#include "low_precision.hpp"

namespace mme {

ParameterBytes parameter_bytes(const TrainingSetup& s, const ElementBytes& bytes) {
  // Bytes per parameter (element_bytes) and of the optimizer state.
  const auto& opt = s.optimizer;
  const ParallelLayout& par = s.parallel;
  ParameterBytes b;
  b.param_dtype = bytes.param_dtype, b.grad_dtype = bytes.grad_dtype;
  b.param = bytes.param, b.grad = bytes.grad;
  // LoRA's adapters in LoRA.lora_dtype (unset: the parameters' dtype), the frozen base as ever.
  b.adapter = s.lora.dtype ? dtype_bytes(*s.lora.dtype) : b.param;
  const DType param_dtype = b.param_dtype, grad_dtype = b.grad_dtype;
  // Optimizer state bytes per parameter, before sharding.
  // fp32 training needs no separate fp32 master copy of the parameters.
  b.main_param = param_dtype == DType::kFP32 ? 0 : 4;
  if (opt.precision_aware) {
    // TE FusedAdam master weights: a 16-bit remainder of a bf16 param (store_param_remainders),
    // else the chosen dtype (optimizer/__init__.py, distrib_optimizer.py).
    b.main_param = opt.main_params == DType::kFP32 ? (opt.store_param_remainders && param_dtype == DType::kBF16 ? 2 : 4)
                                                   : dtype_bytes(opt.main_params);
    b.exp_avg = dtype_bytes(opt.exp_avg);
    b.exp_avg_sq = dtype_bytes(opt.exp_avg_sq);
  } else if (grad_dtype != DType::kFP32) {
    // Float16 optimizers copy 16-bit main grads to fp32 (main_param.grad = main_grad.float()).
    b.main_grad_copy = 4;
  }
  if (opt.cpu_offload_fraction > 0 && opt.precision_aware) {
    // HybridDeviceOptimizer(param_update_in_fp32=True) replaces TE FusedAdam's master weights:
    // its own fp32 copy of each 16-bit shard (on the host for the offloaded share) and default
    // fp32 moments, whatever --exp-avg-dtype says; 16-bit gradients become fp32 copies for the
    // GPU share (hybrid_optimizer.py _get_sub_optimizer_param_groups, _set_sub_optimizer_grads).
    b.main_param = param_dtype == DType::kFP32 ? 0 : 4;
    b.exp_avg = 4, b.exp_avg_sq = 4;
    b.main_grad_copy = grad_dtype != DType::kFP32 ? 4 : 0;
  }
  if (opt.name == "sgd") b.exp_avg = 4, b.exp_avg_sq = 0;  // momentum only
  b.muon = opt.name == "muon";
  b.keep_on_gpu = 1.0 - opt.cpu_offload_fraction;
  b.dense_shards = opt.distributed ? par.dp * par.cp / opt.instances : 1;
  b.expert_shards = opt.distributed ? par.expert_dp / opt.instances : 1;
  return b;
}

ModelState model_state(const TrainingSetup& s, const ParameterBytes& b, const StageLayers& layers, ComponentSink& comps,
                       StageEstimate& st) {
  const ParallelLayout& par = s.parallel;
  const auto& opt = s.optimizer;
  const CheckedInt all_dense_params = layers.tp_params + layers.rep_params;
  const CheckedInt all_exp_params = layers.exp_params;
  const CheckedInt parameters = all_dense_params + all_exp_params;
  st.parameters = parameters.value();
  st.expert_parameters = all_exp_params.value();
  st.trainable_parameters = (layers.train_dense + layers.train_exp).value();
  ModelState out;
  // Gradients and optimizer states cover the trained parameters only: all of them, or under LoRA
  // the adapters (the frozen base weights get no main_grad slot, the optimizer never sees them).
  const CheckedInt dense_params = layers.train_dense, exp_params = layers.train_exp;
  out.trained_dense = dense_params, out.trained_expert = exp_params;
  const CheckedInt adapters = s.lora.on() ? layers.train_dense + layers.train_exp : CheckedInt(0);
  const CheckedInt fp8_params = layers.fp8_params;
  auto& fsdp = out.fsdp;
  if (s.fsdp.kind != FsdpKind::kNone) {
    ShardedDpStage sd;
    sd.unit_dense = layers.unit_dense;
    sd.unit_expert = layers.unit_expert;
    sd.other_dense = all_dense_params - layers.unit_dense;
    sd.units = layers.units;
    sd.largest_unit = layers.largest_unit;
    sd.fp8_params = fp8_params;
    sd.dense_group = par.dp * par.cp / opt.instances;
    sd.expert_group = par.expert_dp / opt.instances;
    sd.instances = opt.instances;
    sd.param_bytes = b.param;
    sd.fp8_param_gather = quantized_param_gather(s);
    fsdp = sharded_data_parallel_memory(sd, s.fsdp, opt, b.param_dtype);
  }

  CheckedInt weight = b.param * (parameters - adapters) + b.adapter * adapters;
  if (quantized_param_gather(s))  // uint8 (NVFP4: packed) param buffer for the quantized GEMM weights
    weight -= b.param * fp8_params - ceil_div(quantized_param_half_bytes(s) * fp8_params, 2);
  CheckedInt gradient_bytes = b.grad * (dense_params + exp_params);
  if (fsdp) weight = fsdp->weights, gradient_bytes = fsdp->gradients;
  st.weight_bytes = weight.value();
  st.gradient_bytes = gradient_bytes.value();
  // HybridDeviceOptimizer (optimizer/cpu_offloading/hybrid_optimizer.py) moves the states of
  // the offloaded share of parameters to the host. With the precision-aware optimizer the
  // fp32 master weights go with them; without it the distributed optimizer keeps its fp32
  // main params (and the fp32 gradient copies it makes) on the GPU and hands them over.
  const double keep_on_gpu = b.keep_on_gpu;
  auto shard = [&](std::int64_t bytes_per_param, CheckedInt count, std::int64_t shards,
                   bool offloadable = true) -> CheckedInt {
    const CheckedInt bytes = ceil_div(count * bytes_per_param, shards);
    if (keep_on_gpu >= 1.0 || !offloadable) return bytes;
    const double kept = static_cast<double>(bytes.value()) * keep_on_gpu + 0.5;
    return kept < 0x1p63 ? static_cast<std::int64_t>(kept) : bytes.value();
  };
  CheckedInt optim = 0;
  // distrib_optimizer.py _copy_model_grads_to_main_grads: `main_grad.float()` copies 16-bit
  // gradients in the optimizer step; they live until zero_grad(set_to_none=True) at the start
  // of the next train_step (training.py), so never next to the activations.
  CheckedInt step_only = 0;
  const std::int64_t state_b = b.main_param + b.exp_avg + b.exp_avg_sq + b.main_grad_copy;
  if (fsdp) {
    optim = fsdp->optimizer;
    step_only = fsdp->step_only;
    for (const auto& [name, bytes] : fsdp->optimizer_terms) comps.add(MemoryCategory::kOptimizer, name, bytes);
  } else if (b.muon) {
    // Muon: one fp32 momentum for 2-D GEMM weights, Adam for the rest (emerging_optimizers.py).
    const std::int64_t muon_b = b.main_param + 4 + b.main_grad_copy;
    const CheckedInt muon_dense =
        std::max(std::min(fp8_params, dense_params) - std::min(fp8_params, exp_params), CheckedInt(0));
    optim = shard(muon_b, muon_dense, b.dense_shards) + shard(state_b, dense_params - muon_dense, b.dense_shards) +
            shard(muon_b, exp_params, b.expert_shards);
    step_only = shard(b.main_grad_copy, dense_params, b.dense_shards, false) +
                shard(b.main_grad_copy, exp_params, b.expert_shards, false);
    comps.add(MemoryCategory::kOptimizer, "optimizer/muon_and_adam_states", optim);
  } else {
    const bool main_offloadable = opt.precision_aware;
    const CheckedInt main_dense = shard(b.main_param, dense_params, b.dense_shards, main_offloadable);
    const CheckedInt main_exp = shard(b.main_param, exp_params, b.expert_shards, main_offloadable);
    const CheckedInt moments_dense = shard(b.exp_avg + b.exp_avg_sq, dense_params, b.dense_shards);
    const CheckedInt moments_exp = shard(b.exp_avg + b.exp_avg_sq, exp_params, b.expert_shards);
    // The fp32 gradient copies: the distributed optimizer's for every shard, or with the
    // precision-aware optimizer HybridDeviceOptimizer's for its GPU share only.
    const CheckedInt grad_copy = shard(b.main_grad_copy, dense_params, b.dense_shards, main_offloadable) +
                                 shard(b.main_grad_copy, exp_params, b.expert_shards, main_offloadable);
    step_only = grad_copy;
    optim = main_dense + main_exp + moments_dense + moments_exp + grad_copy;
    // distrib_optimizer.py: fp32 main params of the local shard (shard_model_param.clone().float()).
    comps.add(MemoryCategory::kOptimizer, "optimizer/main_params", main_dense + main_exp);
    // Adam exp_avg and exp_avg_sq of the local shard (optimizer/__init__.py).
    comps.add(MemoryCategory::kOptimizer, "optimizer/adam_moments", moments_dense + moments_exp);
    comps.add(MemoryCategory::kOptimizer, "optimizer/fp32_main_grads", grad_copy);
  }
  st.optimizer_bytes = optim.value();
  if (fsdp) {
    for (const auto& [name, bytes] : fsdp->weight_terms) comps.add(MemoryCategory::kWeights, name, bytes);
    for (const auto& [name, bytes] : fsdp->gradient_terms) comps.add(MemoryCategory::kGradients, name, bytes);
  } else {
    const CheckedInt dense_adapters = s.lora.on() ? layers.train_dense : CheckedInt(0);
    // With quantized primary weights their uint8 buffer is a term of its own; the 16-bit terms
    // hold the rest, so the terms add up to weight_bytes.
    const bool quantized = quantized_param_gather(s);
    const CheckedInt q_exp = quantized ? layers.fp8_exp_params : CheckedInt(0);
    const CheckedInt q_dense = quantized ? fp8_params - layers.fp8_exp_params : CheckedInt(0);
    comps.add(MemoryCategory::kWeights, "weights/dense", b.param * (all_dense_params - dense_adapters - q_dense));
    comps.add(MemoryCategory::kWeights, "weights/experts",
              b.param * (all_exp_params - (adapters - dense_adapters) - q_exp));
    comps.add(MemoryCategory::kWeights, "weights/lora_adapters", b.adapter * adapters);
    if (quantized)
      comps.add(MemoryCategory::kWeights, "weights/quantized_gemm_weights",
                ceil_div(quantized_param_half_bytes(s) * fp8_params, 2));
    comps.add(MemoryCategory::kGradients, "gradients/main_grad_buffer", gradient_bytes);
  }
  out.weights = weight, out.gradients = gradient_bytes, out.optimizer = optim;
  out.step_only = step_only;
  out.step_transient = fsdp ? fsdp->step_transient : CheckedInt(0);
  return out;
}

}  // namespace mme
