#include "mme/training_setup.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "mme/checked.hpp"
#include "mme/error.hpp"
#include "mme/model_spec.hpp"
#include "mme/pipeline.hpp"
#include "mme/setup_schema.hpp"

namespace mme {

namespace {

void require_positive(std::string_view flag, std::int64_t v, std::int64_t max) {
  if (v <= 0) throw LayoutError(fmt::format("{} must be a positive integer, got {}", flag, v));
  if (v > max) throw LayoutError(fmt::format("{} {} is larger than {}, which no real run uses", flag, v, max));
}

// A number knob's range (setup_schema.cpp): the flags and spec files check the same one.
struct Range {
  const SetupKnob& k;
  bool holds(double v) const {
    return (k.lo_open ? v > k.lo : v >= k.lo) && (k.hi_open ? v < k.hi : v <= k.hi);
  }
  std::string text() const {
    return fmt::format("{}{}, {}{}", k.lo_open ? "(" : "[", k.lo, k.hi, k.hi_open ? ")" : "]");
  }
};

}  // namespace

TrainingSetup resolve_setup(TrainingSetup s) {
  // The ranges of the number knobs: those of the flags and spec files (setup_schema.cpp).
  static const Range offload{*find_knob("optimizer-cpu-offload-fraction")};
  static const Range imbalance{*find_knob("moe-routing-imbalance")};
  static const Range capacity{*find_knob("moe-capacity-factor")};
  static const Range dropout{*find_knob("hidden-dropout")};
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
    throw LayoutError(fmt::format("--seq-length {} x --micro-batch-size {} = {} tokens per micro-batch is more than {}, "
                                  "which no real run uses",
                                  s.seq_length, s.micro_batch_size, s.seq_length * s.micro_batch_size,
                                  kMaxMicroBatchTokens));
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
    const auto stages = static_cast<std::int64_t>(parse_pipeline_layout(s.pipeline.layout).size());
    if (stages % p.pp != 0)
      throw LayoutError(fmt::format("--pipeline-layout has {} stages, which is not a multiple of --pp {}", stages, p.pp));
    if (p.vpp != 1 && p.vpp != stages / p.pp)
      throw LayoutError(fmt::format("--pipeline-layout gives {} virtual stages per pipeline rank but --vpp is {}",
                                    stages / p.pp, p.vpp));
    p.vpp = stages / p.pp;
  }
  if (p.vpp > 1 && p.pp == 1)
    throw LayoutError(fmt::format("--vpp {} needs pipeline parallelism (--pp > 1)", p.vpp));
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
  } else {
    s.num_micro_batches = 0;
  }

  auto& r = s.recompute;
  if (r.granularity == RecomputeGranularity::kFull)
    require_positive("--recompute-num-layers", r.num_layers, kMaxParallelSize);
  if (r.granularity == RecomputeGranularity::kSelective && r.modules == 0)
    throw LayoutError("--recompute-granularity selective needs at least one --recompute-modules entry");

  if (s.defer_embedding_wgrad && p.pp == 1)
    throw LayoutError("--defer-embedding-wgrad-compute needs --pp > 1 (model_parallel_config.py)");
  if (s.wgrad_deferral_limit < 0 || s.wgrad_deferral_limit > kMaxWorldSize)
    throw LayoutError(fmt::format("--wgrad-deferral-limit must be in [0, {}], got {}", kMaxWorldSize,
                                  s.wgrad_deferral_limit));
  if (const auto& g = s.pipeline.microbatch_group_size) {
    require_positive("--microbatch-group-size-per-virtual-pipeline-stage", *g, kMaxParallelSize);
    // schedules.py: the group may not be smaller than PP (nor larger than m, checked by the engine).
    if (*g < p.pp)
      throw LayoutError(fmt::format("--microbatch-group-size-per-virtual-pipeline-stage {} is smaller than --pp {}",
                                    *g, p.pp));
  }

  auto& o = s.optimizer;
  if (o.distributed && (p.dp * p.cp) % o.instances != 0)
    throw LayoutError(fmt::format("DP x CP = {} is not divisible by --num-distributed-optimizer-instances {}",
                                  p.dp * p.cp, o.instances));
  if (o.precision_aware && !o.distributed)
    throw LayoutError("--use-precision-aware-optimizer needs the distributed optimizer");
  if (!o.precision_aware && (o.exp_avg != DType::kFP32 || o.exp_avg_sq != DType::kFP32 || o.main_params != DType::kFP32))
    throw LayoutError("--exp-avg-dtype, --exp-avg-sq-dtype and --main-params-dtype need --use-precision-aware-optimizer");
  if (!offload.holds(o.cpu_offload_fraction))
    throw LayoutError(
        fmt::format("--optimizer-cpu-offload-fraction must be in {}, got {}", offload.text(),
                    o.cpu_offload_fraction));
  if (o.cpu_offload_fraction > 0 && !o.distributed)
    throw LayoutError("--optimizer-cpu-offload-fraction needs the distributed optimizer");
  if (!s.transformer_engine && s.precision == Precision::kFP8)
    throw LayoutError("FP8 training needs --transformer-impl transformer_engine");
  if (s.moe_routing_imbalance && !imbalance.holds(*s.moe_routing_imbalance))
    throw LayoutError(
        fmt::format("--moe-routing-imbalance must be in {}, got {}", imbalance.text(), *s.moe_routing_imbalance));
  const auto& f = s.fsdp;
  if (f.kind == FsdpKind::kMegatron) {
    if (!o.distributed) throw LayoutError("--use-megatron-fsdp runs with the distributed optimizer (arguments.py forces it)");
    if (o.cpu_offload_fraction > 0) throw LayoutError("optimizer CPU offload with Megatron-FSDP is not modelled");
    if (o.name != "adam") throw LayoutError(fmt::format("--optimizer {} with Megatron-FSDP is not modelled (adam)", o.name));
  }
  if (f.kind == FsdpKind::kTorchFsdp2) {
    // arguments.py validate_args: what Megatron-LM refuses with --use-torch-fsdp2.
    if (p.pp > 1) throw LayoutError("--use-torch-fsdp2 is not supported with pipeline parallelism (--pp > 1)");
    if (p.ep > 1) throw LayoutError("--use-torch-fsdp2 is not supported with expert parallelism (--ep > 1)");
    if (o.distributed) throw LayoutError("--use-torch-fsdp2 is not supported with the distributed optimizer");
    if (s.gradient_accumulation_fusion)
      throw LayoutError("--use-torch-fsdp2 is not supported with gradient accumulation fusion "
                        "(--no-gradient-accumulation-fusion)");
    if (s.precision == Precision::kFP16) throw LayoutError("--use-torch-fsdp2 does not support fp16");
    if (o.name != "adam") throw LayoutError(fmt::format("--optimizer {} with FSDP2 is not modelled (adam)", o.name));
  }
  if (f.kind == FsdpKind::kNone && (f.strategy != FsdpSharding::kOptimGradsParams || f.outer != FsdpSharding::kNoShard ||
                                    f.double_buffer || f.communication_unit_size != 0 || f.main_grads || f.grad_comm ||
                                    f.main_params != DType::kFP32 || !f.reshard_after_forward))
    throw LayoutError("the Megatron-FSDP / FSDP2 settings need --use-megatron-fsdp or --use-torch-fsdp2");
  if (f.communication_unit_size < 0 || f.communication_unit_size > kMaxWorldSize)
    throw LayoutError(fmt::format("--suggested-communication-unit-size must be in [1, {}], got {}", kMaxWorldSize,
                                  f.communication_unit_size));
  if (s.fp8_param_gather && !o.distributed && f.kind == FsdpKind::kNone)
    throw LayoutError("--fp8-param-gather needs the distributed optimizer");
  if (s.fp8_param_gather && s.precision != Precision::kFP8)
    throw LayoutError("--fp8-param-gather needs --precision fp8");
  if (!s.cublas_workspace_config.empty()) (void)parse_cublas_workspace_config(s.cublas_workspace_config);
  if (s.moe_capacity_factor && !capacity.holds(*s.moe_capacity_factor))
    throw LayoutError(
        fmt::format("--moe-capacity-factor must be in {}, got {}", capacity.text(), *s.moe_capacity_factor));
  if (s.moe_pad_to_capacity && !s.moe_capacity_factor)
    throw LayoutError("--moe-pad-expert-input-to-capacity needs --moe-capacity-factor");
  for (double d : {s.hidden_dropout.value_or(0.0), s.attention_dropout.value_or(0.0)})
    if (!dropout.holds(d)) throw LayoutError(fmt::format("dropout rates must be in {}, got {}", dropout.text(), d));
  return s;
}

