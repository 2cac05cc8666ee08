#include "mla.hpp"

#include <fmt/core.h>

#include <mme/sdk/block_helpers.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/limits.hpp>
#include <mme/sdk/low_precision.hpp>

namespace mme::plugins {

void MlaAttentionModel::validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const {
  constexpr std::int64_t kDim = limits::kMaxDimension;
  const auto& a = layer.attention;
  if (a.q_lora_rank) require_layer_field(model, index, "q_lora_rank", *a.q_lora_rank, kDim);
  require_layer_field(model, index, "kv_lora_rank", a.kv_lora_rank, kDim);
  require_layer_field(model, index, "qk_head_dim", a.qk_head_dim, kDim);
  require_layer_field(model, index, "qk_pos_emb_head_dim", a.qk_pos_emb_head_dim, kDim);
  require_layer_field(model, index, "v_head_dim", a.v_head_dim, kDim);
  // This block models MLA's softmax over all earlier tokens only.
  if (a.window > 0 || a.softmax_type != SoftmaxType::kVanilla)
    throw ConfigError(
        fmt::format("{}: layer {}: multi-latent attention with a sliding window or a softmax other than "
                    "vanilla is not modelled",
                    model.name, index));
}

void MlaAttentionModel::validate(const BlockContext& ctx) const {
  const auto& a = ctx.layer.attention;
  if (a.num_heads % ctx.tp != 0)
    throw LayoutError(
        fmt::format("{} attention heads are not divisible by --tp {}; --tp must divide the {} attention "
                    "heads: {}",
                    a.num_heads, ctx.tp, a.num_heads, divisors_text(a.num_heads)));
  if (ctx.setup.attention_backend == AttentionBackend::kUnfused && ctx.cp > 1)
    throw LayoutError("context parallelism (--cp > 1) needs the flash/fused attention backend");
  // LoRA (Megatron-Bridge) wraps linear_qkv, linear_proj, linear_fc1 and linear_fc2, the linears
  // block_helpers.hpp's adapters model; MLA's are others: refused rather than estimated without
  // adapters.
  if (ctx.setup.lora.on())
    throw LayoutError(
        "LoRA on multi-latent attention is not modelled (its linears are linear_q_proj, linear_kv_down_proj, ...; "
        "mme models the adapters of linear_qkv, linear_proj, linear_fc1 and linear_fc2)");
}

void MlaAttentionModel::parameters(const BlockContext& ctx, BlockParams& out) const {
  const auto& m = ctx.model;
  const auto& a = ctx.layer.attention;
  const CheckedInt h = m.hidden_size, n = a.num_heads, t = ctx.tp;
  const CheckedInt dq = CheckedInt(a.qk_head_dim) + a.qk_pos_emb_head_dim, kv_r = a.kv_lora_rank;
  // The input norm is a separate TENorm for MLA (replicated).
  add_param(out, "input_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
  if (a.q_lora_rank) {
    const CheckedInt q_r = *a.q_lora_rank;
    // linear_q_down_proj [h -> q_r]: TE parallel_mode='duplicated', the same on every TP rank.
    add_param(out, "linear_q_down_proj", ParamGroup::kAttention, ShardClass::kReplicated, h * q_r, 1);
    add_gemm_weight(out, ParamGroup::kAttention, q_r, h);
    // q latent norm, fused into linear_q_up_proj.
    add_param(out, "q_latent_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, q_r), 1);
    // linear_q_up_proj: column-parallel [q_r -> n (d_qk + d_rope)].
    add_param(out, "linear_q_up_proj", ParamGroup::kAttention, ShardClass::kTensorParallel, q_r * n * dq, t);
    add_gemm_weight(out, ParamGroup::kAttention, n * dq / t, q_r);
  } else {
    // linear_q_proj: column-parallel [h -> n (d_qk + d_rope)] (q_lora_rank null, DeepSeek-V2-Lite).
    add_param(out, "linear_q_proj", ParamGroup::kAttention, ShardClass::kTensorParallel, h * n * dq, t);
    add_gemm_weight(out, ParamGroup::kAttention, n * dq / t, h);
  }
  // linear_kv_down_proj [h -> kv_r + d_rope]: duplicated over TP.
  add_param(out, "linear_kv_down_proj", ParamGroup::kAttention, ShardClass::kReplicated,
            h * (kv_r + a.qk_pos_emb_head_dim), 1);
  add_gemm_weight(out, ParamGroup::kAttention, kv_r + a.qk_pos_emb_head_dim, h);
  add_param(out, "kv_latent_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, kv_r), 1);
  // linear_kv_up_proj: column-parallel [kv_r -> n (d_qk + d_v)].
  add_param(out, "linear_kv_up_proj", ParamGroup::kAttention, ShardClass::kTensorParallel,
            kv_r * n * (CheckedInt(a.qk_head_dim) + a.v_head_dim), t);
  add_gemm_weight(out, ParamGroup::kAttention, n * (CheckedInt(a.qk_head_dim) + a.v_head_dim) / t, kv_r);
  // linear_proj: row-parallel [n d_v -> h].
  add_param(out, "linear_proj", ParamGroup::kAttention, ShardClass::kTensorParallel, n * a.v_head_dim * h, t);
  add_gemm_weight(out, ParamGroup::kAttention, h, n * a.v_head_dim / t);
  if (m.add_bias_linear) add_param(out, "linear_proj_bias", ParamGroup::kAttention, ShardClass::kReplicated, h, 1);
}

void MlaAttentionModel::activations(const BlockContext& ctx, BlockActivations& out) const {
  const auto& a = ctx.layer.attention;
  const auto& rc = ctx.setup.recompute;
  const CheckedInt h = ctx.model.hidden_size, t = ctx.tp;
  const CheckedInt T = ctx.tokens, Tl = ctx.local_tokens, ab = ctx.act_bytes, li = ctx.linear_input_bytes;
  const CheckedInt nl = CheckedInt(a.num_heads) / t, dq = CheckedInt(a.qk_head_dim) + a.qk_pos_emb_head_dim,
                   dv = a.v_head_dim;
  const CheckedInt kv_r = a.kv_lora_rank, d_rope = a.qk_pos_emb_head_dim;
  const bool fused_kernel = fused_kernel_attention(ctx.setup.attention_backend);  // no s^2 scores
  // The up-projections (TELayerNormColumnParallelLinear) all-gather their normed latents under SP.
  const auto ln_linear_input =
      ctx.sequence_parallel ? SavedGemmInput::kLayerNormLinearGathered : SavedGemmInput::kOneCopy;

  // The separate input TENorm keeps its input; its output feeds the duplicated
  // down-projections, which keep it, unless `layernorm` recompute discards it.
  // Offload groups (multi_latent_attention.py, transformer_layer.py): the input TENorm in the
  // attn_norm context, the down/up projections (get_query_key_value_tensors) in qkv_linear's,
  // the core attention in core_attn's, linear_proj in attn_proj's.
  add_act(out, "attention/input_norm_input", ab * Tl * h, kOffloadAttnNorm, Tl * h);
  if (!rc.has(kRecomputeLayernorm))
    add_act(out, "attention/input_norm_output", saved_gemm_input_bytes(ctx, Tl, h), kOffloadQkvLinear, Tl * h);
  if (a.q_lora_rank) {
    // linear_q_up_proj (TELayerNormColumnParallelLinear) keeps the q latent and its normed copy.
    const CheckedInt q_r = *a.q_lora_rank;
    add_act(out, "attention/q_latent", ab * Tl * q_r + saved_gemm_input_bytes(ctx, Tl, q_r, ln_linear_input),
            kOffloadQkvLinear, Tl * q_r);
  }
  // linear_kv_up_proj keeps the kv latent (a view of the kv_down output, rope part
  // included) and its normed copy.
  add_act(out, "attention/kv_latent",
          ab * Tl * (kv_r + d_rope) + saved_gemm_input_bytes(ctx, Tl, kv_r, ln_linear_input), kOffloadQkvLinear,
          Tl * kv_r);
  if (!rc.has(kRecomputeMlaUpProj)) {
    // Q [s, b, n/TP, d_qk + d_rope], K of the same width (rope key broadcast to every head)
    // and V [s, b, n/TP, d_v], kept by the core attention; mla_up_proj recompute drops them.
    // Under Ulysses CP the kernel's Q, K, V are the exchange's copies on cp_stream (block_helpers.hpp).
    const std::size_t qkv_first = out.saved.size();
    add_act(out, "attention/q", ab * T * nl * dq, kOffloadCoreAttn, T * nl * dq);
    add_act(out, "attention/kv", ab * T * nl * (dq + dv), kOffloadCoreAttn, T * nl * dv);
    if (a2a_context_parallel_stream(ctx) && !rc.has(kRecomputeCoreAttn)) mark_side_stream(out, qkv_first);
    // The rope key gathered over SP before it is broadcast to the heads.
    add_act(out, "attention/k_pos_emb", ab * T * d_rope, kOffloadQkvLinear, T * d_rope);
    if (!ctx.setup.apply_rope_fusion) {
      // multi_latent_attention.py qkv_up_proj_and_rope_apply without the fused MLA kernels
      // (--no-rope-fusion): apply_rotary_pos_emb on q_pos_emb and k_pos_emb, two calls of
      // rope_utils.py _apply_rotary_pos_emb_bshd, whose products keep cos_ and sin_ [s/CP, 1, 1,
      // d_rope] in the activation dtype each. The fused kernels keep the model's cached cos/sin.
      const CheckedInt s_local = CheckedInt(ctx.setup.seq_length) / ctx.cp;
      add_act(out, "attention/rope_cos_sin", 4 * ab * s_local * d_rope, kOffloadQkvLinear, s_local * d_rope);
    }
  }
  if (!rc.has(kRecomputeCoreAttn)) {
    if (fused_kernel) {
      add_act(out, "attention/softmax_lse", 4 * T * nl, kOffloadCoreAttn, T * nl);
    } else {
      const CheckedInt s_k = attention_key_length(ctx);
      add_act(out, "attention/scores", unfused_score_bytes_per_element(ctx, nl) * T * nl * s_k, kOffloadCoreAttn,
              T * nl * s_k);
    }
  }
  // Core attention output, kept by flash attention and as linear_proj's input: it leaves the
  // GPU only with linear_proj's copy (attn_proj).
  // Under Ulysses CP the output linear_proj keeps in 16 bits is the exchange's, on cp_stream.
  const bool output_on_stream = a2a_context_parallel_stream(ctx) && li == ab;
  const std::size_t output_first = out.saved.size();
  add_act(out, "attention/output", ab * T * nl * dv, kOffloadAttnProj, T * nl * dv);
  if (output_on_stream) mark_side_stream(out, output_first);
  // Under TE's FlashAttention with several sequences per micro-batch, flash-attn's own [b, s, n, d]
  // output beside the [s, b, n * d] copy linear_proj keeps (block_helpers.hpp).
  if (!rc.has(kRecomputeCoreAttn) && li == ab) {
    add_act(out, "attention/flash_output_bshd", flash_attn_output_copy_bytes(ctx, ab * T * nl * dv), kOffloadCoreAttn,
            T * nl * dv);
    // Under Ulysses CP the core's head-sharded output beside linear_proj's (block_helpers.hpp).
    add_act(out, "attention/cp_a2a_head_sharded_output", a2a_context_parallel_output_copy_bytes(ctx, ab * T * nl * dv),
            kOffloadCoreAttn, T * nl * dv);
  }
  if (li != ab)
    add_act(out, "attention/proj_input_fp8", saved_gemm_input_bytes(ctx, T, nl * dv), kOffloadAttnProj, T * nl * dv);
  add_act(out, "attention/bda_dropout_mask", bda_dropout_mask_bytes(ctx), 0, Tl * h);

  // Backward: gradients of Q, K, V and of the block input before the SP reduce-scatter.
  CheckedInt transient = ab * T * nl * (2 * dq + dv) + ab * T * h;
  if (!fused_kernel) transient += 2 * ab * T * nl * attention_key_length(ctx);
  transient += context_parallel_attention_transient(ctx, ab * T * nl * dq, ab * T * nl * (dq + dv), ab * T * nl * dv);
  out.transient = transient.value();
  add_context_parallel_side_stream(ctx, out, ab * T * nl * (dq + dv), ab * T * nl * dv, 4 * T * nl);
  add_a2a_context_parallel_stream(ctx, out, ab * T * nl * dq, ab * T * nl * dq, ab * T * nl * dv, ab * T * nl * dv,
                                  rc.has(kRecomputeCoreAttn), output_on_stream);
  out.global_buffer = local_attention_score_buffer(ctx, nl, attention_key_length(ctx)).value();
}

void MlaAttentionModel::costs(const BlockContext& ctx, BlockCosts& out) const {
  BlockParams params;
  parameters(ctx, params);
  add_gemm_costs(ctx, params, out);
  // multi_latent_attention.py expands K and V per head before the core: Q and K of d_qk + d_rope,
  // V of d_v, all of them exchanged by context parallelism.
  const auto& a = ctx.layer.attention;
  const double width =
      static_cast<double>(a.num_heads) * static_cast<double>(a.qk_head_dim + a.qk_pos_emb_head_dim + a.v_head_dim);
  add_attention_core_costs(ctx, width, width, out);
  // `mla_up_proj` recompute (MLASelfAttention, CheckpointWithoutOutput) runs the block's
  // projections again in backward.
  if (ctx.setup.recompute.has(kRecomputeMlaUpProj)) out.recompute_flops += out.gemm_flops;
  add_tp_block_collectives(ctx, out, "attention_tp");
  // The projections of parameters(), one GEMM each.
  const double h = static_cast<double>(ctx.model.hidden_size), n = static_cast<double>(a.num_heads);
  const double dq = static_cast<double>(a.qk_head_dim + a.qk_pos_emb_head_dim);
  const double kv_r = static_cast<double>(a.kv_lora_rank);
  if (a.q_lora_rank) {
    const double q_r = static_cast<double>(*a.q_lora_rank);
    add_gemm(ctx, out, "linear_q_down_proj", h, q_r, GemmSplit::kReplicated);
    add_gemm(ctx, out, "linear_q_up_proj", q_r, n * dq, GemmSplit::kColumn);
  } else {
    add_gemm(ctx, out, "linear_q_proj", h, n * dq, GemmSplit::kColumn);
  }
  add_gemm(ctx, out, "linear_kv_down_proj", h, kv_r + static_cast<double>(a.qk_pos_emb_head_dim),
           GemmSplit::kReplicated);
  add_gemm(ctx, out, "linear_kv_up_proj", kv_r, n * static_cast<double>(a.qk_head_dim + a.v_head_dim),
           GemmSplit::kColumn);
  add_gemm(ctx, out, "linear_proj", n * static_cast<double>(a.v_head_dim), h, GemmSplit::kRow);
}

void register_mla(Registrar& registry) { registry.add_layer_model(std::make_shared<MlaAttentionModel>()); }

}  // namespace mme::plugins
