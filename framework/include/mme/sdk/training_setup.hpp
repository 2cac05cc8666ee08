// TrainingSetup: the parallel layout and training knobs of one Megatron-LM run. A plain value
// type; `resolve_setup` fills the defaults that depend on other knobs (ETP = TP, SP on with
// TP > 1, DP from the world size) and `validate_setup` checks it against a model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mme {

struct ModelSpec;

enum class Precision { kBF16, kFP16, kFP8, kFP32 };
enum class DType { kFP32, kBF16, kFP16, kFP8 };

// Bytes per element of a tensor of dtype d.
constexpr std::int64_t dtype_bytes(DType d) {
  switch (d) {
    case DType::kFP32: return 4;
    case DType::kBF16:
    case DType::kFP16: return 2;
    case DType::kFP8: return 1;
  }
  return 4;
}
// --attention-backend. kFlash and kFused keep no s^2 score tensors: kFlash is Transformer Engine's
// FlashAttention over the flash-attn package, kFused its FusedAttention over cuDNN
// (attention/dot_product_attention/backends.py); kAuto is Transformer Engine's own choice,
// resolved by resolve_attention() from the GPU architecture and the NVTE_* environment.
enum class AttentionBackend { kFlash, kUnfused, kAuto, kFused };
// A kernel that keeps no s^2 score tensors (flash-attn or cuDNN fused attention).
constexpr bool fused_kernel_attention(AttentionBackend b) {
  return b == AttentionBackend::kFlash || b == AttentionBackend::kFused;
}
enum class TokenDispatcher { kAllToAll, kAllGather, kFlex };
// --moe-flex-dispatcher-backend: the library behind the flex dispatcher (token_dispatcher.py
// MoEFlexTokenDispatcher: _DeepepManager, _HybridEPManager).
enum class FlexBackend { kDeepEP, kHybridEP };
// --cp-comm-type: how Transformer Engine's attention exchanges the sequence shards of a CP group
// (attention/dot_product_attention/context_parallel.py attn_forward_func_with_cp).
enum class CpCommType { kP2P, kAllGather, kA2A, kA2AP2P };
// --fp8-recipe: how Transformer Engine scales FP8 GEMM operands (fp8_utils.py get_fp8_recipe):
// DelayedScaling, Float8CurrentScaling, Float8BlockScaling (1x128 / 128x128 blocks),
// MXFP8BlockScaling (1x32 blocks). Megatron-LM's `custom` recipe is refused (not modelled).
enum class Fp8Recipe { kDelayed, kTensorwise, kBlockwise, kMxfp8 };
// --fp8-format: e4m3 everywhere, or hybrid (e5m2 gradients). The same bytes either way.
enum class Fp8Format { kE4M3, kHybrid };
enum class RecomputeGranularity { kNone, kSelective, kFull };
enum class RecomputeMethod { kUniform, kBlock };

// Selective-recompute modules (Megatron's --recompute-modules), as bit flags.
enum RecomputeModule : std::uint32_t {
  kRecomputeCoreAttn = 1u << 0,
  kRecomputeMlp = 1u << 1,
  kRecomputeMoe = 1u << 2,
  kRecomputeMoeAct = 1u << 3,
  kRecomputeLayernorm = 1u << 4,
  kRecomputeMlaUpProj = 1u << 5,
  kRecomputeSharedExperts = 1u << 6,
};

