// The layout checks of a training setup: sizes and bounds (resolve_setup) and the layout against
// a model, the way Megatron-LM's argument validation refuses it (validate_setup).
#include "mme/engine/setup_checks.hpp"

#include <algorithm>

#include <fmt/core.h>

#include "mme/engine/pipeline.hpp"
#include "mme/sdk/checked.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/model_spec.hpp"

#include "communication_buffers.hpp"
#include "low_precision.hpp"

namespace mme {

void validate_model_blocks(const ModelSpec& model, const Registry& registry) {
  validate_model_spec(model);
  const LayerKinds grouped = group_layer_kinds(model);
  std::vector<std::size_t> first_layer(grouped.kinds.size(), model.layers.size());
  for (std::size_t i = model.layers.size(); i-- > 0;) first_layer[grouped.kind_of_layer[i]] = i;
  for (std::size_t k = 0; k < grouped.kinds.size(); ++k) {
    const LayerSpec& layer = *grouped.kinds[k];
    for (const std::string* kind : {&layer.attention.kind, &layer.mlp.kind})
      if (const LayerMemoryModel* block = registry.find_layer_model(*kind))
        call_plugin("checking a model's layers", [&] { block->validate_spec(model, layer, first_layer[k]); });
  }
  // The blocks around the layers see the first (embedding) or the last decoder layer.
  const auto& lm = model.lm_blocks;
  const std::size_t last = model.layers.size() - 1;
  struct Around {
    const std::string* kind;
    std::size_t index;
  };
  for (const Around& b : {Around{&lm.embedding, 0}, Around{&lm.output_head, last}, Around{&lm.mtp_projection, last}}) {
    if (b.kind == &lm.mtp_projection && model.mtp_num_layers == 0) continue;
    if (const LayerMemoryModel* block = registry.find_layer_model(*b.kind))
      call_plugin("checking a model's blocks", [&] { block->validate_spec(model, model.layers[b.index], b.index); });
  }
}

namespace {

[[noreturn, gnu::noinline]] void refuse_count(std::string_view flag, std::int64_t v, std::int64_t max) {
  if (v <= 0) throw LayoutError(fmt::format("{} must be a positive integer, got {}", flag, v));
  throw LayoutError(fmt::format("{} {} is larger than {}, which no real run uses", flag, v, max));
}

// (The check inline, the wording apart: the planner resolves a setup per estimate.)
inline void require_positive(std::string_view flag, std::int64_t v, std::int64_t max) {
  if (v <= 0 || v > max) [[unlikely]]
    refuse_count(flag, v, max);
}

}  // namespace

bool interleaved_schedule_runs(std::int64_t micro_batches, std::int64_t pp, std::int64_t group) {
  if (group > micro_batches) return false;  // ValueError
  const std::int64_t last = micro_batches % group;
  return last == 0 || last >= pp;  // else RuntimeError: "dependency bubbles"
}

TrainingSetup resolve_setup(TrainingSetup s) {
  auto& p = s.parallel;
  require_positive("--tp", p.tp, kMaxParallelSize);
  require_positive("--pp", p.pp, kMaxParallelSize);
  require_positive("--vpp", p.vpp, kMaxParallelSize);
  require_positive("--ep", p.ep, kMaxParallelSize);
  require_positive("--cp", p.cp, kMaxParallelSize);
  require_positive("--num-gpus", p.world_size, kMaxWorldSize);
  if (p.etp < 0) throw LayoutError(fmt::format("--etp must be a positive integer, got {}", p.etp));
  if (p.etp > 0) require_positive("--etp", p.etp, kMaxParallelSize);
  require_positive("--micro-batch-size", s.micro_batch_size, kMaxSequenceSize);
  require_positive("--seq-length", s.seq_length, kMaxSequenceSize);
  if (s.seq_length * s.micro_batch_size > kMaxMicroBatchTokens)  // both at most 2^24: the product fits
    throw LayoutError(
        fmt::format("--seq-length {} x --micro-batch-size {} = {} tokens per micro-batch is more than {}, "
                    "which no real run uses",
                    s.seq_length, s.micro_batch_size, s.seq_length * s.micro_batch_size, kMaxMicroBatchTokens));
  if (s.global_batch_size < 0)
    throw LayoutError(fmt::format("--global-batch-size must be positive, got {}", s.global_batch_size));
  if (s.global_batch_size > 0) require_positive("--global-batch-size", s.global_batch_size, kMaxWorldSize);
  require_positive("--make-vocab-size-divisible-by", s.make_vocab_size_divisible_by, kMaxSequenceSize);
  require_positive("--num-distributed-optimizer-instances", s.optimizer.instances, kMaxParallelSize);

  const std::int64_t model_parallel = checked_mul(checked_mul(p.tp, p.pp, "TP x PP"), p.cp, "TP x PP x CP");
  if (p.world_size % model_parallel != 0)
    throw LayoutError(fmt::format("--num-gpus {} is not divisible by TP x PP x CP = {} x {} x {} = {}", p.world_size,
                                  p.tp, p.pp, p.cp, model_parallel));
  p.dp = p.world_size / model_parallel;

  const std::int64_t etp = effective_etp(p);
  const std::int64_t expert_parallel = checked_mul(checked_mul(etp, p.ep, "ETP x EP"), p.pp, "ETP x EP x PP");
  if (p.world_size % expert_parallel != 0)
    throw LayoutError(fmt::format("--num-gpus {} is not divisible by ETP x EP x PP = {} x {} x {} = {}", p.world_size,
                                  etp, p.ep, p.pp, expert_parallel));
  p.expert_dp = p.world_size / expert_parallel;

  if (!s.pipeline.layout.empty()) {
    // The layout fixes the number of virtual stages per pipeline rank (arguments.py).
    const auto stages = static_cast<std::int64_t>(parse_pipeline_layout_cached(s.pipeline.layout).size());
    if (stages % p.pp != 0)
      throw LayoutError(
          fmt::format("--pipeline-layout has {} stages, which is not a multiple of --pp {}", stages, p.pp));
    if (p.vpp != 1 && p.vpp != stages / p.pp)
      throw LayoutError(fmt::format("--pipeline-layout gives {} virtual stages per pipeline rank but --vpp is {}",
                                    stages / p.pp, p.vpp));
    p.vpp = stages / p.pp;
  }
  if (p.vpp > 1 && p.pp == 1) throw LayoutError(fmt::format("--vpp {} needs pipeline parallelism (--pp > 1)", p.vpp));
  if (p.pp * p.vpp > kMaxParallelSize)  // both at most 2^20: the product fits
    throw LayoutError(fmt::format("--pp {} x --vpp {} = {} pipeline chunks is more than {}, which no real run uses",
                                  p.pp, p.vpp, p.pp * p.vpp, kMaxParallelSize));
  if (p.sequence_parallel.value_or(false) && p.tp == 1) p.sequence_parallel = false;

  if (s.global_batch_size > 0) {
    const std::int64_t per_step = checked_mul(s.micro_batch_size, p.dp, "micro-batch x DP");
    if (s.global_batch_size % per_step != 0)
      throw LayoutError(fmt::format("--global-batch-size {} is not divisible by micro-batch size x DP = {} x {} = {}",
                                    s.global_batch_size, s.micro_batch_size, p.dp, per_step));
    s.num_micro_batches = s.global_batch_size / per_step;
    // The interleaved schedule's groups of micro-batches per model chunk (interleaved_schedule_runs).
    if (p.vpp > 1) {
      const std::int64_t m = s.num_micro_batches, G = s.pipeline.microbatch_group_size.value_or(p.pp);
      if (G > m)
        throw LayoutError(fmt::format(
            "{} micro-batch{} (--global-batch-size {} / (micro-batch {} x DP {})) {} fewer than the {} that the "
            "interleaved schedule runs per model chunk (--microbatch-group-size-per-virtual-pipeline-stage, default "
            "--pp): Megatron-LM refuses it (schedules.py); raise the global batch or drop --vpp",
            m, m == 1 ? "" : "es", s.global_batch_size, s.micro_batch_size, p.dp, m == 1 ? "is" : "are", G));
      if (!interleaved_schedule_runs(m, p.pp, G))
        throw LayoutError(fmt::format(
            "{} micro-batches leave a last group of {} in the interleaved schedule's groups of {}, fewer than --pp "
            "{}: Megatron-LM refuses it (schedules.py, \"dependency bubbles\"); use a multiple of {} micro-batches",
            m, m % G, G, p.pp, G));
    }
  } else {
    s.num_micro_batches = 0;
  }

  auto& r = s.recompute;
  // transformer_config.py only asks for a value; recompute.py's block loop checkpoints the first
  // recompute_num_layers layers of a chunk, so 0 recomputes none (launchers write it to switch
  // recompute off), while its uniform loop advances by recompute_num_layers and never ends at 0.
  if (r.granularity == RecomputeGranularity::kFull) {
    if (r.num_layers == 0 && r.method == RecomputeMethod::kUniform)
      throw LayoutError(
          "--recompute-num-layers 0 with --recompute-method uniform: Megatron-LM's uniform recompute loop "
          "(recompute.py) would never advance; use --recompute-method block to recompute no layer");
    if (r.num_layers != 0) require_positive("--recompute-num-layers", r.num_layers, kMaxParallelSize);
  }
  if (r.granularity == RecomputeGranularity::kSelective && r.modules == 0)
    throw LayoutError("--recompute-granularity selective needs at least one --recompute-modules entry");

  if (s.defer_embedding_wgrad && p.pp == 1)
    throw LayoutError("--defer-embedding-wgrad-compute needs --pp > 1 (model_parallel_config.py)");
  if (s.defer_embedding_wgrad && !s.gradient_accumulation_fusion)
    throw LayoutError(
        "--defer-embedding-wgrad-compute with --no-gradient-accumulation-fusion: Megatron-LM refuses it "
        "(model_parallel_config.py: cannot defer embedding wgrad compute when gradient accumulation fusion is not "
        "used)");
  // transformer_config.py __post_init__, selective recompute modules.
  if (r.granularity == RecomputeGranularity::kSelective && r.has(kRecomputeMoeAct) && !s.moe_grouped_gemm)
    throw LayoutError(
        "--recompute-modules moe_act without --moe-grouped-gemm: Megatron-LM refuses it (transformer_config.py: "
        "moe_act in recompute_modules is only supported with moe_grouped_gemm)");

  if (s.wgrad_deferral_limit < 0 || s.wgrad_deferral_limit > kMaxWorldSize)
    throw LayoutError(
        fmt::format("--wgrad-deferral-limit must be in [0, {}], got {}", kMaxWorldSize, s.wgrad_deferral_limit));
  if (const auto& g = s.pipeline.microbatch_group_size) {
    require_positive("--microbatch-group-size-per-virtual-pipeline-stage", *g, kMaxParallelSize);
    // schedules.py forward_backward_pipelining_with_interleaving: the group may not be smaller
    // than PP (nor larger than m, checked by the engine); the 1F1B schedule never reads it.
    if (*g < p.pp && p.vpp > 1)
      throw LayoutError(
          fmt::format("--microbatch-group-size-per-virtual-pipeline-stage {} is smaller than --pp {}", *g, p.pp));
  }

  auto& o = s.optimizer;
  if (o.distributed && (p.dp * p.cp) % o.instances != 0)
    throw LayoutError(fmt::format("DP x CP = {} is not divisible by --num-distributed-optimizer-instances {}",
                                  p.dp * p.cp, o.instances));
  if (o.precision_aware && !o.distributed)
    throw LayoutError("--use-precision-aware-optimizer needs the distributed optimizer");
  if (o.precision_aware && o.name != "adam")
    throw LayoutError(
        fmt::format("--use-precision-aware-optimizer with --optimizer {}: Megatron-LM supports it only with adam "
                    "(optimizer_config.py)",
                    o.name));
  // optimizer/__init__.py (the emerging optimizers' factory).
  if (o.name == "muon" && s.precision == Precision::kFP16)
    throw LayoutError(
        "--optimizer muon with fp16: Megatron-LM refuses it (optimizer/__init__.py: emerging optimizer "
        "with fp16 is not supported)");
  if (!o.precision_aware &&
      (o.exp_avg != DType::kFP32 || o.exp_avg_sq != DType::kFP32 || o.main_params != DType::kFP32))
    throw LayoutError(
        "--exp-avg-dtype, --exp-avg-sq-dtype and --main-params-dtype need --use-precision-aware-optimizer");
  if (!kOffloadFractionRange.holds(o.cpu_offload_fraction))
    throw LayoutError(fmt::format("--optimizer-cpu-offload-fraction must be in {}, got {}",
                                  to_string(kOffloadFractionRange), o.cpu_offload_fraction));
  if (o.cpu_offload_fraction > 0 && !o.distributed)
    throw LayoutError("--optimizer-cpu-offload-fraction needs the distributed optimizer");
  if (!s.transformer_engine && s.precision == Precision::kFP8)
    throw LayoutError("FP8 training needs --transformer-impl transformer_engine");
  if (s.moe_routing_imbalance && !kRoutingImbalanceRange.holds(*s.moe_routing_imbalance))
    throw LayoutError(fmt::format("--moe-routing-imbalance must be in {}, got {}", to_string(kRoutingImbalanceRange),
                                  *s.moe_routing_imbalance));
  const auto& f = s.fsdp;
  if (f.kind == FsdpKind::kMegatron) {
    if (!o.distributed)
      throw LayoutError("--use-megatron-fsdp runs with the distributed optimizer (arguments.py forces it)");
    if (o.cpu_offload_fraction > 0) throw LayoutError("optimizer CPU offload with Megatron-FSDP is not modelled");
    if (o.name != "adam")
      throw LayoutError(fmt::format("--optimizer {} with Megatron-FSDP is not modelled (adam)", o.name));
  }
  if (f.kind == FsdpKind::kTorchFsdp2) {
    // arguments.py validate_args: what Megatron-LM refuses with --use-torch-fsdp2.
    if (p.pp > 1) throw LayoutError("--use-torch-fsdp2 is not supported with pipeline parallelism (--pp > 1)");
    if (p.ep > 1) throw LayoutError("--use-torch-fsdp2 is not supported with expert parallelism (--ep > 1)");
    if (o.distributed) throw LayoutError("--use-torch-fsdp2 is not supported with the distributed optimizer");
    if (s.gradient_accumulation_fusion)
      throw LayoutError(
          "--use-torch-fsdp2 is not supported with gradient accumulation fusion "
          "(--no-gradient-accumulation-fusion)");
    if (s.precision == Precision::kFP16) throw LayoutError("--use-torch-fsdp2 does not support fp16");
    if (o.name != "adam") throw LayoutError(fmt::format("--optimizer {} with FSDP2 is not modelled (adam)", o.name));
  }
  if (f.kind == FsdpKind::kNone &&
      (f.strategy != FsdpSharding::kOptimGradsParams || f.outer != FsdpSharding::kNoShard || f.double_buffer ||
       f.communication_unit_size != 0 || f.main_grads || f.grad_comm || f.main_params != DType::kFP32 ||
       !f.reshard_after_forward))
    throw LayoutError("the Megatron-FSDP / FSDP2 settings need --use-megatron-fsdp or --use-torch-fsdp2");
  if (f.communication_unit_size < 0 || f.communication_unit_size > kMaxWorldSize)
    throw LayoutError(fmt::format("--suggested-communication-unit-size must be in [1, {}], got {}", kMaxWorldSize,
                                  f.communication_unit_size));
  if (s.fp8_param_gather && !o.distributed && f.kind == FsdpKind::kNone)
    throw LayoutError("--fp8-param-gather needs the distributed optimizer");
  if (s.fp8_param_gather && s.precision != Precision::kFP8)
    throw LayoutError("--fp8-param-gather needs --precision fp8");
  if (!s.cublas_workspace_config.empty()) (void)parse_cublas_workspace_config(s.cublas_workspace_config);
  if (s.moe_capacity_factor && !kCapacityFactorRange.holds(*s.moe_capacity_factor))
    throw LayoutError(fmt::format("--moe-capacity-factor must be in {}, got {}", to_string(kCapacityFactorRange),
                                  *s.moe_capacity_factor));
  if (s.moe_pad_to_capacity && !s.moe_capacity_factor)
    throw LayoutError("--moe-pad-expert-input-to-capacity needs --moe-capacity-factor");
  // holds() is false for NaN, which once passed `d < 0 || d >= 1` and was estimated as no dropout.
  for (double d : {s.hidden_dropout.value_or(0.0), s.attention_dropout.value_or(0.0), s.lora.dropout})
    if (!kDropoutRange.holds(d))
      throw LayoutError(fmt::format("dropout rates must be in {}, got {}", to_string(kDropoutRange), d));
  if (!kLoraAlphaRange.holds(s.lora.alpha))
    throw LayoutError(fmt::format("--lora-alpha must be in {}, got {}", to_string(kLoraAlphaRange), s.lora.alpha));
  check_communication_setup(s);
  return s;
}

void validate_setup(const ModelSpec& model, const TrainingSetup& s) {
  const auto& p = s.parallel;
  // Every stage holds a decoder layer, or under --account-for-embedding/loss-in-pipeline-split the
  // embedding or the loss, which count as a layer each (arguments.py; transformer_block.py builds
  // a stage of no decoder layer then). A pipeline layout says it itself (partition_pipeline).
  const std::int64_t counted = model.num_layers + s.pipeline.accounted_blocks();
  if (s.pipeline.layout.empty() && p.pp > counted)
    throw LayoutError(fmt::format("--pp {} is more pipeline stages than the model's {} layers{}", p.pp,
                                  model.num_layers,
                                  counted > model.num_layers ? " (with the embedding and the loss)" : ""));
  if (s.seq_length % p.cp != 0)
    throw LayoutError(fmt::format("--seq-length {} is not divisible by --cp {}", s.seq_length, p.cp));
  if (p.cp > 1 && s.seq_length % (2 * p.cp) != 0)
    throw LayoutError(
        fmt::format("--seq-length {} is not divisible by 2 x CP = {} (context parallelism splits the "
                    "sequence into 2 x CP chunks for load balancing)",
                    s.seq_length, 2 * p.cp));
  if (sequence_parallel_on(p) && (s.seq_length / p.cp) % p.tp != 0)
    throw LayoutError(
        fmt::format("with sequence parallelism the sequence per CP rank ({} / {} = {}) must be divisible "
                    "by --tp {}",
                    s.seq_length, p.cp, s.seq_length / p.cp, p.tp));
  bool any_moe = false;
  std::int64_t divisible = 0;  // an expert count already found divisible (layers mostly share one)
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& mlp = model.layers[i].mlp;
    if (mlp.num_experts <= 0) continue;
    any_moe = true;
    if (mlp.num_experts == divisible) continue;
    divisible = mlp.num_experts;
    if (mlp.num_experts % p.ep != 0)
      throw LayoutError(
          fmt::format("layer {}: {} experts are not divisible by --ep {}; --ep must divide the {} "
                      "experts: {}",
                      i, mlp.num_experts, p.ep, mlp.num_experts, divisors_text(mlp.num_experts)));
  }
  if (!any_moe && p.ep > 1)
    throw LayoutError(fmt::format("--ep {} needs a mixture-of-experts model; {} has no experts", p.ep, model.name));
  if (any_moe && p.tp > 1 && p.sequence_parallel.has_value() && !*p.sequence_parallel)
    throw LayoutError(
        "Megatron-LM requires sequence parallelism when MoE and tensor parallelism (--tp > 1) are "
        "combined; drop --no-sequence-parallel");
  if (model.position_embedding == PositionEmbedding::kLearnedAbsolute && model.max_position_embeddings > 0 &&
      s.seq_length > model.max_position_embeddings)
    throw LayoutError(
        fmt::format("--seq-length {} exceeds the learned position table of {} positions "
                    "(max_position_embeddings)",
                    s.seq_length, model.max_position_embeddings));
  // transformer_config.py __post_init__: with shared experts (moe_shared_expert_intermediate_size).
  const auto& rc = s.recompute;
  if (rc.granularity == RecomputeGranularity::kSelective && rc.has(kRecomputeSharedExperts) &&
      s.comm.shared_expert_overlap && any_shared_experts(model))
    throw LayoutError(
        "--recompute-modules shared_experts with --moe-shared-expert-overlap: Megatron-LM refuses it "
        "(transformer_config.py: shared_experts recompute cannot work with --moe-shared-expert-overlap)");
  // arguments.py validate_args.
  if (s.fsdp.kind == FsdpKind::kTorchFsdp2 && model.tie_embeddings)
    throw LayoutError(
        fmt::format("--use-torch-fsdp2 with {}'s tied embedding and output weights: Megatron-LM requires "
                    "--untie-embeddings-and-output-weights with FSDP2",
                    model.name));
  check_communication_model(model, s);
  check_low_precision_setup(model, s);
}

}  // namespace mme
