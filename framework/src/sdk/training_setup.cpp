#include "mme/sdk/training_setup.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "mme/sdk/checked.hpp"
#include "mme/sdk/enum_names.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/text.hpp"

namespace mme {

std::string to_string(const NumberRange& r) {
  return fmt::format("{}{}, {}{}", r.lo_open ? "(" : "[", r.lo, r.hi, r.hi_open ? ")" : "]");
}

const char* to_string(Precision p) { return enum_name(kPrecisionNames, static_cast<int>(p)); }
const char* to_string(DType d) { return enum_name(kDTypeNames, static_cast<int>(d)); }
const char* to_string(AttentionBackend b) { return enum_name(kAttentionBackendNames, static_cast<int>(b)); }
const char* to_string(TokenDispatcher d) { return enum_name(kTokenDispatcherNames, static_cast<int>(d)); }
const char* to_string(FlexBackend b) { return enum_name(kFlexBackendNames, static_cast<int>(b)); }
const char* to_string(CpCommType c) { return enum_name(kCpCommTypeNames, static_cast<int>(c)); }
const char* to_string(FsdpSharding s) { return enum_name(kFsdpShardingNames, static_cast<int>(s)); }
const char* to_string(FsdpKind k) { return enum_name(kFsdpKindNames, static_cast<int>(k)); }
const char* to_string(CudaGraphImpl i) { return enum_name(kCudaGraphImplNames, static_cast<int>(i)); }
const char* to_string(Fp8Recipe r) { return enum_name(kFp8RecipeNames, static_cast<int>(r)); }
const char* to_string(Fp8Format f) { return enum_name(kFp8FormatNames, static_cast<int>(f)); }
const char* to_string(RecomputeGranularity g) { return enum_name(kRecomputeGranularityNames, static_cast<int>(g)); }
const char* to_string(RecomputeMethod m) { return enum_name(kRecomputeMethodNames, static_cast<int>(m)); }

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

namespace {
// The variables the device total reads (framework/src/engine/device_memory.cpp): PyTorch's caching
// allocator (PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF, PYTORCH_NO_CUDA_MEMORY_CACHING) and
// NCCL's buffer size.
bool is_allocator_environment(const std::string& name) {
  return name == "PYTORCH_ALLOC_CONF" || name == "PYTORCH_CUDA_ALLOC_CONF" ||
         name == "PYTORCH_NO_CUDA_MEMORY_CACHING" || name == "NCCL_BUFFSIZE";
}
}  // namespace

bool is_modelled_environment(const std::string& name) {
  return name == "CUBLAS_WORKSPACE_CONFIG" || name == "NVTE_FLASH_ATTN" || name == "NVTE_FUSED_ATTN" ||
         name == "NVTE_ALLOW_NONDETERMINISTIC_ALGO" || name == "NVTE_CPU_OFFLOAD_V1" || is_allocator_environment(name);
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
  } else if (is_allocator_environment(name)) {
    // PyTorch's caching allocator (PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF,
    // PYTORCH_NO_CUDA_MEMORY_CACHING) and NCCL's buffer size: the engine's device total reads them
    // (framework/src/engine/device_memory.cpp), which checks their values.
  } else if (name == "NVTE_CPU_OFFLOAD_V1") {
    // cpu_offload.py: NVTE_CPU_OFFLOAD_V1 = os.environ.get("NVTE_CPU_OFFLOAD_V1", "0") == "1".
    s.activation_offload.te_offload_v1 = value == "1";
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

bool experts_refuse_bias_dropout_fusion(const ModelSpec& model, const TrainingSetup& setup) {
  if (!model.add_bias_linear || !setup.transformer_engine || !setup.moe_grouped_gemm) return false;
  return std::any_of(model.layers.begin(), model.layers.end(),
                     [](const LayerSpec& l) { return l.mlp.num_experts > 0; });
}

bool bias_dropout_fusion_on(const ModelSpec& model, const TrainingSetup& setup) {
  return setup.bias_dropout_fusion.value_or(!experts_refuse_bias_dropout_fusion(model, setup));
}

namespace {

// What a model's attention asks of Transformer Engine's backends (dot_product_attention/utils.py
// get_attention_backend).
struct AttentionNeeds {
  std::optional<SoftmaxType> softmax;  // a softmax other than vanilla, where some layer has one
  bool window = false;                 // some layer attends through a sliding window
};

AttentionNeeds attention_needs(const ModelSpec* m) {
  AttentionNeeds n;
  if (m == nullptr) return n;
  for (const auto& l : m->layers) {
    if (l.attention.softmax_type != SoftmaxType::kVanilla) n.softmax = l.attention.softmax_type;
    n.window = n.window || l.attention.window > 0;
  }
  return n;
}

const char* softmax_name(SoftmaxType t) { return t == SoftmaxType::kLearnable ? "learnable" : "off-by-one"; }

}  // namespace

AttentionChoice resolve_attention(const TrainingSetup& s, int compute_capability, const ModelSpec* model) {
  AttentionChoice c;
  if (!s.transformer_engine) {
    // The local spec's core attention is megatron/core/transformer/dot_product_attention.py.
    c.backend = AttentionBackend::kUnfused;
    c.reason = "unfused attention (--transformer-impl local)";
    return c;
  }
  const AttentionNeeds needs = attention_needs(model);
  // get_attention_backend: no cuDNN fused attention for sliding windows under the p2p exchange of
  // context parallelism ("does not support context parallelism with sliding window attention"),
  // nor for an off-by-one or learnable softmax under any CP exchange but a2a ("Disabling
  // FusedAttention for context parallelism with softmax_type"), and no FlashAttention for such a
  // softmax at all.
  const bool window_ring = needs.window && s.parallel.cp > 1 &&
                           (s.cp_comm_type == CpCommType::kP2P || s.cp_comm_type == CpCommType::kA2AP2P);
  const bool softmax_cp = needs.softmax && s.parallel.cp > 1 && s.cp_comm_type != CpCommType::kA2A;
  if (needs.softmax && s.attention_backend == AttentionBackend::kFlash)
    throw UsageError(fmt::format(
        "--attention-backend flash: Transformer Engine's FlashAttention has no {} softmax (dot_product_attention/"
        "utils.py get_attention_backend disables it), so the run would find no attention backend; use fused or auto",
        softmax_name(*needs.softmax)));
  if (s.attention_backend == AttentionBackend::kFused && (window_ring || softmax_cp))
    throw UsageError(fmt::format(
        "--attention-backend fused: Transformer Engine's cuDNN fused attention does not run {} under --cp {} with "
        "--cp-comm-type {} (dot_product_attention/utils.py get_attention_backend), so the run would find no "
        "attention backend{}",
        softmax_cp ? fmt::format("the {} softmax", softmax_name(*needs.softmax)) : std::string("sliding windows"),
        s.parallel.cp, to_string(s.cp_comm_type), softmax_cp ? "; use --cp-comm-type a2a" : "; use auto or flash"));
  if (s.attention_backend != AttentionBackend::kAuto) {
    c.backend = s.attention_backend;
    c.reason = fmt::format("{} attention (--attention-backend {})", to_string(s.attention_backend),
                           to_string(s.attention_backend));
    return c;
  }
  // --attention-backend auto: TE's get_attention_backend (dot_product_attention/utils.py). Of the
  // kernels its filters leave it selects flash-attn, then cuDNN fused attention, then unfused;
  // on sm90 and later cuDNN fused attention goes first ("to give FusedAttention preference on
  // Hopper+"). Its determinism filter drops the F16 arbitrary-seqlen fused kernel in training on
  // GPUs before sm90.
  const auto& env = s.attention_env;
  const bool fused_ok =
      env.fused_enabled && !(env.deterministic && before_hopper(compute_capability)) && !window_ring && !softmax_cp;
  const bool flash_ok = env.flash_enabled && env.flash_attn_installed != false && !needs.softmax;
  if (needs.softmax && !fused_ok) {
    c.backend = AttentionBackend::kUnfused;
    c.reason =
        fmt::format("unfused attention: the {} softmax rules out FlashAttention and {}", softmax_name(*needs.softmax),
                    softmax_cp    ? "context parallelism other than --cp-comm-type a2a rules out cuDNN fused attention"
                    : window_ring ? "sliding windows under the p2p CP exchange rule out cuDNN fused attention"
                    : !env.fused_enabled ? "NVTE_FUSED_ATTN=0 turns off cuDNN fused attention"
                                         : "deterministic training before sm90 rules out cuDNN fused attention");
    return c;
  }
  if (fused_ok && (!before_hopper(compute_capability) || !flash_ok)) {
    c.backend = AttentionBackend::kFused;
    c.reason = needs.softmax ? fmt::format(
                                   "cuDNN fused attention (--attention-backend auto; the {} softmax rules out "
                                   "FlashAttention)",
                                   softmax_name(*needs.softmax))
                             : "cuDNN fused attention (--attention-backend auto)";
    // From sm100 on, whether cuDNN serves deterministic training is decided below Python:
    // get_attention_backend hands `deterministic` to the C++ get_fused_attn_backend, whose answer
    // depends on the cuDNN version (the FP8 rule beside it gates sm100 determinism on cuDNN
    // 9.18), and its determinism table lists the F16 arbitrary-seqlen sub-backend as
    // deterministic only "on the workspace optimization path and sm90". Such a run may take
    // flash-attn instead (the functional tests' GB200 runs did), which the upper bound covers.
    c.may_use_flash_attn = env.deterministic && compute_capability >= 100 && flash_ok;
    return c;
  }
  if (fused_ok) {
    c.backend = AttentionBackend::kFlash;
    c.reason = env.flash_attn_installed == true
                   ? "flash attention (--attention-backend auto: before sm90 TE prefers flash-attn to cuDNN fused "
                     "attention)"
                   : "flash attention assumed (--attention-backend auto: before sm90 TE prefers flash-attn, "
                     "where installed, to cuDNN fused attention)";
    return c;
  }
  const std::string why_not_fused =
      window_ring ? "sliding windows under the p2p CP exchange rule out cuDNN fused attention"
      : !env.fused_enabled
          ? "NVTE_FUSED_ATTN=0"
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
    c.reason = fmt::format(
        "flash attention assumed ({}; without flash-attn >= 2.4.1 TE falls back to unfused "
        "attention, which the upper bound covers)",
        why_not_fused);
  }
  return c;
}

namespace {
struct ModuleName {
  const char* name;
  RecomputeModule flag;
};
constexpr ModuleName kModuleNames[] = {
    {"core_attn", kRecomputeCoreAttn},
    {"mlp", kRecomputeMlp},
    {"moe", kRecomputeMoe},
    {"moe_act", kRecomputeMoeAct},
    {"layernorm", kRecomputeLayernorm},
    {"mla_up_proj", kRecomputeMlaUpProj},
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

namespace {
// The names of a list as Megatron-LM flags and spec files write it: "a,b", "a b", "['a', \"b\"]".
std::vector<std::string> list_items(const std::string& text) {
  std::string cleaned;
  for (char c : text) cleaned.push_back((c == '[' || c == ']' || c == ',' || c == '\'' || c == '"') ? ' ' : c);
  std::stringstream ss(cleaned);
  std::vector<std::string> out;
  for (std::string item; ss >> item;) out.push_back(item);
  return out;
}
}  // namespace

std::uint32_t parse_recompute_modules(const std::string& text) {
  std::uint32_t out = 0;
  for (const std::string& item : list_items(text)) {
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

namespace {
struct OffloadModuleName {
  const char* name;
  OffloadModule flag;
};
// transformer_config.py's allowed offload_modules, in OffloadModule order.
constexpr OffloadModuleName kOffloadModuleNames[] = {
    {"attn_norm", kOffloadAttnNorm}, {"qkv_linear", kOffloadQkvLinear},
    {"core_attn", kOffloadCoreAttn}, {"attn_proj", kOffloadAttnProj},
    {"mlp_norm", kOffloadMlpNorm},   {"expert_fc1", kOffloadExpertFc1},
    {"moe_act", kOffloadMoeAct},     {"fused_group_mlp", kOffloadFusedGroupMlp},
    {"gdp_qkv", kOffloadGdpQkv},
};
}  // namespace

std::string offload_modules_to_string(std::uint32_t modules) {
  std::string out;
  for (const auto& m : kOffloadModuleNames) {
    if (!(modules & m.flag)) continue;
    if (!out.empty()) out += ",";
    out += m.name;
  }
  return out;
}

std::uint32_t parse_offload_modules(const std::string& text) {
  std::string invalid;
  std::uint32_t out = 0;
  for (const std::string& item : list_items(text)) {
    const auto it = std::find_if(std::begin(kOffloadModuleNames), std::end(kOffloadModuleNames),
                                 [&](const OffloadModuleName& m) { return item == m.name; });
    if (it != std::end(kOffloadModuleNames))
      out |= it->flag;
    else
      invalid += fmt::format("{}'{}'", invalid.empty() ? "" : ", ", item);
  }
  if (!invalid.empty()) {
    std::string allowed;
    for (const auto& m : kOffloadModuleNames) allowed += fmt::format("{}'{}'", allowed.empty() ? "" : ", ", m.name);
    // transformer_config.py __post_init__: "Invalid choices for offload_modules: {...}. Allowed
    // modules are: {...}".
    throw UsageError(
        fmt::format("Invalid choices for offload_modules: {{{}}}. Allowed modules are: {{{}}}", invalid, allowed));
  }
  return out;
}

namespace {
struct CudaGraphModuleName {
  const char* name;
  CudaGraphModule flag;
};
// enums.py CudaGraphModule, in CudaGraphModule order (mamba: hybrid models, not modelled here).
constexpr CudaGraphModuleName kCudaGraphModuleNames[] = {
    {"attn", kGraphAttn},
    {"mlp", kGraphMlp},
    {"moe", kGraphMoe},
    {"moe_router", kGraphMoeRouter},
    {"moe_preprocess", kGraphMoePreprocess},
};
}  // namespace

std::string cuda_graph_modules_to_string(std::uint32_t modules) {
  std::string out;
  for (const auto& m : kCudaGraphModuleNames) {
    if (!(modules & m.flag)) continue;
    if (!out.empty()) out += ",";
    out += m.name;
  }
  return out;
}

std::uint32_t parse_cuda_graph_modules(const std::string& text) {
  const std::vector<std::string> items = list_items(text);
  std::uint32_t out = 0;
  bool full = false;
  for (const std::string& item : items) {
    if (item == "full") {
      full = true;
      continue;
    }
    if (item == "mamba")
      throw UsageError("--cuda-graph-modules mamba: hybrid Mamba models are not modelled (decoder-only GPT/MoE only)");
    if (item == "full_iteration" || item == "full_iteration_inference")
      throw UsageError(fmt::format(
          "--cuda-graph-modules {}: whole-iteration CUDA graphs (--cuda-graph-impl full_iteration) are not modelled",
          item));
    const auto it = std::find_if(std::begin(kCudaGraphModuleNames), std::end(kCudaGraphModuleNames),
                                 [&](const CudaGraphModuleName& m) { return item == m.name; });
    if (it == std::end(kCudaGraphModuleNames))
      throw UsageError(
          fmt::format("--cuda-graph-modules: unknown scope '{}' (attn, mlp, moe, moe_router, "
                      "moe_preprocess, or full for the whole layer)",
                      item));
    out |= it->flag;
  }
  // cuda_graph_config.py normalize_cuda_graph_modules.
  if (full && items.size() > 1) throw UsageError("--cuda-graph-modules: full scope cannot be used with other scopes.");
  return out;
}

namespace {
struct LoraTargetName {
  const char* name;
  std::uint32_t flag;
};
// Megatron-Bridge's LoRA.target_modules names (peft/lora.py), in LoraTarget order.
constexpr LoraTargetName kLoraTargetNames[] = {{"linear_qkv", kLoraLinearQkv},
                                               {"linear_proj", kLoraLinearProj},
                                               {"linear_fc1", kLoraLinearFc1},
                                               {"linear_fc2", kLoraLinearFc2}};
}  // namespace

std::string lora_targets_to_string(std::uint32_t targets) {
  std::string out;
  for (const auto& t : kLoraTargetNames) {
    if (!(targets & t.flag)) continue;
    if (!out.empty()) out += ",";
    out += t.name;
  }
  return out;
}

std::uint32_t parse_lora_targets(const std::string& text) {
  std::uint32_t out = 0;
  std::string allowed;
  for (const auto& t : kLoraTargetNames) allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", t.name);
  for (const std::string& item : list_items(text)) {
    const auto it = std::find_if(std::begin(kLoraTargetNames), std::end(kLoraTargetNames),
                                 [&](const LoraTargetName& t) { return item == t.name; });
    if (it == std::end(kLoraTargetNames))
      throw UsageError(
          fmt::format("LoRA target module '{}' is not one mme models ({}; Megatron-Bridge's "
                      "other names, e.g. MLA's linear_q_proj or '*' patterns, are not modelled)",
                      item, allowed));
    out |= it->flag;
  }
  if (out == 0) throw UsageError(fmt::format("LoRA needs at least one target module ({})", allowed));
  return out;
}

std::int64_t parse_cublas_workspace_config(const std::string& text) {
  // aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize: ":4096:8" = 8 chunks of
  // 4096 KiB; several pairs add up.
  std::int64_t total = 0;
  std::vector<std::int64_t> nums;
  for (const std::string& item : split(text, ':', EmptyItems::kSkip)) {
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