// Fine-grained activation offloading's module groups (Megatron-LM's --offload-modules), as bit
// flags in the order a decoder layer's forward opens them
// (pipeline_parallel/fine_grained_activation_offload.py, transformer_layer.py, attention.py,
// multi_latent_attention.py, moe/experts.py). A saved tensor belongs to the group whose
// context saves it; ActTerm::module names it.
enum OffloadModule : std::uint32_t {
  kOffloadAttnNorm = 1u << 0,       // attn_norm: a separate input norm (MLA; GQA fuses its norm into qkv)
  kOffloadQkvLinear = 1u << 1,      // qkv_linear: the QKV projections (GQA's fused input norm included)
  kOffloadCoreAttn = 1u << 2,       // core_attn: the attention core (Q, K, V, softmax statistics, scores)
  kOffloadAttnProj = 1u << 3,       // attn_proj: linear_proj's input
  kOffloadMlpNorm = 1u << 4,        // mlp_norm: a separate pre-MLP norm (MoE layers)
  kOffloadExpertFc1 = 1u << 5,      // expert_fc1: the routed experts' fc1 input
  kOffloadMoeAct = 1u << 6,         // moe_act: the expert activation's input
  kOffloadFusedGroupMlp = 1u << 7,  // fused_group_mlp: TE's fused grouped MLP (op fuser; refused)
  kOffloadGdpQkv = 1u << 8,         // gdp_qkv: Gated Delta Product layers (hybrid models; none here)
};

struct ParallelLayout {
  std::int64_t tp = 1;   // tensor_model_parallel_size
  std::int64_t pp = 1;   // pipeline_model_parallel_size
  std::int64_t vpp = 1;  // virtual pipeline chunks per PP rank (1 = not interleaved)
  std::int64_t ep = 1;   // expert_model_parallel_size
  std::int64_t etp = 0;  // expert_tensor_parallel_size (0 = unset: Megatron uses TP)
  std::int64_t cp = 1;   // context_parallel_size
  std::int64_t world_size = 8;
  std::optional<bool> sequence_parallel;  // unset: on when TP > 1

  // Derived (valid after resolve_setup).
  std::int64_t dp = 0;         // data parallel = world / (tp * pp * cp)
  std::int64_t expert_dp = 0;  // expert data parallel = world / (etp * ep * pp)

  bool operator==(const ParallelLayout&) const = default;
};

struct RecomputeSettings {
  RecomputeGranularity granularity = RecomputeGranularity::kNone;
  RecomputeMethod method = RecomputeMethod::kUniform;
  std::int64_t num_layers = 1;
  std::uint32_t modules = kRecomputeCoreAttn;  // selective modules (Megatron default core_attn)

  bool has(RecomputeModule m) const { return granularity == RecomputeGranularity::kSelective && (modules & m) != 0; }

  bool operator==(const RecomputeSettings&) const = default;
};

struct PipelineSplit {
  std::optional<std::int64_t> first_stage_layers;  // --num-layers-in-first-pipeline-stage
  std::optional<std::int64_t> last_stage_layers;   // --num-layers-in-last-pipeline-stage
  bool account_for_embedding = false;              // --account-for-embedding-in-pipeline-split
  bool account_for_loss = false;                   // --account-for-loss-in-pipeline-split
  std::string layout;                              // --pipeline-model-parallel-layout
  // --num-layers-per-virtual-pipeline-stage: VPP = (layers / PP) / this (arguments.py).
  std::optional<std::int64_t> layers_per_virtual_stage;
  // --microbatch-group-size-per-virtual-pipeline-stage (unset: PP, Megatron's default).
  std::optional<std::int64_t> microbatch_group_size;

  // The blocks the --account-for-* flags count as a layer each when the layers are split over the
  // pipeline (arguments.py adds them to num_layers before dividing by PP): 0, 1 or 2.
  std::int64_t accounted_blocks() const { return (account_for_embedding ? 1 : 0) + (account_for_loss ? 1 : 0); }

  bool operator==(const PipelineSplit&) const = default;
};

struct OptimizerSettings {
  bool distributed = true;     // --use-distributed-optimizer
  std::int64_t instances = 1;  // --num-distributed-optimizer-instances
  // --main-grads-dtype: the gradient buffer's dtype. Unset = Megatron-LM's default: fp32 for
  // bf16/fp8 training (accumulate_allreduce_grads_in_fp32 is switched on), fp16 for fp16.
  std::optional<DType> main_grads;
  bool precision_aware = false;        // --use-precision-aware-optimizer
  DType main_params = DType::kFP32;    // --main-params-dtype
  DType exp_avg = DType::kFP32;        // --exp-avg-dtype
  DType exp_avg_sq = DType::kFP32;     // --exp-avg-sq-dtype
  bool store_param_remainders = true;  // TE FusedAdam keeps a 16-bit remainder of bf16 params
  double cpu_offload_fraction = 0.0;   // --optimizer-offload-fraction with --optimizer-cpu-offload
  // --overlap-cpu-optimizer-d2h-h2d: HybridDeviceOptimizer's copies on their own streams, one host
  // optimizer per parameter (no GPU memory of its own).
  bool overlap_cpu_d2h_h2d = false;
  std::string name = "adam";  // --optimizer (adam | sgd | muon)

