#include <algorithm>
#include <string>

#include <fmt/core.h>

#include <mme/sdk/block_helpers.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/limits.hpp>
#include <mme/sdk/low_precision.hpp>

#include "hybrid.hpp"

namespace mme::plugins {

namespace {

// MambaMixer.__init__ defaults the hybrid stack does not change (mamba_layer.py builds the mixer
// with d_model alone): the causal conv1d's kernel width d_conv and the SSD kernel's chunk_size.
constexpr std::int64_t kConvKernel = 4;
constexpr std::int64_t kChunkSize = 128;

// The mixer's sizes on one rank (mamba_mixer.py MambaMixer.__init__, mamba_context_parallel.py
// MambaContextParallel.__init__): heads, d_inner and groups split over TP, and over CP inside the
// kernel, where a group shared by several CP ranks is repeated to each (group_repeat_count).
struct MambaShape {
  CheckedInt heads, d_inner, groups, state;  // the model's
  CheckedInt in_width;                       // in_proj's outputs: z, x, B, C and dt
  CheckedInt conv_width;                     // conv1d's channels: x, B and C
  CheckedInt heads_tp, d_inner_tp, groups_tp;
  CheckedInt groups_tpcp;  // the groups one CP rank's kernel holds: groups_tp / CP, at least 1
};

MambaShape shape_of(const BlockContext& ctx) {
  const AttentionSpec& a = ctx.layer.attention;
  MambaShape s;
  s.heads = a.mamba_num_heads;
  s.d_inner = CheckedInt(a.mamba_num_heads) * a.mamba_head_dim;
  s.groups = a.mamba_num_groups;
  s.state = a.mamba_state_dim;
  s.in_width = 2 * s.d_inner + 2 * s.groups * s.state + s.heads;
  s.conv_width = s.d_inner + 2 * s.groups * s.state;
  s.heads_tp = s.heads / ctx.tp;
  s.d_inner_tp = s.d_inner / ctx.tp;
  s.groups_tp = s.groups / ctx.tp;
  s.groups_tpcp = s.groups_tp >= ctx.cp ? s.groups_tp / ctx.cp : CheckedInt(1);
  return s;
}

}  // namespace

void MambaMixerModel::validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const {
  const AttentionSpec& a = layer.attention;
  require_layer_field(model, index, "mamba_num_heads", a.mamba_num_heads, limits::kMaxDimension);
  require_layer_field(model, index, "mamba_head_dim", a.mamba_head_dim, limits::kMaxDimension);
  require_layer_field(model, index, "mamba_state_dim", a.mamba_state_dim, limits::kMaxDimension);
  require_layer_field(model, index, "mamba_num_groups", a.mamba_num_groups, limits::kMaxDimension);
  // MambaMixer.__init__: "nheads must be evenly divisible by ngroups".
  if (a.mamba_num_heads % a.mamba_num_groups != 0)
    throw ConfigError(
        fmt::format("{}: layer {}: mamba_num_heads = {} is not divisible by mamba_num_groups = {} "
                    "(Megatron-LM's MambaMixer asserts it)",
                    model.name, index, a.mamba_num_heads, a.mamba_num_groups));
}

void MambaMixerModel::validate(const BlockContext& ctx) const {
  const AttentionSpec& a = ctx.layer.attention;
  // hybrid_layer_specs.py builds Mamba layers from Transformer Engine's modules only.
  if (!ctx.setup.transformer_engine)
    throw LayoutError("--transformer-impl local: Megatron-LM builds Mamba layers with Transformer Engine only");
  if (ctx.setup.lora.on()) throw LayoutError("LoRA on a hybrid model's Mamba layers is not modelled");
  // MambaMixer.__init__: every TP rank gets whole heads and whole groups.
  if (a.mamba_num_heads % ctx.tp != 0 || a.mamba_num_groups % ctx.tp != 0)
    throw LayoutError(
        fmt::format("the Mamba mixer's {} heads and {} groups must both be divisible by --tp {} "
                    "(Megatron-LM's MambaMixer asserts it)",
                    a.mamba_num_heads, a.mamba_num_groups, ctx.tp));
  const MambaShape s = shape_of(ctx);
  // "For FP8, the innermost dimension of the Mamba layer input projection output tensor must be
  // a multiple of 16."
  if (ctx.setup.precision == Precision::kFP8 && s.in_width.value() % 16 != 0)
    throw LayoutError(
        fmt::format("FP8: the Mamba mixer's in_proj has {} outputs, not a multiple of 16 "
                    "(Megatron-LM's MambaMixer asserts it)",
                    s.in_width.value()));
  // MambaContextParallel.__init__: whole heads per CP rank, and groups that split evenly over CP
  // or are shared evenly by it.
  if (ctx.cp > 1) {
    const std::int64_t heads_tp = s.heads_tp.value(), groups_tp = s.groups_tp.value();
    const bool groups_ok = groups_tp < ctx.cp ? ctx.cp % groups_tp == 0 : groups_tp % ctx.cp == 0;
    if (heads_tp % ctx.cp != 0 || !groups_ok)
      throw LayoutError(
          fmt::format("--cp {}: the Mamba mixer's {} heads and {} groups per TP rank do not split over "
                      "it (Megatron-LM's MambaContextParallel asserts whole heads per CP rank, and "
                      "groups divisible by CP or CP by the groups)",
                      ctx.cp, heads_tp, groups_tp));
  }
}

void MambaMixerModel::parameters(const BlockContext& ctx, BlockParams& out) const {
  const ModelSpec& m = ctx.model;
  const MambaShape s = shape_of(ctx);
  const CheckedInt h = m.hidden_size, t = ctx.tp;
  // in_proj: TELayerNormColumnParallelLinear, its norm replicated, [h -> z, x, B, C, dt] split
  // over TP component by component; bias=False (MambaMixer asserts not bias).
  add_param(out, "input_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
  add_param(out, "in_proj", ParamGroup::kMamba, ShardClass::kTensorParallel, h * s.in_width, t);
  // conv1d_weight [conv_dim, 1, d_conv] and conv1d_bias [conv_dim], split over TP.
  add_param(out, "conv1d", ParamGroup::kMamba, ShardClass::kTensorParallel, s.conv_width * (kConvKernel + 1), t);
  // dt_bias, A_log and D (D_has_hdim False): one per head each, split over TP.
  add_param(out, "dt_bias_A_log_D", ParamGroup::kMamba, ShardClass::kTensorParallel, 3 * s.heads, t);
  // The gated RMSNorm over d_inner (ExtendedRMSNorm, a weight only), split over TP.
  add_param(out, "mixer_norm", ParamGroup::kNorms, ShardClass::kTensorParallel, s.d_inner, t);
  // out_proj: TERowParallelLinear [d_inner -> h], no bias.
  add_param(out, "out_proj", ParamGroup::kMamba, ShardClass::kTensorParallel, s.d_inner * h, t);
  add_gemm_weight(out, ParamGroup::kMamba, s.in_width / t, h);
  add_gemm_weight(out, ParamGroup::kMamba, h, s.d_inner / t);
}

void MambaMixerModel::activations(const BlockContext& ctx, BlockActivations& out) const {
  const MambaShape s = shape_of(ctx);
  const CheckedInt h = ctx.model.hidden_size, cp = ctx.cp;
  const CheckedInt T = ctx.tokens, Tl = ctx.local_tokens, ab = ctx.act_bytes;
  // The kernel's tensors on this rank (MambaContextParallel.pre_conv_ssm: the whole sequence of
  // T x CP tokens, the heads and groups of this CP rank): z, x and dt carry d_inner / (TP x CP)
  // and heads / (TP x CP) channels, B and C the rank's groups, repeated where CP shares them.
  const CheckedInt bc = T * cp * 2 * s.groups_tpcp * s.state;
  const CheckedInt zxbcdt = T * (2 * s.d_inner_tp + s.heads_tp) + bc;
  const CheckedInt xbc = T * s.d_inner_tp + bc;
  const CheckedInt y = T * s.d_inner_tp;  // the mixer's output per rank, before and after the CP exchange
  const auto in_proj_input =
      ctx.sequence_parallel ? SavedGemmInput::kLayerNormLinearGathered : SavedGemmInput::kOneCopy;

  // in_proj (TELayerNormColumnParallelLinear, layernorm_linear.py) keeps the norm's input and its
  // normed output, the GEMM input, both sequence-local under SP (as the attention's linear_qkv).
  add_act(out, "mamba/input_norm_input", ab * Tl * h, 0, Tl * h);
  add_act(out, "mamba/in_proj_input", saved_gemm_input_bytes(ctx, Tl, h, in_proj_input), 0, Tl * h);
  // _ssm_training hands mamba_split_conv1d_scan_combined the in_proj output as [b, l, d] (a
  // contiguous copy with more than one sequence per micro-batch, the output itself with one);
  // its autograd function (mamba_ssm ssd_combined.py MambaSplitConv1dScanCombinedFn.forward)
  // saves that zxbcdt and the scan's output before the z gate, out_x [b, l, heads, head_dim] in
  // the activation dtype. It recomputes the convolution and the chunk states in backward.
  add_act(out, "mamba/zxbcdt", ab * zxbcdt, 0, zxbcdt);
  add_act(out, "mamba/scan_output", ab * y, 0, y);
  // The gated RMSNorm (mamba_ssm layernorm_gated.py LayerNormFn, z None: the kernel applied the
  // gate) keeps its input and its fp32 rstd, one per group and token.
  add_act(out, "mamba/norm_input", ab * y, 0, y);
  add_act(out, "mamba/norm_rstd", 4 * T * s.groups_tp, 0, T * s.groups_tp);
  // out_proj (TERowParallelLinear) keeps its input, the norm's output (1 byte under FP8).
  add_act(out, "mamba/out_proj_input", saved_gemm_input_bytes(ctx, T, s.d_inner_tp), 0, y);
  add_act(out, "mamba/bda_dropout_mask", bda_dropout_mask_bytes(ctx), 0, Tl * h);

  // Busiest moment: the scan kernel's backward (MambaSplitConv1dScanCombinedFn.backward and
  // _mamba_chunk_scan_combined_bwd). It holds the incoming gradient of its output, dzxbcdt (the
  // gradient of its whole input, written in place of z, x, B, C and dt), the convolution it runs
  // again and its gradient (xBC_conv, dxBC), the chunk states again and their gradients in fp32
  // ([b, chunks, heads, head_dim, state]: the forward's states_in_fp32, ssd_combined.py
  // _mamba_chunk_scan_combined_fwd), C B^T per chunk in fp32 ([b, chunks, groups, chunk, chunk],
  // _bmm_chunk_fwd output_dtype float32), and dA_cumsum and dt in fp32 per head and token. Then
  // in_proj's backward: dzxbcdt, the gradient it hands the layer's input ([T, h] before the SP
  // reduce-scatter) and, under SP, its all-gathered input again.
  const CheckedInt states = 4 * T * s.d_inner_tp * s.state / kChunkSize;
  const CheckedInt scan_backward = ab * y + ab * zxbcdt + 2 * ab * xbc + 2 * states +
                                   4 * T * cp * s.groups_tpcp * kChunkSize + 2 * 4 * T * s.heads_tp;
  CheckedInt in_proj_backward = ab * zxbcdt + ab * T * h;
  if (ctx.sequence_parallel) in_proj_backward += CheckedInt(ctx.linear_input_bytes) * T * h;
  out.transient = std::max(scan_backward, in_proj_backward).value();
}

void MambaMixerModel::costs(const BlockContext& ctx, BlockCosts& out) const {
  BlockParams params;
  parameters(ctx, params);
  // 2 FLOPs per weight and token for in_proj, out_proj and the depthwise conv1d (its d_conv taps
  // and bias per channel), and for the per-head dt_bias, A_log and D (a few per token, negligible);
  // the norms run none.
  add_gemm_costs(ctx, params, out);
  const MambaShape s = shape_of(ctx);
  const double h = static_cast<double>(ctx.model.hidden_size);
  add_gemm(ctx, out, "in_proj", h, static_cast<double>(s.in_width.value()), GemmSplit::kColumn);
  add_gemm(ctx, out, "out_proj", static_cast<double>(s.d_inner.value()), h, GemmSplit::kRow);
  // The SSD scan: training.py mamba_layer_flops counts 7 x tokens x d_inner x state ("scan"), here on
  // the rank's d_inner. It runs in Triton kernels beside the GEMMs and is priced as the attention
  // core is (docs/planner.md).
  const double tokens = static_cast<double>(ctx.tokens);
  out.attention_flops += 7 * tokens * static_cast<double>(s.d_inner_tp.value()) * static_cast<double>(s.state.value());
  add_tp_block_collectives(ctx, out, "mamba_tp");
  if (ctx.cp > 1) {
    // MambaContextParallel: all-to-all of z, x, B, C and dt from sequence to head shards before the
    // kernel, of its output back after it; their gradients in backward.
    const double cp = static_cast<double>(ctx.cp), ab = static_cast<double>(ctx.act_bytes);
    const double moved = tokens * (static_cast<double>(s.in_width.value()) + static_cast<double>(s.d_inner.value())) /
                         static_cast<double>(ctx.tp);
    const double a2a = (cp - 1) / cp * moved * ab;
    add_collective(out, "mamba_context_parallel_all_to_all", CommGroup::kContext, a2a, a2a);
  }
}

}  // namespace mme::plugins