void validate_setup(const ModelSpec& model, const TrainingSetup& s) {
  const auto& p = s.parallel;
  if (p.pp > model.num_layers)
    throw LayoutError(fmt::format("--pp {} is more pipeline stages than the model's {} layers", p.pp, model.num_layers));
  if (s.seq_length % p.cp != 0)
    throw LayoutError(fmt::format("--seq-length {} is not divisible by --cp {}", s.seq_length, p.cp));
  if (p.cp > 1 && s.seq_length % (2 * p.cp) != 0)
    throw LayoutError(fmt::format("--seq-length {} is not divisible by 2 x CP = {} (context parallelism splits the "
                                  "sequence into 2 x CP chunks for load balancing)",
                                  s.seq_length, 2 * p.cp));
  if (sequence_parallel_on(p) && (s.seq_length / p.cp) % p.tp != 0)
    throw LayoutError(fmt::format("with sequence parallelism the sequence per CP rank ({} / {} = {}) must be divisible "
                                  "by --tp {}",
                                  s.seq_length, p.cp, s.seq_length / p.cp, p.tp));
  bool any_moe = false;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& mlp = model.layers[i].mlp;
    if (mlp.num_experts <= 0) continue;
    any_moe = true;
    if (mlp.num_experts % p.ep != 0)
      throw LayoutError(fmt::format("layer {}: {} experts are not divisible by --ep {}; --ep must divide the {} "
                                    "experts: {}",
                                    i, mlp.num_experts, p.ep, mlp.num_experts, divisors_text(mlp.num_experts)));
  }
  if (!any_moe && p.ep > 1)
    throw LayoutError(fmt::format("--ep {} needs a mixture-of-experts model; {} has no experts", p.ep, model.name));
  if (any_moe && p.tp > 1 && p.sequence_parallel.has_value() && !*p.sequence_parallel)
    throw LayoutError("Megatron-LM requires sequence parallelism when MoE and tensor parallelism (--tp > 1) are "
                      "combined; drop --no-sequence-parallel");
  if (model.position_embedding == PositionEmbedding::kLearnedAbsolute && model.max_position_embeddings > 0 &&
      s.seq_length > model.max_position_embeddings)
    throw LayoutError(fmt::format("--seq-length {} exceeds the learned position table of {} positions "
                                  "(max_position_embeddings)",
                                  s.seq_length, model.max_position_embeddings));
  if (s.recompute.granularity == RecomputeGranularity::kSelective) {
    const bool mla = std::any_of(model.layers.begin(), model.layers.end(),
                                 [](const LayerSpec& l) { return l.attention.kind == "mla"; });
    if ((s.recompute.modules & kRecomputeMlaUpProj) && !mla)
      throw LayoutError("--recompute-modules mla_up_proj needs a model with multi-latent attention");
  }
}