  bool operator==(const OptimizerSettings&) const = default;
};

// Activation offloading to the host. Two mechanisms Megatron-LM refuses to combine:
//  - TE's layer offload (--cpu-offloading, on when --cpu-offloading-num-layers > 0;
//    transformer_block.py get_cpu_offload_context): the saved tensors of the first N decoder
//    layers of the model go to the host during forward and come back during backward;
//  - fine-grained offloading (--fine-grained-activation-offloading --offload-modules ...;
//    pipeline_parallel/fine_grained_activation_offload.py): the saved tensors of the listed
//    module groups of every layer, per micro-batch and model chunk.
struct ActivationOffloadSettings {
  bool cpu_offloading = false;                 // --cpu-offloading (set by --cpu-offloading-num-layers > 0)
  std::int64_t cpu_offloading_num_layers = 0;  // --cpu-offloading-num-layers
  bool cpu_offloading_activations = true;      // TransformerConfig.cpu_offloading_activations
  bool cpu_offloading_weights = false;         // TransformerConfig.cpu_offloading_weights (no effect in TE)
  // NVTE_CPU_OFFLOAD_V1=1: TE's v1 offload path (cpu_offload_v1.py) instead of the default one.
  bool te_offload_v1 = false;
  bool fine_grained = false;                     // --fine-grained-activation-offloading
  std::uint32_t modules = 0;                     // --offload-modules, OffloadModule bits
  std::int64_t min_tensor_size = 1024 * 1024;    // --min-offloaded-tensor-size (elements)
  double fraction = 1.0;                         // --activation-offload-fraction
  std::int64_t delta_bytes_across_pp_ranks = 0;  // --delta-offload-bytes-across-pp-ranks

  bool on() const { return fine_grained || cpu_offloading; }

  bool operator==(const ActivationOffloadSettings&) const = default;
};

// Sharded data parallelism: Megatron-FSDP (--use-megatron-fsdp, distributed/fsdp/) or PyTorch
// FSDP2 (--use-torch-fsdp2, distributed/torch_fully_sharded_data_parallel.py). What each
// strategy shards: no_shard nothing, optim the fp32 main params and Adam states, optim_grads
// also the gradients, optim_grads_params also the 16-bit weights (ZeRO-3).
enum class FsdpKind { kNone, kMegatron, kTorchFsdp2 };
enum class FsdpSharding { kNoShard, kOptim, kOptimGrads, kOptimGradsParams };
struct FsdpSettings {
  FsdpKind kind = FsdpKind::kNone;
  FsdpSharding strategy = FsdpSharding::kOptimGradsParams;  // --data-parallel-sharding-strategy
  FsdpSharding outer = FsdpSharding::kNoShard;              // --outer-dp-sharding-strategy (HSDP: no_shard or optim)
  DType main_params = DType::kFP32;                         // --megatron-fsdp-main-params-dtype
  std::optional<DType> main_grads;                          // --megatron-fsdp-main-grads-dtype (unset: auto)
  std::optional<DType> grad_comm;                           // --megatron-fsdp-grad-comm-dtype (unset: auto)
  bool double_buffer = false;                               // --fsdp-double-buffer
  std::int64_t communication_unit_size = 0;                 // --suggested-communication-unit-size (0: unset)
  bool reshard_after_forward = true;                        // FSDP2; --torch-fsdp2-no-reshard-after-forward

  bool operator==(const FsdpSettings&) const = default;
};

