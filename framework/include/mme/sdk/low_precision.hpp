// Low-precision GEMM operands as Transformer Engine stores them: the recipe of a setup and the
// bytes of a quantized GEMM input a block keeps for its backward pass (data plus scale_inv, with
// the padding of TE's scale shapes). Layer-memory models call saved_gemm_input_bytes() where a
// TE module saves its input; the engine sizes the weight copies (engine/low_precision.cpp).
#pragma once

#include <cstdint>

#include "mme/sdk/checked.hpp"
#include "mme/sdk/layer_model.hpp"

namespace mme {

// The quantization a setup's GEMMs run in (Megatron-LM fp8_utils.py get_fp8_recipe,
// fp4_utils.py get_fp4_recipe).
enum class GemmRecipe { kNone, kDelayed, kTensorwise, kBlockwise, kMxfp8, kNvfp4 };

inline GemmRecipe gemm_recipe(const TrainingSetup& s) {
  if (s.low_precision.fp4) return GemmRecipe::kNvfp4;
  if (s.precision != Precision::kFP8) return GemmRecipe::kNone;
  switch (s.low_precision.fp8_recipe) {
    case Fp8Recipe::kDelayed: return GemmRecipe::kDelayed;
    case Fp8Recipe::kTensorwise: return GemmRecipe::kTensorwise;
    case Fp8Recipe::kBlockwise: return GemmRecipe::kBlockwise;
    case Fp8Recipe::kMxfp8: return GemmRecipe::kMxfp8;
  }
  return GemmRecipe::kDelayed;
}

// How the TE module keeps its quantized input for backward ("Prepare backward state" of
// module/linear.py, layernorm_linear.py, grouped_linear.py).
enum class SavedGemmInput : std::uint8_t {
  // Linear / GroupedLinear (and LayerNormLinear without a sequence-parallel gather): one copy,
  // the column-wise one (Float8: the row-wise data of the shard it gathers in backward under SP).
  kOneCopy,
  // LayerNormLinear whose normed output is all-gathered under SP (ln_out_needs_gather): only
  // MXFP8 and blockwise tensors drop their row-wise data, so NVFP4 keeps both copies.
  kLayerNormLinearGathered,
};

namespace low_precision_detail {
inline CheckedInt round_up(CheckedInt v, std::int64_t m) { return (v + (m - 1)) / m * m; }
inline CheckedInt ceil_div(CheckedInt v, std::int64_t m) { return (v + (m - 1)) / m; }
}  // namespace low_precision_detail

// Bytes of a GEMM input of `rows` tokens by `cols` (the GEMM's K) that the block keeps for the
// backward pass: act_bytes per element outside quantized GEMMs (and in the layers
// --first-last-layers-bf16 keeps in bf16: the engine gives them linear_input_bytes ==
// act_bytes); else the recipe's data and scale_inv tensors.
inline CheckedInt saved_gemm_input_bytes(const BlockContext& ctx, CheckedInt rows, CheckedInt cols,
                                         SavedGemmInput how = SavedGemmInput::kOneCopy) {
  using low_precision_detail::ceil_div;
  using low_precision_detail::round_up;
  const CheckedInt elements = rows * cols;
  if (ctx.linear_input_bytes == ctx.act_bytes) return CheckedInt(ctx.act_bytes) * elements;
  switch (gemm_recipe(ctx.setup)) {
    case GemmRecipe::kNone: return CheckedInt(ctx.linear_input_bytes) * elements;
    case GemmRecipe::kDelayed:
    case GemmRecipe::kTensorwise:
      // tensor/float8_tensor.py Float8Quantizer / Float8CurrentScalingQuantizer: 1-byte data
      // (or its transpose on Hopper) and a one-element fp32 scale_inv.
      return elements + 4;
    case GemmRecipe::kBlockwise:
      // tensor/float8_blockwise_tensor.py Float8BlockQuantizer.get_scale_shape, 1x128 blocks,
      // column-wise: fp32 scale_inv [ceil(rows / 128), round_up(cols, 4)] beside the 1-byte data.
      return elements + 4 * ceil_div(rows, 128) * round_up(cols, 4);
    case GemmRecipe::kMxfp8:
      // tensor/mxfp8_tensor.py MXFP8Quantizer.get_scale_shape, 1x32 blocks, column-wise: E8M0
      // (1 byte) scale_inv [round_up(rows // 32, 4), round_up(cols, 128)] beside the 1-byte data.
      return elements + round_up(rows / 32, 4) * round_up(cols, 128);
    case GemmRecipe::kNvfp4: {
      // tensor/nvfp4_tensor.py NVFP4Quantizer: 4-bit data, E4M3 scales of 16-element blocks
      // (get_scale_shape; column-wise [round_up(cols, 128), round_up(ceil(rows / 16), 4)],
      // row-wise [round_up(rows, 128), round_up(ceil(cols / 16), 4)]) and an fp32 amax each.
      CheckedInt bytes = ceil_div(elements, 2) + round_up(cols, 128) * round_up(ceil_div(rows, 16), 4) + 4;
      if (how == SavedGemmInput::kLayerNormLinearGathered)
        bytes += ceil_div(elements, 2) + round_up(rows, 128) * round_up(ceil_div(cols, 16), 4) + 4;
      return bytes;
    }
  }
  return CheckedInt(ctx.linear_input_bytes) * elements;
}

}  // namespace mme