// The names of every enum: one table each, in setup_schema.cpp.
const char* to_string(Precision p) { return enum_name(kPrecisionNames, static_cast<int>(p)); }
const char* to_string(DType d) { return enum_name(kDTypeNames, static_cast<int>(d)); }
const char* to_string(AttentionBackend b) { return enum_name(kAttentionBackendNames, static_cast<int>(b)); }
const char* to_string(TokenDispatcher d) { return enum_name(kTokenDispatcherNames, static_cast<int>(d)); }
const char* to_string(CpCommType c) { return enum_name(kCpCommTypeNames, static_cast<int>(c)); }
const char* to_string(FsdpSharding s) { return enum_name(kFsdpShardingNames, static_cast<int>(s)); }
const char* to_string(FsdpKind k) { return enum_name(kFsdpKindNames, static_cast<int>(k)); }
const char* to_string(RecomputeGranularity g) { return enum_name(kRecomputeGranularityNames, static_cast<int>(g)); }
const char* to_string(RecomputeMethod m) { return enum_name(kRecomputeMethodNames, static_cast<int>(m)); }

namespace {
// The enum value a knob's flag text names (parse_knob_text: UsageError naming `flag`).
template <class E>
E knob_enum(const char* knob, EnumTable table, const std::string& text, std::string_view flag) {
  const nlohmann::json v = parse_knob_text(*find_knob(knob), flag, text);
  return static_cast<E>(*enum_value(table, v.get<std::string>()));
}
}  // namespace

AttentionBackend parse_attention_backend(const std::string& text, std::string_view flag) {
  return knob_enum<AttentionBackend>("attention-backend", kAttentionBackendNames, text, flag);
}

namespace {
// CUDA GPUs before sm90, where TE's deterministic filter drops cuDNN fused attention
// (get_attention_backend: device_compute_capability < (9, 0)).
bool before_hopper(int compute_capability) { return compute_capability > 0 && compute_capability < 90; }
}  // namespace

