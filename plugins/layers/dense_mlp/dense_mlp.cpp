#include "dense_mlp.hpp"

#include <fmt/core.h>

#include <mme/sdk/block_helpers.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/limits.hpp>
#include <mme/sdk/low_precision.hpp>

namespace mme::plugins {

void DenseMlpModel::validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const {
  require_layer_field(model, index, "ffn_hidden_size", layer.mlp.ffn_hidden_size, limits::kMaxDimension);
}

void DenseMlpModel::validate(const BlockContext& ctx) const {
  const std::int64_t f = ctx.layer.mlp.ffn_hidden_size;
  if (f % ctx.tp != 0) throw LayoutError(fmt::format("ffn_hidden_size {} is not divisible by --tp {}", f, ctx.tp));
  if (mlp_refuses_fused_activation(ctx))
    throw LayoutError(
        "a dense quick-GEGLU MLP with the bias-activation fusion: Megatron-LM's MLP.forward fuses only gelu and SwiGLU "
        "and raises (mlp.py, \"Only support fusion of gelu and swiglu\"); give --no-bias-gelu-fusion");
}

void DenseMlpModel::parameters(const BlockContext& ctx, BlockParams& out) const {
  const auto& m = ctx.model;
  const CheckedInt h = m.hidden_size, f = ctx.layer.mlp.ffn_hidden_size, t = ctx.tp;
  const CheckedInt fc1_width = CheckedInt(m.gated_linear_unit ? 2 : 1) * f;
  // Pre-MLP norm, fused into TELayerNormColumnParallelLinear (replicated).
  add_param(out, "pre_mlp_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
  // linear_fc1: column-parallel [h -> 2f] gated (gate and up fused), [h -> f] otherwise.
  add_param(out, "linear_fc1", ParamGroup::kDenseMlp, ShardClass::kTensorParallel, h * fc1_width, t);
  if (m.add_bias_linear)
    add_param(out, "linear_fc1_bias", ParamGroup::kDenseMlp, ShardClass::kTensorParallel, fc1_width, t);
  // linear_fc2: row-parallel [f -> h]; its bias is not split.
  add_param(out, "linear_fc2", ParamGroup::kDenseMlp, ShardClass::kTensorParallel, f * h, t);
  // The TE linears' weights per rank: linear_fc1 [fc1 / t, h], linear_fc2 [h, f / t].
  add_gemm_weight(out, ParamGroup::kDenseMlp, fc1_width / t, h);
  add_gemm_weight(out, ParamGroup::kDenseMlp, h, f / t);
  if (m.add_bias_linear) add_param(out, "linear_fc2_bias", ParamGroup::kDenseMlp, ShardClass::kReplicated, h, 1);
  if (ctx.layer.post_mlp_norm)
    add_param(out, "post_mlp_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
  // LoRA adapters beside linear_fc1 (column parallel) and linear_fc2 (row parallel).
  add_lora_params(ctx, out, kLoraLinearFc1, LoraScope::kLayer, h, fc1_width);
  add_lora_params(ctx, out, kLoraLinearFc2, LoraScope::kLayer, f, h);
}

void DenseMlpModel::activations(const BlockContext& ctx, BlockActivations& out) const {
  const auto& m = ctx.model;
  const CheckedInt h = m.hidden_size, f = ctx.layer.mlp.ffn_hidden_size, t = ctx.tp;
  const CheckedInt T = ctx.tokens, Tl = ctx.local_tokens, ab = ctx.act_bytes, li = ctx.linear_input_bytes;
  const CheckedInt fc1_width = CheckedInt(m.gated_linear_unit ? 2 : 1) * f;
  const bool unfused_glu = m.gated_linear_unit && !gated_activation_fused(ctx, false);

  // No fine-grained offload group covers a dense MLP: the TE spec fuses its norm into
  // linear_fc1 (pre_mlp_layernorm is IdentityOp, so mlp_norm has nothing to offload) and
  // there is no dense fc1 group. TE's layer offload (--cpu-offloading) takes its tensors too.
  // The fused pre-MLP norm keeps its input; with `mlp` recompute (transformer_layer.py
  // checkpointing self.mlp) that input is all the MLP keeps.
  add_act(out, "mlp/norm_input", ab * Tl * h, 0, Tl * h);
  if (!ctx.setup.recompute.has(kRecomputeMlp)) {
    // linear_fc1 keeps its (sequence-local) input, the normed hidden states; under LoRA the
    // frozen fc1 only when its adapter wraps it (return_layernorm_output), and the adapter takes
    // that tensor (without SP) or the all-gathered [T, h] (with SP).
    const bool frozen = lora_frozen(ctx);
    if (!frozen || lora_wraps(ctx, kLoraLinearFc1))
      add_act(
          out, "mlp/fc1_input",
          saved_gemm_input_bytes(
              ctx, Tl, h, ctx.sequence_parallel ? SavedGemmInput::kLayerNormLinearGathered : SavedGemmInput::kOneCopy),
          0, Tl * h);
    add_lora_acts(ctx, out, kLoraLinearFc1, LoraScope::kLayer, T, h, !ctx.sequence_parallel && li == ab, T,
                  fc1_width / t);
    // The activation (bias_swiglu / bias_gelu) keeps its input, fc1's output [s, b, fc1/TP].
    add_act(out, "mlp/fc1_output", ab * T * fc1_width / t, 0, T * fc1_width / t);
    // linear_fc2 keeps its input, the activation output [s, b, f/TP]; the frozen fc2 keeps none,
    // its adapter its own (16-bit) reference to it.
    if (!frozen) add_act(out, "mlp/activation_output", saved_gemm_input_bytes(ctx, T, f / t), 0, T * f / t);
    add_lora_acts(ctx, out, kLoraLinearFc2, LoraScope::kLayer, T, f / t, false, Tl, h);
    // mlp.py MLP.forward, glu() without the fused kernel (--no-bias-swiglu-fusion or
    // --no-bias-gelu-fusion): the product act(x_glu) * x_linear keeps act(x_glu) [s, b, f/TP]
    // besides x_linear, a view of fc1's output (x_glu's activation keeps the other half).
    if (unfused_glu) add_act(out, "mlp/activation_glu_act", ab * T * f / t, 0, T * f / t);
    // ... and its clamped or offset inputs (block_helpers.hpp unfused_glu_extra_tensors).
    if (unfused_glu && unfused_glu_extra_tensors(m) > 0)
      add_act(out, "mlp/activation_glu_clamped", unfused_glu_extra_tensors(m) * ab * T * f / t, 0, T * f / t);
  }
  if (ctx.layer.post_mlp_norm) add_act(out, "mlp/post_norm_input", ab * Tl * h, 0, Tl * h);
  add_act(out, "mlp/bda_dropout_mask", bda_dropout_mask_bytes(ctx), 0, Tl * h);

  // Backward: gradients of fc1's output and of the activation output, the block input's
  // gradient before the SP reduce-scatter, and the re-gathered fc1 input under SP.
  CheckedInt transient = ab * T * (fc1_width + f) / t + ab * T * h;
  // Unfused glu()'s backward: the gradients of x_glu and x_linear [s, b, f/TP] each exist next
  // to their concatenation into the gradient of fc1's output (chunk's backward).
  if (unfused_glu) transient += ab * T * f / t;
  if (ctx.sequence_parallel) transient += li * T * h;
  out.transient = transient.value();
}

void DenseMlpModel::costs(const BlockContext& ctx, BlockCosts& out) const {
  BlockParams params;
  parameters(ctx, params);
  add_gemm_costs(ctx, params, out);
  // `mlp` recompute (transformer_layer.py, checkpointing self.mlp) runs fc1 and fc2 again.
  if (ctx.setup.recompute.has(kRecomputeMlp)) out.recompute_flops += out.gemm_flops;
  add_tp_block_collectives(ctx, out, "mlp_tp");
  // linear_fc1 [h -> (2) f] column-parallel, linear_fc2 [f -> h] row-parallel.
  const double h = static_cast<double>(ctx.model.hidden_size), f = static_cast<double>(ctx.layer.mlp.ffn_hidden_size);
  add_gemm(ctx, out, "linear_fc1", h, (ctx.model.gated_linear_unit ? 2 : 1) * f, GemmSplit::kColumn);
  add_gemm(ctx, out, "linear_fc2", f, h, GemmSplit::kRow);
}

void register_dense_mlp(Registrar& registry) { registry.add_layer_model(std::make_shared<DenseMlpModel>()); }

}  // namespace mme::plugins