// Communication overlap and its buffers (framework/src/engine/communication_buffers.cpp).
struct CommunicationSettings {
  FlexBackend flex_backend = FlexBackend::kDeepEP;  // --moe-flex-dispatcher-backend (Megatron-LM's default)
  bool shared_expert_overlap = false;               // --moe-shared-expert-overlap
  bool ep_overlap = false;                          // --overlap-moe-expert-parallel-comm (combined 1F1B)
  bool tp_comm_overlap = false;                     // --tp-comm-overlap (TE userbuffers)
  bool overlap_grad_reduce = false;                 // --overlap-grad-reduce
  bool overlap_param_gather = false;                // --overlap-param-gather
  std::int64_t ddp_bucket_size = 0;                 // --ddp-bucket-size (0: Megatron's max(40M, 1M x DP))
  bool pad_buckets_for_nccl = false;                // --ddp-pad-buckets-for-high-nccl-busbw

  bool operator==(const CommunicationSettings&) const = default;
};

// CUDA graphs (--cuda-graph-impl, --cuda-graph-modules, --cuda-graph-warmup-steps;
// core/transformer/cuda_graphs.py, transformer_engine/pytorch/graph.py). Per-layer graphs: a
// graphed scope's saved tensors and working memory live in the graphs' private memory pool,
// which the caching allocator reports as reserved, not allocated, once capture is over
// (framework/src/engine/cuda_graphs.cpp).
enum class CudaGraphImpl { kNone, kLocal, kTransformerEngine };
// The scopes of --cuda-graph-modules, as bit flags (0 = the whole decoder layer, Megatron's
// default `full`, normalised to an empty list).
enum CudaGraphModule : std::uint32_t {
  kGraphAttn = 1u << 0,           // attn: TransformerLayer._forward_attention (input norm, attention, BDA)
  kGraphMlp = 1u << 1,            // mlp: _forward_mlp of a dense layer
  kGraphMoe = 1u << 2,            // moe: _forward_mlp of a MoE layer (drop-and-pad MoE only)
  kGraphMoeRouter = 1u << 3,      // moe_router: the pre-MLP norm, the router (and unoverlapped shared experts)
  kGraphMoePreprocess = 1u << 4,  // moe_preprocess: MoELayer.preprocess (the dispatcher's preprocess)
};
struct CudaGraphSettings {
  CudaGraphImpl impl = CudaGraphImpl::kNone;  // --cuda-graph-impl (Megatron-LM's default: none)
  std::uint32_t modules = 0;                  // --cuda-graph-modules, CudaGraphModule bits
  std::int64_t warmup_steps = 3;              // --cuda-graph-warmup-steps (TransformerConfig default 3)
  bool on() const { return impl != CudaGraphImpl::kNone; }

  bool operator==(const CudaGraphSettings&) const = default;
};

// Low-precision GEMMs beyond --precision fp8 (transformer_config.py, "fp8 related" and "fp4
// related"; memory terms in framework/src/engine/low_precision.cpp). The defaults are Megatron-LM's.
struct LowPrecisionSettings {
  std::optional<Fp8Format> fp8_format;         // --fp8-format (sets --precision fp8; unset: not stated)
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // --fp8-recipe
  std::int64_t amax_history_len = 1;           // --fp8-amax-history-len (delayed scaling)
  bool fp4 = false;                            // --fp4-format e2m1: NVFP4 GEMMs (--fp4-recipe nvfp4)
  bool fp4_param_gather = false;               // --fp4-param-gather: NVFP4 primary weights
  // --first-last-layers-bf16 with --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16:
  // the first and last decoder layers of the model (global indices) run without FP8/FP4.
  bool first_last_layers_bf16 = false;
  std::int64_t layers_at_start_in_bf16 = 1;
  std::int64_t layers_at_end_in_bf16 = 1;

  bool operator==(const LowPrecisionSettings&) const = default;
};