namespace {
bool valid_env_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
}

bool env_switch(const std::string& name, const std::string& value) {
  // Transformer Engine reads these as int(os.getenv(NAME, "1")).
  if (value == "0") return false;
  if (value == "1") return true;
  throw UsageError(fmt::format("{}={}: expected 0 or 1", name, value));
}
}  // namespace

std::pair<std::string, std::string> split_env_assignment(const std::string& text, std::string_view flag) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || !valid_env_name(text.substr(0, eq)))
    throw UsageError(fmt::format("{} '{}': expected NAME=VALUE, e.g. NVTE_FLASH_ATTN=0", flag, text));
  return {text.substr(0, eq), text.substr(eq + 1)};
}

void apply_deterministic_mode(TrainingSetup& s) {
  s.attention_env.deterministic = true;
  if (s.cublas_workspace_config.empty()) s.cublas_workspace_config = ":4096:8";
}

bool parse_cross_entropy_fusion_impl(const std::string& text, std::string_view flag) {
  return knob_enum<int>("cross-entropy-fusion-impl", kCrossEntropyImplNames, text, flag) == 1;
}

FsdpSharding parse_fsdp_sharding(const std::string& text, std::string_view flag) {
  // Every strategy; --outer-dp-sharding-strategy takes no_shard and optim only (its knob).
  return knob_enum<FsdpSharding>("data-parallel-sharding-strategy", kFsdpShardingNames, text, flag);
}

std::optional<DType> parse_fsdp_dtype(const std::string& text, std::string_view flag, bool auto_allowed) {
  if (auto_allowed) {
    const nlohmann::json v = parse_knob_text(*find_knob("megatron-fsdp-main-grads-dtype"), flag, text);
    if (v.is_null()) return std::nullopt;
    return static_cast<DType>(*enum_value(kDTypeNames, v.get<std::string>()));
  }
  return knob_enum<DType>("megatron-fsdp-main-params-dtype", kDTypeNames, text, flag);
}

CpCommType parse_cp_comm_type(const std::string& text, std::string_view flag) {
  return knob_enum<CpCommType>("cp-comm-type", kCpCommTypeNames, text, flag);
}

bool is_modelled_environment(const std::string& name) {
  return name == "CUBLAS_WORKSPACE_CONFIG" || name == "NVTE_FLASH_ATTN" || name == "NVTE_FUSED_ATTN" ||
         name == "NVTE_ALLOW_NONDETERMINISTIC_ALGO";
}

bool apply_environment(TrainingSetup& s, const std::string& name, const std::string& value) {
  auto& env = s.attention_env;
  if (name == "CUBLAS_WORKSPACE_CONFIG") {
    if (!value.empty()) (void)parse_cublas_workspace_config(value);
    s.cublas_workspace_config = value;
  } else if (name == "NVTE_FLASH_ATTN") {
    env.flash_enabled = env_switch(name, value);
  } else if (name == "NVTE_FUSED_ATTN") {
    env.fused_enabled = env_switch(name, value);
  } else if (name == "NVTE_ALLOW_NONDETERMINISTIC_ALGO") {
    env.deterministic = !env_switch(name, value);
  } else {
    return false;
  }
  const std::string entry = name + "=" + value;
  auto& used = s.environment_used;
  used.erase(std::remove_if(used.begin(), used.end(),
                            [&](const std::string& e) { return e.compare(0, name.size() + 1, name + "=") == 0; }),
             used.end());
  used.push_back(entry);
  return true;
}

