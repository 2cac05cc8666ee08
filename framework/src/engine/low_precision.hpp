// Low-precision recipes beyond the saved GEMM inputs (those are the layer plugins', through
// sdk/low_precision.hpp): the quantized copies of the GEMM weights Transformer Engine keeps, the
// recipe's scaling state, the decoder layers --first-last-layers-bf16 keeps out of FP8/FP4, the
// refusals of Megatron-LM and the report's assumptions (docs/memory-model.md, "Low-precision
// recipes").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mme/sdk/checked.hpp"
#include "mme/sdk/layer_model.hpp"
#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

// Megatron-LM's refusals of the recipe settings (arguments.py, transformer_config.py
// __post_init__), with their messages: LayoutError. validate_setup runs it.
void check_low_precision_setup(const ModelSpec& m, const TrainingSetup& s);

// The quantized weight copies of `gemm_params` GEMM weight elements of a stage, per rank.
struct QuantizedWeightCopies {
  // module/base.py get_weight_workspace (_fp8_workspaces): the copies TE caches across the
  // micro-batches of a step for bf16 primary weights.
  CheckedInt workspace = 0;
  // Primary quantized weights (--fp8-param-gather / --fp4-param-gather): the row-wise data lives
  // in the parameter buffer; this is the column-wise copy and the scale_inv kept beside it.
  CheckedInt columnwise = 0;
};
// `compute_capability`: the GPU's (0: unknown, taken as Hopper: FP8 weights keep a transpose).
// `sharded`: Megatron-FSDP / FSDP2, which drop the FP8 transpose cache between uses.
QuantizedWeightCopies quantized_weight_copies(const TrainingSetup& s, CheckedInt gemm_params, int compute_capability,
                                              bool sharded);

// Bytes of the primary weights' parameter buffer per GEMM weight element, times 2 (NVFP4 packs
// two elements in a byte): 2 for --fp8-param-gather (uint8), 1 for --fp4-param-gather.
std::int64_t quantized_param_half_bytes(const TrainingSetup& s);

// Transformer Engine GEMM modules of a decoder layer (TE Linear / LayerNormLinear count one;
// a GroupedLinear counts one per local expert GEMM): what the recipe's scaling state is kept for.
CheckedInt te_gemm_count(const BlockParams& params, std::int64_t local_experts);
// The recipe's scaling state (module/base.py init_fp8_meta_tensors) of `gemms` GEMMs, per rank.
CheckedInt scaling_state_bytes(const TrainingSetup& s, CheckedInt gemms);

// Decoder layers of [first, first + n) (global indices) that --first-last-layers-bf16 keeps in
// bf16 (fp8_utils.py is_first_last_bf16_layer): their start and count in each of the two ranges.
struct Bf16LayerRanges {
  std::int64_t start_first = 0, start_count = 0;  // within [0, layers_at_start)
  std::int64_t end_first = 0, end_count = 0;      // within [num_layers - layers_at_end, num_layers)
};
Bf16LayerRanges bf16_layers_in(const TrainingSetup& s, std::int64_t num_layers, std::int64_t first, std::int64_t n);
// True when some decoder layers run in bf16 under a quantized recipe.
bool has_bf16_layers(const TrainingSetup& s);

// The report's lines on the recipe (what the GPU decides at run time, the layers in bf16).
void add_low_precision_assumptions(const TrainingSetup& s, int compute_capability, std::vector<std::string>& a);

}  // namespace mme