// LoRA as Megatron-Bridge runs it (megatron/bridge/peft/lora.py, its LoRA dataclass): every base
// weight frozen (requires_grad False: no gradient buffer slot, no optimizer state), a low-rank
// adapter (ParallelLinearAdapter: linear_in [in -> r], linear_out [r -> out]) beside each
// targeted linear of every decoder layer. Targets as bit flags, Bridge's module names.
enum LoraTarget : std::uint32_t {
  kLoraLinearQkv = 1u << 0,   // linear_qkv (column parallel, the input norm fused in)
  kLoraLinearProj = 1u << 1,  // linear_proj (row parallel)
  kLoraLinearFc1 = 1u << 2,   // linear_fc1 (column parallel): dense MLP, shared and routed experts
  kLoraLinearFc2 = 1u << 3,   // linear_fc2 (row parallel)
};
inline constexpr std::uint32_t kLoraDefaultTargets = kLoraLinearQkv | kLoraLinearProj | kLoraLinearFc1 | kLoraLinearFc2;
enum class LoraDropoutPosition { kPre, kPost };
struct LoraSettings {
  std::int64_t rank = 0;                        // LoRA.dim (Bridge's default 32); 0 = no LoRA, every weight trains
  double alpha = 32;                            // LoRA.alpha: the output scale alpha / dim, no memory effect
  std::uint32_t targets = kLoraDefaultTargets;  // LoRA.target_modules, LoraTarget bits
  double dropout = 0.0;                         // LoRA.dropout
  LoraDropoutPosition dropout_position = LoraDropoutPosition::kPre;  // LoRA.dropout_position
  std::optional<DType> dtype;                                        // LoRA.lora_dtype (unset: the parameters' dtype)
  std::string a_init = "xavier";                                     // LoRA.lora_A_init_method (no memory effect)
  std::string b_init = "zero";                                       // LoRA.lora_B_init_method (no memory effect)
  bool a2a_experimental = false;  // LoRA.a2a_experimental (not modelled: the default path)

  bool on() const { return rank > 0; }
  bool targets_module(LoraTarget t) const { return on() && (targets & t) != 0; }

  bool operator==(const LoraSettings&) const = default;
};

struct TrainingSetup {
  ParallelLayout parallel;
  PipelineSplit pipeline;
  RecomputeSettings recompute;
  OptimizerSettings optimizer;
  FsdpSettings fsdp;
  CommunicationSettings comm;
  ActivationOffloadSettings activation_offload;
  CudaGraphSettings cuda_graph;
  LoraSettings lora;

  std::int64_t micro_batch_size = 1;
  std::int64_t seq_length = 4096;
  std::int64_t global_batch_size = 0;  // 0 = not given: assume enough micro-batches to fill the pipeline

