// Low-precision recipes (low_precision.hpp): the weight copies Transformer Engine keeps per
// recipe, the delayed-scaling state, the bf16 first/last layers and Megatron-LM's refusals.
// Each term names, in one comment line, the TE or Megatron-LM code it models.
#include "low_precision.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/low_precision.hpp"

namespace mme {

namespace {

// utils.py is_non_tn_fp8_gemm_supported: sm100 to sm11x and sm130+ run FP8 GEMMs in any layout,
// so a Float8 tensor needs no transpose there. Unknown (0) is taken as Hopper.
bool float8_needs_transpose(int cc) { return !((cc >= 100 && cc < 120) || cc >= 130); }

// quantization.py _compute_mxfp8_support / _compute_nvfp4_support / _compute_fp8_block_scaling_support.
const char* recipe_gpu_requirement(GemmRecipe r, int cc) {
  switch (r) {
    case GemmRecipe::kMxfp8:
      if (cc > 0 && (cc < 100 || cc >= 120)) return "MXFP8 needs compute capability 10.x (Blackwell)";
      return nullptr;
    case GemmRecipe::kNvfp4:
      if (cc > 0 && cc < 100) return "NVFP4 needs compute capability 10.0 or higher (Blackwell)";
      return nullptr;
    case GemmRecipe::kBlockwise:
      if (cc > 0 && cc < 90) return "FP8 block scaling needs compute capability 9.0 or higher and CUDA 12.9+";
      return nullptr;
    default: return nullptr;
  }
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

void check_low_precision_setup(const ModelSpec& m, const TrainingSetup& s) {
  const LowPrecisionSettings& lp = s.low_precision;
  // arguments.py: FP4 and FP8 are mutually exclusive; FP4 param requires FP4 mode.
  if (lp.fp4 && s.precision == Precision::kFP8)
    throw LayoutError("--fp4-format and --fp8-format cannot be used simultaneously. Please choose one.");
  if (lp.fp4_param_gather && !lp.fp4) throw LayoutError("--fp4-param-gather must be used together with --fp4-format.");
  if (lp.fp4 && !s.transformer_engine) throw LayoutError("FP4 training needs --transformer-impl transformer_engine");
  if (lp.amax_history_len < 1) throw LayoutError("--fp8-amax-history-len must be at least 1");
  if (s.precision != Precision::kFP8) return;
  const bool delayed = lp.fp8_recipe == Fp8Recipe::kDelayed;
  // transformer_config.py __post_init__ (fp8): the bf16 first/last layers.
  if (lp.first_last_layers_bf16) {
    if (delayed) throw LayoutError("Delayed scaling does not support first / last layer in BF16.");
    const std::int64_t max_layers = m.num_layers / std::max<std::int64_t>(s.parallel.pp, 1);
    const std::pair<const char*, std::int64_t> counts[] = {{"num_layers_at_start_in_bf16", lp.layers_at_start_in_bf16},
                                                           {"num_layers_at_end_in_bf16", lp.layers_at_end_in_bf16}};
    for (const auto& [name, n] : counts)
      if (n < 0 || n > max_layers)
        throw LayoutError(fmt::format("{} ({}) must be between 0 and number of layers per pipeline stage ({}).", name,
                                      n, max_layers));
  }
  // transformer_config.py: output-discarding recompute of moe_act / layernorm under FP8.
  if (delayed && (s.recompute.has(kRecomputeMoeAct) || s.recompute.has(kRecomputeLayernorm)))
    throw LayoutError("Delayed scaling does not support moe_act and layernorm recompute for fp8.");
  // arguments.py: optimizer CPU offload with FP8 primary weights.
  if (s.optimizer.cpu_offload_fraction > 0 && s.fp8_param_gather && !delayed)
    throw LayoutError(
        "When `--fp8-param-gather` is enabled, the optimizer cpu offload must be used in conjunction with "
        "`--fp8-recipe delayed`.");
}

QuantizedWeightCopies quantized_weight_copies(const TrainingSetup& s, CheckedInt p, int cc, bool sharded) {
  QuantizedWeightCopies w;
  const GemmRecipe r = gemm_recipe(s);
  if (r == GemmRecipe::kNone || p == 0) return w;
  // Per weight element: one 1-byte (NVFP4: half-byte) copy per usage, row-wise for the forward
  // and column-wise for dgrad, each with its scale_inv.
  CheckedInt rowwise = 0, columnwise = 0, scales = 0;
  switch (r) {
    case GemmRecipe::kDelayed:
    case GemmRecipe::kTensorwise:
      // float8_tensor_storage.py update_usage: the transpose exists only where FP8 GEMMs need
      // the TN layout; its scale_inv is one element per tensor.
      rowwise = p;
      columnwise = float8_needs_transpose(cc) ? p : CheckedInt(0);
      break;
    case GemmRecipe::kBlockwise:
      // float8_blockwise_tensor.py get_scale_shape, 128x128 weight blocks: fp32 per 16384
      // elements in each of the row-wise and the (transposed) column-wise copy.
      rowwise = p, columnwise = p, scales = 2 * 4 * low_precision_detail::ceil_div(p, 128 * 128);
      break;
    case GemmRecipe::kMxfp8:
      // mxfp8_tensor.py get_scale_shape: one E8M0 byte per 32 elements in each copy.
      rowwise = p, columnwise = p, scales = 2 * low_precision_detail::ceil_div(p, 32);
      break;
    case GemmRecipe::kNvfp4:
      // nvfp4_tensor.py: half a byte per element in each copy, one E4M3 byte per 16 elements each.
      rowwise = low_precision_detail::ceil_div(p, 2), columnwise = rowwise;
      scales = 2 * low_precision_detail::ceil_div(p, 16);
      break;
    case GemmRecipe::kNone: break;
  }
  if (quantized_param_gather(s)) {
    // fp8_utils.py post_all_gather_processing: the primary weights get their transpose /
    // column-wise storage after each all-gather; Megatron-FSDP and FSDP2 drop it between uses.
    if (!sharded) w.columnwise = columnwise + scales;
  } else {
    w.workspace = rowwise + columnwise + scales;
  }
  return w;
}

std::int64_t quantized_param_half_bytes(const TrainingSetup& s) {
  // param_and_grad_buffer.py: uint8 storage of FP8 params; NVFP4 params packed two per byte.
  return s.low_precision.fp4 ? 1 : 2;
}

CheckedInt te_gemm_count(const BlockParams& params, std::int64_t local_experts) {
  CheckedInt n = 0;
  for (const auto& t : params.terms) {
    switch (t.group) {
      case ParamGroup::kAttention:
      case ParamGroup::kDenseMlp:
      case ParamGroup::kMtp:
        if (!ends_with(t.name, "_bias")) n += 1;
        break;
      // mamba_mixer.py: in_proj (TELayerNormColumnParallelLinear) and out_proj (TERowParallelLinear).
      case ParamGroup::kMamba:
        if (t.name == "in_proj" || t.name == "out_proj") n += 1;
        break;
      // experts.py TEGroupedMLP: fc1 and fc2 GroupedLinear, one GEMM per local expert each.
      case ParamGroup::kRoutedExperts: n += 2 * CheckedInt(local_experts); break;
      // shared_experts.py: linear_fc1 and linear_fc2 (the gate is a plain parameter).
      case ParamGroup::kSharedExperts:
        if (t.name == "shared_experts") n += 2;
        break;
      default: break;
    }
  }
  return n;
}

CheckedInt scaling_state_bytes(const TrainingSetup& s, CheckedInt gemms) {
  // module/base.py init_fp8_meta_tensors, quantization.py DelayedScalingRecipeState: per GEMM 3
  // forward quantizers (input, weight, output) and 2 backward ones (grad output, grad input),
  // each an fp32 scale and an fp32 amax history of --fp8-amax-history-len entries. The other
  // recipes compute their scales from the tensor itself and keep no state between steps.
  if (gemm_recipe(s) != GemmRecipe::kDelayed) return 0;
  return gemms * 5 * 4 * (CheckedInt(s.low_precision.amax_history_len) + 1);
}

Bf16LayerRanges bf16_layers_in(const TrainingSetup& s, std::int64_t num_layers, std::int64_t first, std::int64_t n) {
  Bf16LayerRanges r;
  if (!has_bf16_layers(s) || n <= 0) return r;
  const std::int64_t last = first + n;
  const std::int64_t start_end = std::min(s.low_precision.layers_at_start_in_bf16, num_layers);
  const std::int64_t end_begin = std::max(num_layers - s.low_precision.layers_at_end_in_bf16, start_end);
  r.start_first = first;
  r.start_count = std::max<std::int64_t>(std::min(last, start_end) - first, 0);
  r.end_first = std::max(first, end_begin);
  r.end_count = std::max<std::int64_t>(last - r.end_first, 0);
  return r;
}

bool has_bf16_layers(const TrainingSetup& s) { return quantized_gemms(s) && s.low_precision.first_last_layers_bf16; }

void add_low_precision_assumptions(const TrainingSetup& s, int cc, std::vector<std::string>& a) {
  const GemmRecipe r = gemm_recipe(s);
  const LowPrecisionSettings& lp = s.low_precision;
  if (r == GemmRecipe::kNone) {
    if (lp.fp8_recipe != Fp8Recipe::kDelayed)
      a.push_back(
          fmt::format("--fp8-recipe {} has no effect without --fp8-format (bf16 GEMMs)", to_string(lp.fp8_recipe)));
    return;
  }
  const char* name = r == GemmRecipe::kNvfp4 ? "nvfp4" : to_string(lp.fp8_recipe);
  std::string line = fmt::format(
      "{} recipe: saved GEMM inputs and weight copies sized from Transformer Engine's "
      "quantized tensors (data and scale_inv)",
      name);
  if (r == GemmRecipe::kDelayed || r == GemmRecipe::kTensorwise)
    line += float8_needs_transpose(cc) ? "; FP8 weights keep a transpose (Hopper layout)"
                                       : "; no FP8 transposes (Blackwell GEMM layouts)";
  a.push_back(line);
  if (const char* req = recipe_gpu_requirement(r, cc))
    a.push_back(
        fmt::format("{}: Transformer Engine refuses the recipe when training starts on a GPU of compute "
                    "capability {}.{} (the one estimated for)",
                    req, cc / 10, cc % 10));
  if (has_bf16_layers(s))
    a.push_back(fmt::format("first {} and last {} decoder layers in bf16 (no quantized inputs or weight copies)",
                            lp.layers_at_start_in_bf16, lp.layers_at_end_in_bf16));
}

}  // namespace mme
