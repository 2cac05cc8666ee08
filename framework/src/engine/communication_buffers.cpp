// Communication overlap and its buffers (communication_buffers.hpp). Each term names, in one
// comment line, the Megatron-LM / Transformer Engine code it models.
#include "communication_buffers.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

#include "estimator_phases.hpp"

namespace mme {

void check_communication_setup(const TrainingSetup& s) {
  const auto& c = s.comm;
  const ParallelLayout& p = s.parallel;
  // arguments.py validate_args.
  if (c.tp_comm_overlap && !sequence_parallel_on(p))
    throw LayoutError(
        "--tp-comm-overlap: Tensor parallel communication/GEMM overlap can happen only when sequence parallelism "
        "is enabled (Megatron-LM; it turns sequence parallelism off with --tp 1)");
  if (c.overlap_param_gather && !s.optimizer.distributed && s.fsdp.kind != FsdpKind::kMegatron)
    throw LayoutError(
        "--overlap-param-gather only supported with distributed optimizer, megatron fsdp, or dist_muon "
        "(Megatron-LM)");
  if (c.overlap_param_gather && !c.overlap_grad_reduce)
    throw LayoutError("Must use --overlap-param-gather with --overlap-grad-reduce (Megatron-LM)");
  if (c.ep_overlap) {
    if (p.pp > 1 && p.vpp <= 1)
      throw LayoutError(
          "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when "
          "pipeline_model_parallel_size > 1 (Megatron-LM)");
    if (p.ep <= 1)
      throw LayoutError(
          "overlap_moe_expert_parallel_comm is only supported with expert model parallelism (Megatron-LM)");
    if (s.dispatcher == TokenDispatcher::kAllGather)
      throw LayoutError(
          "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher (Megatron-LM)");
    if (s.recompute.granularity == RecomputeGranularity::kFull)
      throw LayoutError("disable full recomputation when enabling overlap_moe_expert_parallel_comm (Megatron-LM)");
    if (s.recompute.has(kRecomputeMoe))
      throw LayoutError(
          "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm (Megatron-LM)");
    if (s.precision == Precision::kFP32)
      throw LayoutError("overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model (Megatron-LM)");
    if (c.shared_expert_overlap)
      throw LayoutError(
          "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm (Megatron-LM)");
  }
}

void check_communication_model(const ModelSpec& m, const TrainingSetup& s) {
  const bool moe =
      std::any_of(m.layers.begin(), m.layers.end(), [](const LayerSpec& l) { return l.mlp.num_experts > 0; });
  // transformer_config.py __post_init__ and token_dispatcher.py MoEFlexTokenDispatcher (built
  // only for MoE layers).
  if (moe && s.dispatcher == TokenDispatcher::kFlex && s.comm.flex_backend == FlexBackend::kDeepEP) {
    if (s.moe_pad_to_capacity)
      throw LayoutError(
          "Flex token dispatcher with deepep backend does not support moe_pad_expert_input_to_capacity "
          "(Megatron-LM)");
    if (effective_etp(s.parallel) * s.parallel.ep <= 1)
      throw LayoutError("DeepEP dispatcher requires TPxEP > 1 (Megatron-LM)");
  }
  // transformer_config.py __post_init__: only with shared experts does the switch matter.
  if (s.comm.shared_expert_overlap && any_shared_experts(m) && s.dispatcher == TokenDispatcher::kAllGather)
    throw LayoutError("moe_shared_expert_overlap only works with alltoall or flex token dispatcher. (Megatron-LM)");
  if (s.comm.ep_overlap && m.mtp_num_layers > 1)
    throw LayoutError("MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm. (Megatron-LM)");
}

std::int64_t ep_overlap_extra_warmup(const TrainingSetup& s, std::int64_t vpp) {
  // schedules.py get_pp_rank_microbatches: "we schedule one extra micro-batch forward step
  // before the 1f1b stages" (interleaved only; without pipelining the schedule keeps one).
  return s.comm.ep_overlap && s.parallel.pp > 1 && vpp > 1 ? 1 : 0;
}

namespace {

// module/base.py initialize_ub (as training/initialize.py _initialize_tp_communicators calls
// it): one buffer of shape [seq x micro-batch / CP, hidden] per overlapped GEMM under TE's
// default methods: ring_exchange qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad; pipeline
// proj_fprop, fc2_fprop; bulk qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad; external proj_wgrad,
// fc2_wgrad. In initialize_ub's default dtype, bf16; under FP8 the eight all-gather buffers
// (layers_all_gather_overlap, fp8_buf) are uint8.
CheckedInt userbuffer_bytes(const StagePlan& plan) {
  const TrainingSetup& s = plan.s;
  if (!s.comm.tp_comm_overlap) return 0;
  constexpr std::int64_t kAllGather = 8, kReduceScatter = 4;
  const CheckedInt per_buffer = CheckedInt(s.seq_length) * s.micro_batch_size / s.parallel.cp * plan.h;
  return per_buffer * (kAllGather * (plan.bytes.fp8 ? 1 : 2) + kReduceScatter * 2);
}

// param_and_grad_buffer.py: with the distributed optimizer every bucket's end is padded to a
// multiple of lcm(DP, 128) elements (lcm(DP, 128, 2^16) with --ddp-pad-buckets-for-high-nccl-busbw;
// param_layout.py bucket_end_divisor), in the gradient and the parameter buffer. With
// --overlap-grad-reduce, distributed_data_parallel.py cuts buffers into buckets of
// --ddp-bucket-size (default max(4e7, 1e6 x DP)) elements on the first pipeline stage's first
// chunk (other chunks and stages keep one bucket per buffer). A buffer of P elements then has at
// most floor(P / size) + 1 buckets: at most that many times (divisor - 1) elements of padding.
CheckedInt bucket_padding_bytes(const StagePlan& plan, const ParameterBytes& b, std::int64_t r, CheckedInt dense_params,
                                CheckedInt expert_params) {
  const TrainingSetup& s = plan.s;
  if (!s.comm.overlap_grad_reduce || !s.optimizer.distributed || s.fsdp.kind != FsdpKind::kNone) return 0;
  const auto divisor = [&](std::int64_t dp) -> std::int64_t {
    const std::int64_t d = std::lcm(dp, std::int64_t{128});
    return s.comm.pad_buckets_for_nccl ? std::lcm(d, std::int64_t{1} << 16) : d;
  };
  const std::int64_t bucket =
      s.comm.ddp_bucket_size > 0 ? s.comm.ddp_bucket_size : std::max<std::int64_t>(40000000, 1000000 * b.dense_shards);
  const bool bucketed = r == 0;
  // Every chunk has its own buffers (one DDP per model chunk); --fp8-param-gather keeps the FP8
  // GEMM weights in a buffer of their own (uint8 parameters).
  const std::int64_t dense_buffers = plan.v * (s.fp8_param_gather ? 2 : 1);
  auto padding = [&](CheckedInt params, std::int64_t buffers, std::int64_t dp) {
    if (params == 0) return CheckedInt(0);
    const CheckedInt buckets = CheckedInt(buffers) + (bucketed ? params / bucket : CheckedInt(0));
    return buckets * (divisor(dp) - 1);
  };
  const CheckedInt elements =
      padding(dense_params, dense_buffers, b.dense_shards) + padding(expert_params, plan.v, b.expert_shards);
  return elements * (b.grad + b.param);
}

// combined_1f1b.py with model_chunk_schedule_plan.py run(): the forward of one micro-batch runs
// layer by layer beside the backward of another; while layer L-1-j's MLP backward runs, layer
// j of the forward micro-batch has finished its attention block (pre_dispatch_computation). The
// stage holds one micro-batch's layers plus that attention block: the largest on the stage.
CheckedInt ep_overlap_saved_bytes(const StagePlan& plan, std::int64_t r) {
  if (!plan.s.comm.ep_overlap) return 0;
  CheckedInt largest = 0;
  for (std::int64_t vr = 0; vr < plan.v; ++vr) {
    const ChunkLayout& ch = plan.part->at(r, vr);
    for (std::size_t ti = 0; ti < plan.im.types.size(); ++ti)
      if (plan.im.count_in(ti, ch.first_layer, ch.num_layers) > 0)
        largest = std::max(largest, CheckedInt(sum_saved(plan.layers->evals[ti].attn_acts)));
    if (ch.mtp_layers > 0) largest = std::max(largest, CheckedInt(sum_saved(plan.layers->mtp_eval.attn_acts)));
  }
  return largest;
}

}  // namespace

StageCommunication stage_communication(const StagePlan& plan, const ParameterBytes& bytes, std::int64_t r,
                                       CheckedInt dense_params, CheckedInt expert_params) {
  StageCommunication out;
  out.userbuffers = userbuffer_bytes(plan);
  out.bucket_padding = bucket_padding_bytes(plan, bytes, r, dense_params, expert_params);
  out.ep_overlap_saved = ep_overlap_saved_bytes(plan, r);
  return out;
}

void add_communication_bound_terms(const Estimate& est, std::vector<std::string>& terms) {
  std::int64_t userbuffers = 0, padding = 0;
  for (const auto& st : est.stages) {
    userbuffers = std::max(userbuffers, st.outside_allocator_bytes);
    padding = std::max(padding, st.bucket_padding_bytes);
  }
  if (userbuffers > 0)
    terms.push_back(
        fmt::format("TE userbuffers of --tp-comm-overlap: {:.2f} GiB per GPU, allocated outside PyTorch's allocator "
                    "(12 GEMM buffers of sequence x micro-batch / CP x hidden)",
                    static_cast<double>(userbuffers) / static_cast<double>(kMiB * 1024)));
  if (padding > 0)
    terms.push_back(fmt::format(
        "data-parallel bucket padding of --overlap-grad-reduce: up to {} KiB on a stage (lcm(DP, 128) elements per "
        "bucket)",
        (padding + 1023) / 1024));
}

void add_communication_assumptions(const StagePlan& plan, std::vector<std::string>& a) {
  const TrainingSetup& s = plan.s;
  const auto& c = s.comm;
  if (plan.im.any_moe && s.dispatcher == TokenDispatcher::kFlex) {
    if (c.flex_backend == FlexBackend::kDeepEP)
      a.push_back(
          "flex dispatcher with DeepEP: deep_ep.Buffer's NVLink and RDMA buffers (fused_a2a.py get_buffer, sized by "
          "DeepEP's dispatch/combine configuration for the hidden bytes and the TP x EP group) are allocated outside "
          "PyTorch's allocator: in neither the estimate nor the bound (count them in --overhead-per-gpu); DeepEP's "
          "receive buffer is taken at one copy per routed token (the worst case of its per-rank deduplication)");
    else
      a.push_back(
          "flex dispatcher with HybridEP: HybridEPBuffer (fused_a2a.py init_hybrid_ep_buffer, sized by hidden x the "
          "largest tokens per rank x local experts) is allocated by DeepEP outside PyTorch's allocator: in neither the "
          "estimate nor the bound (count it in --overhead-per-gpu)");
  }
  if (c.tp_comm_overlap && s.transformer_engine)
    a.push_back(
        "--tp-comm-overlap: Transformer Engine's default userbuffer method per GEMM (no --tp-comm-overlap-cfg); the "
        "userbuffers are in the upper bound, not in the allocator-visible estimate, which keeps the NCCL path's "
        "gathered GEMM inputs (an overestimate of at most one gathered [T, h] per layer)");
  else if (c.tp_comm_overlap)
    a.push_back(
        "--tp-comm-overlap with --transformer-impl local: initialize.py still creates Transformer Engine's userbuffers "
        "(in the upper bound), but the local linears do not use them: their collectives are NCCL's, not overlapped");
  if (c.overlap_grad_reduce || c.overlap_param_gather)
    a.push_back(
        "overlapped data-parallel communication: the buckets are views of the gradient and parameter buffers; "
        "NCCL's own buffers for the collectives are outside PyTorch's allocator (the fit's reserve)");
  if (c.ep_overlap)
    a.push_back(
        "--overlap-moe-expert-parallel-comm: a forward micro-batch runs beside the backward one, layer by layer: one "
        "attention block and one pre-dispatch part of a MoE block more than one micro-batch's activations");
}

}  // namespace mme