  Precision precision = Precision::kBF16;
  bool fp8_param_gather = false;                                 // --fp8-param-gather
  LowPrecisionSettings low_precision;                            // recipe, format, FP4, bf16 layers
  AttentionBackend attention_backend = AttentionBackend::kAuto;  // Megatron-LM's default
  // What Transformer Engine's get_attention_backend (attention/dot_product_attention/utils.py)
  // reads besides the model: NVTE_FLASH_ATTN / NVTE_FUSED_ATTN (1 unless set), determinism
  // (NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, which --deterministic-mode sets), and whether flash-attn
  // >= 2.4.1 is installed (unset: unknown; the bound then covers the unfused fallback).
  struct AttentionEnvironment {
    bool flash_enabled = true;
    bool fused_enabled = true;
    bool deterministic = false;
    std::optional<bool> flash_attn_installed;
    bool operator==(const AttentionEnvironment&) const = default;
  } attention_env;
  // --cross-entropy-fusion-impl: native (megatron/core/fusions/fused_cross_entropy.py) or te.
  bool cross_entropy_te = false;
  bool gradient_accumulation_fusion = true;  // --no-gradient-accumulation-fusion turns it off
  bool masked_softmax_fusion = true;         // --no-masked-softmax-fusion turns it off
  // Megatron-LM's fused kernels that change what autograd saves (docs/memory-model.md, "Fusions"):
  // --no-bias-swiglu-fusion, --no-bias-gelu-fusion (bias_activation_fusion, mlp.py), --no-rope-fusion
  // (apply_rope_fusion, rope_utils.py); --no-bias-dropout-fusion saves the same tensors either way.
  bool bias_swiglu_fusion = true;
  bool bias_gelu_fusion = true;  // Megatron-LM turns it off without --add-bias-linear (arguments.py)
  bool apply_rope_fusion = true;
  // --use-fused-weighted-squared-relu: routed experts with squared ReLU run
  // fused_weighted_squared_relu.py's kernel, which keeps fc1's output and the routing probabilities
  // only (experts.py TEGroupedMLP.forward); off, torch keeps the unscaled activation too.
  bool fused_weighted_squared_relu = false;
  // Unset: Megatron-LM's default, on, except for a model whose experts have linear biases under TE's
  // grouped GEMM, which Megatron-LM refuses with it (experts.py TEGroupedMLP): off there, and said
  // (bias_dropout_fusion_on; the engine's pass setup holds the resolved value).
  std::optional<bool> bias_dropout_fusion;
  // The dataloader's dense causal attention mask (Megatron-LM's --create-attention-mask-in-dataloader,
  // on by default there; off here unless asked for: recipes turn it off, and the estimates before it
  // existed assumed none). core/utils.py get_batch_on_this_tp_rank puts a bool [b, 1, s, s] on the
  // first and last stages' GPUs, sliced to [b, 1, s/CP, s] per CP rank.
  bool create_attention_mask = false;
  // --attention-softmax-in-fp32 (set by --apply-query-key-layer-scaling): what Megatron's own
  // attention softmax computes in when it falls back to torch softmax.
  bool attention_softmax_in_fp32 = false;
  // --defer-embedding-wgrad-compute and --wgrad-deferral-limit (0 = every micro-batch).
  bool defer_embedding_wgrad = false;
  std::int64_t wgrad_deferral_limit = 0;
  // The share of tokens the busiest expert rank receives, relative to its even share
  // (--moe-routing-imbalance, 1 = perfectly balanced). The point estimate uses 1; the upper
  // bound uses this value (resolve_setup fills the documented default when unset).
  std::optional<double> moe_routing_imbalance;
  // Environment variables that decided something (NAME=value), for the report.
  std::vector<std::string> environment_used;
  std::vector<std::string> environment_ignored;  // given, but without a memory effect mme models
  // --transformer-impl: transformer_engine (default) or local (Megatron's own layers: unfused
  // DotProductAttention, no Transformer Engine workspaces).
  bool transformer_engine = true;
  TokenDispatcher dispatcher = TokenDispatcher::kAllToAll;
  std::optional<double> moe_capacity_factor;  // --moe-expert-capacity-factor (unset: dropless)
  bool moe_pad_to_capacity = false;           // --moe-pad-expert-input-to-capacity
  // --moe-router-force-load-balancing: the router replaces its logits by random ones
  // (moe_utils.py apply_random_logits), so each token's experts are drawn uniformly.
  bool moe_force_load_balancing = false;
  bool moe_grouped_gemm = true;                // --moe-grouped-gemm (TEGroupedMLP); off: SequentialMLP
  bool cross_entropy_fusion = false;           // --cross-entropy-loss-fusion
  CpCommType cp_comm_type = CpCommType::kP2P;  // --cp-comm-type (Megatron-LM's default: p2p)
  // CUBLAS_WORKSPACE_CONFIG (e.g. ":4096:8", what deterministic runs set); empty = PyTorch's
  // default for the GPU architecture.
  std::string cublas_workspace_config;
  // --empty-unused-memory-level (training.py train_step): 1 empties PyTorch's cache after the
  // forward and backward passes, 2 after the optimizer step too (reserved memory only).
  std::int64_t empty_unused_memory_level = 0;
  std::int64_t make_vocab_size_divisible_by = 128;

  // Dropout overrides (unset: the model's own rates).
  std::optional<double> hidden_dropout;
  std::optional<double> attention_dropout;

  // Derived (valid after resolve_setup).
  std::int64_t num_micro_batches = 0;  // m per step (0 = unknown: pipeline assumed full)

