// TrainingSetup: the parallel layout and training knobs of one Megatron-LM run. A plain value
// type; `resolve_setup` fills the defaults that depend on other knobs (ETP = TP, SP on with
// TP > 1, DP from the world size) and `validate_setup` checks it against a model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
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
enum class AttentionBackend { kFlash, kUnfused };
enum class TokenDispatcher { kAllToAll, kAllGather, kFlex };
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
  std::int64_t dp = 0;          // data parallel = world / (tp * pp * cp)
  std::int64_t expert_dp = 0;   // expert data parallel = world / (etp * ep * pp)
};

struct RecomputeSettings {
  RecomputeGranularity granularity = RecomputeGranularity::kNone;
  RecomputeMethod method = RecomputeMethod::kUniform;
  std::int64_t num_layers = 1;
  std::uint32_t modules = kRecomputeCoreAttn;  // selective modules (Megatron default core_attn)

  bool has(RecomputeModule m) const {
    return granularity == RecomputeGranularity::kSelective && (modules & m) != 0;
  }
};

struct PipelineSplit {
  std::optional<std::int64_t> first_stage_layers;  // --num-layers-in-first-pipeline-stage
  std::optional<std::int64_t> last_stage_layers;   // --num-layers-in-last-pipeline-stage
  bool account_for_embedding = false;              // --account-for-embedding-in-pipeline-split
  bool account_for_loss = false;                   // --account-for-loss-in-pipeline-split
  std::string layout;                              // --pipeline-model-parallel-layout
  // --num-layers-per-virtual-pipeline-stage: VPP = (layers / PP) / this (arguments.py).
  std::optional<std::int64_t> layers_per_virtual_stage;
};

struct OptimizerSettings {
  bool distributed = true;                 // --use-distributed-optimizer
  std::int64_t instances = 1;              // --num-distributed-optimizer-instances
  // --main-grads-dtype: the gradient buffer's dtype. Unset = Megatron-LM's default: fp32 for
  // bf16/fp8 training (accumulate_allreduce_grads_in_fp32 is switched on), fp16 for fp16.
  std::optional<DType> main_grads;
  bool precision_aware = false;            // --use-precision-aware-optimizer
  DType main_params = DType::kFP32;        // --main-params-dtype
  DType exp_avg = DType::kFP32;            // --exp-avg-dtype
  DType exp_avg_sq = DType::kFP32;         // --exp-avg-sq-dtype
  bool store_param_remainders = true;      // TE FusedAdam keeps a 16-bit remainder of bf16 params
  double cpu_offload_fraction = 0.0;       // --optimizer-offload-fraction with --optimizer-cpu-offload
  std::string name = "adam";               // --optimizer (adam | sgd | muon)
};

struct TrainingSetup {
  ParallelLayout parallel;
  PipelineSplit pipeline;
  RecomputeSettings recompute;
  OptimizerSettings optimizer;

  std::int64_t micro_batch_size = 1;
  std::int64_t seq_length = 4096;
  std::int64_t global_batch_size = 0;  // 0 = not given: assume enough micro-batches to fill the pipeline

  Precision precision = Precision::kBF16;
  bool fp8_param_gather = false;  // --fp8-param-gather
  AttentionBackend attention_backend = AttentionBackend::kFlash;
  // --transformer-impl: transformer_engine (default) or local (Megatron's own layers: unfused
  // DotProductAttention, no Transformer Engine workspaces).
  bool transformer_engine = true;
  TokenDispatcher dispatcher = TokenDispatcher::kAllToAll;
  std::optional<double> moe_capacity_factor;  // --moe-expert-capacity-factor (unset: dropless)
  bool moe_pad_to_capacity = false;           // --moe-pad-expert-input-to-capacity
  bool moe_grouped_gemm = true;               // --moe-grouped-gemm (TEGroupedMLP); off: SequentialMLP
  bool cross_entropy_fusion = false;          // --cross-entropy-loss-fusion
  // CUBLAS_WORKSPACE_CONFIG (e.g. ":4096:8", what deterministic runs set); empty = PyTorch's
  // default for the GPU architecture.
  std::string cublas_workspace_config;
  std::int64_t make_vocab_size_divisible_by = 128;

  // Dropout overrides (unset: the model's own rates).
  std::optional<double> hidden_dropout;
  std::optional<double> attention_dropout;

  // Derived (valid after resolve_setup).
  std::int64_t num_micro_batches = 0;  // m per step (0 = unknown: pipeline assumed full)
};

// The largest sizes resolve_setup accepts (the CLI and spec files use the same bounds): far
// beyond any real run, and small enough that products of them with model sizes stay in 64 bits.
inline constexpr std::int64_t kMaxParallelSize = std::int64_t{1} << 20;  // TP, PP, VPP, EP, ETP, CP, PP x VPP
inline constexpr std::int64_t kMaxWorldSize = std::int64_t{1} << 40;     // GPUs, global batch size
inline constexpr std::int64_t kMaxSequenceSize = std::int64_t{1} << 24;  // sequence length, micro-batch size
inline constexpr std::int64_t kMaxMicroBatchTokens = std::int64_t{1} << 32;  // sequence length x micro-batch size

// Fills the derived fields and the defaults that depend on other knobs. Throws LayoutError
// for sizes that are not positive or larger than the bounds above, and world sizes that do not
// divide.
TrainingSetup resolve_setup(TrainingSetup setup);

// Checks the layout against a model the way Megatron-LM does (heads by TP, experts by EP,
// layers over PP/VPP, sequence by CP, ...). Throws LayoutError naming the numbers.
void validate_setup(const ModelSpec& model, const TrainingSetup& setup);

// The effective expert tensor parallel size (ETP unset = TP).
inline std::int64_t effective_etp(const ParallelLayout& p) { return p.etp > 0 ? p.etp : p.tp; }
inline bool sequence_parallel_on(const ParallelLayout& p) {
  return p.sequence_parallel.value_or(p.tp > 1) && p.tp > 1;
}

// Names used in reports and flags.
const char* to_string(Precision p);
const char* to_string(DType d);
const char* to_string(AttentionBackend b);
const char* to_string(TokenDispatcher d);
const char* to_string(RecomputeGranularity g);
const char* to_string(RecomputeMethod m);
std::string recompute_modules_to_string(std::uint32_t modules);
// Parses "core_attn,mlp" (comma or space separated, brackets allowed). Throws UsageError.
std::uint32_t parse_recompute_modules(const std::string& text);
DType parse_dtype(const std::string& text);  // throws UsageError
// Bytes of one cuBLAS workspace for a CUBLAS_WORKSPACE_CONFIG value (":SIZE_KiB:COUNT" pairs).
std::int64_t parse_cublas_workspace_config(const std::string& text);  // throws UsageError

}  // namespace mme