AttentionChoice resolve_attention(const TrainingSetup& s, int compute_capability) {
  AttentionChoice c;
  if (!s.transformer_engine) {
    // The local spec's core attention is megatron/core/transformer/dot_product_attention.py.
    c.backend = AttentionBackend::kUnfused;
    c.reason = "unfused attention (--transformer-impl local)";
    return c;
  }
  if (s.attention_backend != AttentionBackend::kAuto) {
    c.backend = s.attention_backend;
    c.reason = fmt::format("{} attention (--attention-backend {})", to_string(s.attention_backend),
                           to_string(s.attention_backend));
    return c;
  }
  // --attention-backend auto: TE's get_attention_backend (dot_product_attention/utils.py)
  // prefers cuDNN fused attention, then flash-attn, then unfused. Its determinism filter drops
  // the F16 arbitrary-seqlen fused kernel in training on GPUs before sm90.
  const auto& env = s.attention_env;
  const bool fused_ok = env.fused_enabled && !(env.deterministic && before_hopper(compute_capability));
  if (fused_ok) {
    c.backend = AttentionBackend::kFlash;
    c.reason = "flash/fused attention (--attention-backend auto)";
    return c;
  }
  const std::string why_not_fused =
      !env.fused_enabled ? "NVTE_FUSED_ATTN=0"
                         : fmt::format("deterministic training on sm{} disables cuDNN fused attention", compute_capability);
  if (!env.flash_enabled || env.flash_attn_installed == false) {
    c.backend = AttentionBackend::kUnfused;
    c.reason = fmt::format("unfused attention: {} and {}", why_not_fused,
                           !env.flash_enabled ? "NVTE_FLASH_ATTN=0" : "flash-attn is not installed");
    return c;
  }
  c.backend = AttentionBackend::kFlash;
  if (env.flash_attn_installed == true) {
    c.reason = fmt::format("flash attention ({}; flash-attn installed)", why_not_fused);
  } else {
    c.may_fall_back_to_unfused = true;
    c.reason = fmt::format("flash attention assumed ({}; without flash-attn >= 2.4.1 TE falls back to unfused "
                           "attention, which the upper bound covers)", why_not_fused);
  }
  return c;
}


namespace {
struct ModuleName {
  const char* name;
  RecomputeModule flag;
};
constexpr ModuleName kModuleNames[] = {
    {"core_attn", kRecomputeCoreAttn}, {"mlp", kRecomputeMlp},
    {"moe", kRecomputeMoe},            {"moe_act", kRecomputeMoeAct},
    {"layernorm", kRecomputeLayernorm}, {"mla_up_proj", kRecomputeMlaUpProj},
    {"shared_experts", kRecomputeSharedExperts},
};
}  // namespace

std::string recompute_modules_to_string(std::uint32_t modules) {
  std::string out;
  for (const auto& m : kModuleNames) {
    if (!(modules & m.flag)) continue;
    if (!out.empty()) out += ",";
    out += m.name;
  }
  return out;
}

std::uint32_t parse_recompute_modules(const std::string& text) {
  std::string cleaned;
  for (char c : text) cleaned.push_back((c == '[' || c == ']' || c == ',' || c == '\'' || c == '"') ? ' ' : c);
  std::stringstream ss(cleaned);
  std::string item;
  std::uint32_t out = 0;
  while (ss >> item) {
    bool found = false;
    for (const auto& m : kModuleNames) {
      if (item == m.name) {
        out |= m.flag;
        found = true;
      }
    }
    if (!found) {
      std::string known;
      for (const auto& m : kModuleNames) known += std::string(known.empty() ? "" : ", ") + m.name;
      throw UsageError(fmt::format("unknown recompute module '{}' (known: {})", item, known));
    }
  }
  return out;
}

std::int64_t parse_cublas_workspace_config(const std::string& text) {
  // aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize: ":4096:8" = 8 chunks of
  // 4096 KiB; several pairs add up.
  std::int64_t total = 0;
  std::stringstream ss(text);
  std::string item;
  std::vector<std::int64_t> nums;
  while (std::getline(ss, item, ':')) {
    if (item.empty()) continue;
    try {
      std::size_t pos = 0;
      const long long v = std::stoll(item, &pos);
      if (pos != item.size() || v <= 0 || v > (1 << 24)) throw std::invalid_argument("range");
      nums.push_back(v);
    } catch (const std::exception&) {
      throw UsageError(fmt::format("--cublas-workspace-config '{}': expected ':SIZE_KiB:COUNT' pairs", text));
    }
  }
  if (nums.empty() || nums.size() % 2 != 0)
    throw UsageError(fmt::format("--cublas-workspace-config '{}': expected ':SIZE_KiB:COUNT' pairs", text));
  // Each pair is at most 2^24 KiB x 2^24 = 2^58 bytes; a sum beyond 2^62 is no real setting.
  for (std::size_t i = 0; i < nums.size(); i += 2) {
    total += nums[i] * 1024 * nums[i + 1];
    if (total > (std::int64_t{1} << 62))
      throw UsageError(fmt::format("--cublas-workspace-config '{}': the workspaces add up to more than 2^62 bytes",
                                   text.size() > 60 ? text.substr(0, 57) + "..." : text));
  }
  return total;
}

DType parse_dtype(const std::string& text) {
  if (const auto d = enum_value(kDTypeNames, text)) return static_cast<DType>(*d);
  throw UsageError(fmt::format("unknown dtype '{}' (use fp32, bf16, fp16 or fp8)", text));
}

}  // namespace mme