  bool operator==(const TrainingSetup&) const = default;
};

// The largest sizes resolve_setup accepts (the CLI and spec files use the same bounds): far
// beyond any real run, and small enough that products of them with model sizes stay in 64 bits.
inline constexpr std::int64_t kMaxParallelSize = std::int64_t{1} << 20;      // TP, PP, VPP, EP, ETP, CP, PP x VPP
inline constexpr std::int64_t kMaxWorldSize = std::int64_t{1} << 40;         // GPUs, global batch size
inline constexpr std::int64_t kMaxSequenceSize = std::int64_t{1} << 24;      // sequence length, micro-batch size
inline constexpr std::int64_t kMaxMicroBatchTokens = std::int64_t{1} << 32;  // sequence length x micro-batch size

// Transformer Engine's attention choice for a run on a GPU of CUDA compute capability
// `compute_capability` (80, 90, 100, ...; 0 = not CUDA): the backend of the point estimate, and
// whether the run may still fall back to unfused attention (flash-attn presence unknown) or take
// flash-attn over cuDNN.
struct AttentionChoice {
  AttentionBackend backend = AttentionBackend::kFused;  // kFlash, kFused or kUnfused
  bool may_fall_back_to_unfused = false;
  // kFused chosen where the run may take TE's FlashAttention instead (the upper bound covers it).
  bool may_use_flash_attn = false;
  std::string reason;  // one line for the report
};
// `model`, where given, adds what its attention asks of the backends: a softmax other than vanilla
// (SoftmaxType) rules out FlashAttention; sliding windows rule out cuDNN fused attention under the
// p2p context-parallel exchange. Throws UsageError for an --attention-backend that cannot run the
// model's softmax.
struct ModelSpec;
// Whether the bias-dropout-add runs compiled: as given, else Megatron-LM's default (on) unless the
// model's experts have linear biases under Transformer Engine's grouped GEMM, whose TEGroupedMLP
// refuses the fusion (experts.py): recipes of such models (GPT-OSS) turn it off.
bool experts_refuse_bias_dropout_fusion(const ModelSpec& model, const TrainingSetup& setup);
bool bias_dropout_fusion_on(const ModelSpec& model, const TrainingSetup& setup);

AttentionChoice resolve_attention(const TrainingSetup& setup, int compute_capability, const ModelSpec* model = nullptr);

// Applies one environment variable of the run (--env NAME=VALUE, a launch script's export
// line, a ground-truth env: column) to the setup: CUBLAS_WORKSPACE_CONFIG, NVTE_FLASH_ATTN,
// NVTE_FUSED_ATTN, NVTE_ALLOW_NONDETERMINISTIC_ALGO, NVTE_CPU_OFFLOAD_V1, and for the device total
// PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF, PYTORCH_NO_CUDA_MEMORY_CACHING and NCCL_BUFFSIZE
// (checked by the engine, framework/src/engine/device_memory.cpp) decide memory and are recorded in
// environment_used; any other name changes nothing and returns false. Throws UsageError for a
// value the variable cannot take.
bool apply_environment(TrainingSetup& setup, const std::string& name, const std::string& value);
// --deterministic-mode: the defaults megatron/training/determinism.py apply_determinism_env
// fills in (deterministic TE kernels, CUBLAS_WORKSPACE_CONFIG=:4096:8 unless already set).
void apply_deterministic_mode(TrainingSetup& setup);

// True for the environment variables apply_environment models.
bool is_modelled_environment(const std::string& name);
// Splits "NAME=VALUE" (UsageError naming `flag` when it is not of that form).
std::pair<std::string, std::string> split_env_assignment(const std::string& text, std::string_view flag);

// The default of --moe-routing-imbalance (docs/memory-model.md, "Upper bound").
inline constexpr double kDefaultMoeRoutingImbalance = 1.25;

// The range of a number knob: the flags, spec files (setup schema) and resolve_setup check the
// same one.
struct NumberRange {
  double lo = 0, hi = 0;
  bool lo_open = false, hi_open = false;
  constexpr bool holds(double v) const { return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi); }
};
inline constexpr NumberRange kOffloadFractionRange{0, 1};            // --optimizer-cpu-offload-fraction
inline constexpr NumberRange kRoutingImbalanceRange{1, 1024};        // --moe-routing-imbalance
inline constexpr NumberRange kCapacityFactorRange{0, 1e6, true};     // --moe-capacity-factor
inline constexpr NumberRange kDropoutRange{0, 1, false, true};       // --hidden-dropout, --attention-dropout
inline constexpr NumberRange kActivationOffloadFractionRange{0, 1};  // --activation-offload-fraction
inline constexpr NumberRange kLoraAlphaRange{0, 1e9, true};          // --lora-alpha
// "[0, 1]", "(0, 1e+06]", "[0, 1)".
std::string to_string(const NumberRange& range);

// The effective expert tensor parallel size (ETP unset = TP).
inline std::int64_t effective_etp(const ParallelLayout& p) { return p.etp > 0 ? p.etp : p.tp; }
// GEMMs in a quantized format: FP8 (--precision fp8) or NVFP4 (--fp4-format).
inline bool quantized_gemms(const TrainingSetup& s) { return s.precision == Precision::kFP8 || s.low_precision.fp4; }
// Primary weights kept quantized (--fp8-param-gather / --fp4-param-gather).
inline bool quantized_param_gather(const TrainingSetup& s) {
  return s.fp8_param_gather || (s.low_precision.fp4 && s.low_precision.fp4_param_gather);
}
inline bool sequence_parallel_on(const ParallelLayout& p) { return p.sequence_parallel.value_or(p.tp > 1) && p.tp > 1; }

// Names used in reports and flags.
const char* to_string(Precision p);
const char* to_string(DType d);
const char* to_string(AttentionBackend b);
const char* to_string(TokenDispatcher d);
const char* to_string(FlexBackend b);
const char* to_string(CpCommType c);
const char* to_string(FsdpSharding s);
const char* to_string(FsdpKind k);
const char* to_string(CudaGraphImpl i);
const char* to_string(Fp8Recipe r);
const char* to_string(Fp8Format f);
const char* to_string(RecomputeGranularity g);
const char* to_string(RecomputeMethod m);
std::string recompute_modules_to_string(std::uint32_t modules);
// Parses "core_attn,mlp" (comma or space separated, brackets allowed). Throws UsageError.
std::uint32_t parse_recompute_modules(const std::string& text);
// Offload module groups as Megatron-LM spells them: "attn_norm,core_attn" (in OffloadModule order).
std::string offload_modules_to_string(std::uint32_t modules);
// Parses --offload-modules ("core_attn attn_proj", commas, spaces, brackets and quotes allowed);
// an unknown name is a UsageError with Megatron-LM's message (transformer_config.py).
std::uint32_t parse_offload_modules(const std::string& text);
// CUDA graph scopes as Megatron-LM spells them: "attn,moe_router" (empty: the whole layer).
std::string cuda_graph_modules_to_string(std::uint32_t modules);
// Parses --cuda-graph-modules ("attn mlp", commas, brackets and quotes allowed; `full` alone is
// the whole layer, as transformer_config.py normalises it). Throws UsageError for an unknown
// scope, `full` next to others, and `mamba` (no hybrid models here).
std::uint32_t parse_cuda_graph_modules(const std::string& text);
// LoRA target modules as Megatron-Bridge spells them: "linear_qkv,linear_proj" (LoraTarget order).
std::string lora_targets_to_string(std::uint32_t targets);
// Parses target_modules ("linear_qkv linear_fc1", commas, spaces, brackets and quotes allowed); an
// unknown name, or none, is a UsageError.
std::uint32_t parse_lora_targets(const std::string& text);
DType parse_dtype(const std::string& text);  // throws UsageError
// Bytes of one cuBLAS workspace for a CUBLAS_WORKSPACE_CONFIG value (":SIZE_KiB:COUNT" pairs).
std::int64_t parse_cublas_workspace_config(const std::string& text);  // throws UsageError

}  // namespace mme
