#include "gqa.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/core.h>

#include <mme/sdk/block_helpers.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/limits.hpp>
#include <mme/sdk/low_precision.hpp>

namespace mme::plugins {

namespace {

// Query groups (K and V heads) each TP rank keeps (attention.py, SelfAttention.__init__,
// num_query_groups_per_partition): g / TP, or one group when TP is a multiple of g (the group's
// K and V replicated over the TP / g ranks that share its query heads).
CheckedInt query_groups_per_rank(const AttentionSpec& a, std::int64_t tp) {
  if (tp > a.num_query_groups) return 1;
  return CheckedInt(a.num_query_groups) / tp;
}

// The TP sizes validate() accepts, as text: the divisors of the heads that are a divisor or a
// multiple of the query groups and split linear_qkv's outputs evenly.
std::string tp_choices_text(const AttentionSpec& a) {
  const std::int64_t width = (a.num_heads + 2 * a.num_query_groups) * a.kv_channels;
  // The heads' divisors in pairs up to the square root: a few thousand steps at most (the heads
  // are bounded by limits::kMaxDimension), since an error of the planner's search builds this too.
  std::vector<std::int64_t> divisors;
  for (std::int64_t d = 1; d <= a.num_heads / d; ++d)
    if (a.num_heads % d == 0) {
      divisors.push_back(d);
      if (d != a.num_heads / d) divisors.push_back(a.num_heads / d);
    }
  std::sort(divisors.begin(), divisors.end());
  std::vector<std::int64_t> ok;
  for (const std::int64_t t : divisors)
    if ((a.num_query_groups % t == 0 || t % a.num_query_groups == 0) && (width == 0 || width % t == 0)) ok.push_back(t);
  // At most 12 listed: the first 11, then "..." and the largest.
  const bool cut = ok.size() > 12;
  if (cut) ok.erase(ok.begin() + 11, ok.end() - 1);
  std::string out;
  for (std::size_t i = 0; i < ok.size(); ++i)
    out += (i == 0 ? "" : i + 1 == ok.size() ? (cut ? ", ..., " : " or ") : ", ") + std::to_string(ok[i]);
  return out;
}

}  // namespace

void GqaAttentionModel::validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const {
  require_layer_field(model, index, "kv_channels", layer.attention.kv_channels, limits::kMaxDimension);
}

void GqaAttentionModel::validate(const BlockContext& ctx) const {
  // megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__: "mla_up_proj"
  // in recompute_modules without multi_latent_attention is refused; this block has no MLA.
  if (ctx.setup.recompute.granularity == RecomputeGranularity::kSelective &&
      (ctx.setup.recompute.modules & kRecomputeMlaUpProj))
    throw LayoutError("--recompute-modules mla_up_proj needs a model with multi-latent attention");
  const auto& a = ctx.layer.attention;
  // Megatron splits whole heads over TP (attention.py divide(); linear_proj's rows).
  if (a.num_heads % ctx.tp != 0)
    throw LayoutError(fmt::format("{} attention heads are not divisible by --tp {}; --tp must be one of {}",
                                  a.num_heads, ctx.tp, tp_choices_text(a)));
  // transformer_config.py __post_init__: num_query_groups "must be a multiple or divisor of"
  // TP. With more TP ranks than groups each rank keeps one group's K and V (attention.py,
  // SelfAttention; query_groups_per_rank above).
  if (a.num_query_groups % ctx.tp != 0 && ctx.tp % a.num_query_groups != 0)
    throw LayoutError(
        fmt::format("{} query groups (KV heads) are neither a multiple nor a divisor of --tp {} (Megatron-LM's rule, "
                    "transformer_config.py); --tp must be one of {}",
                    a.num_query_groups, ctx.tp, tp_choices_text(a)));
  // linear_qkv is one column-parallel linear of (n + 2g) d outputs, split evenly over TP (TE's
  // Linear divides out_features by the TP size), whichever of g and TP is larger.
  const std::int64_t qkv_width = (a.num_heads + 2 * a.num_query_groups) * a.kv_channels;
  if (qkv_width % ctx.tp != 0)
    throw LayoutError(
        fmt::format("linear_qkv's {} outputs ((heads + 2 x query groups) x kv_channels) are not divisible by --tp {}; "
                    "--tp must be one of {}",
                    qkv_width, ctx.tp, tp_choices_text(a)));
  if (ctx.setup.attention_backend == AttentionBackend::kUnfused && ctx.cp > 1) {
    // A learnable (or off-by-one) softmax rules out FlashAttention, and cuDNN fused attention under
    // any CP exchange but a2a (training_setup.cpp resolve_attention): none is left.
    if (a.softmax_type != SoftmaxType::kVanilla)
      throw LayoutError(fmt::format(
          "context parallelism (--cp {}) with this model's {} softmax needs --cp-comm-type a2a: under the other "
          "exchanges Transformer Engine has no attention backend for it (dot_product_attention/utils.py "
          "get_attention_backend)",
          ctx.cp, a.softmax_type == SoftmaxType::kLearnable ? "learnable" : "off-by-one"));
    throw LayoutError("context parallelism (--cp > 1) needs the flash/fused attention backend");
  }
}

void GqaAttentionModel::parameters(const BlockContext& ctx, BlockParams& out) const {
  const auto& m = ctx.model;
  const auto& a = ctx.layer.attention;
  const CheckedInt h = m.hidden_size, d = a.kv_channels, t = ctx.tp;
  const CheckedInt q = CheckedInt(a.num_heads) * d, kv = CheckedInt(a.num_query_groups) * d;
  // Input norm, fused into TELayerNormColumnParallelLinear (replicated on every TP rank).
  add_param(out, "input_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
  // linear_qkv: column-parallel [h -> (n + 2g) d].
  add_param(out, "linear_qkv", ParamGroup::kAttention, ShardClass::kTensorParallel, h * (q + 2 * kv), t);
  if (a.qkv_bias || m.add_bias_linear)
    add_param(out, "linear_qkv_bias", ParamGroup::kAttention, ShardClass::kTensorParallel, q + 2 * kv, t);
  // q_layernorm / k_layernorm over the head dim, shared by all heads (Qwen3).
  if (a.qk_norm) add_param(out, "qk_norm", ParamGroup::kNorms, ShardClass::kReplicated, 2 * norm_weight_count(m, d), 1);
  // linear_proj: row-parallel [n d -> h]; its bias is not split.
  add_param(out, "linear_proj", ParamGroup::kAttention, ShardClass::kTensorParallel, q * h, t);
  // The two TE linears' weights per rank: linear_qkv [(n + 2g) d / t, h], linear_proj [h, n d / t].
  add_gemm_weight(out, ParamGroup::kAttention, (q + 2 * kv) / t, h);
  add_gemm_weight(out, ParamGroup::kAttention, h, q / t);
  if (m.add_bias_linear) add_param(out, "linear_proj_bias", ParamGroup::kAttention, ShardClass::kReplicated, h, 1);
  // The learnable softmax's per-head offsets, GPT-OSS's attention sinks (TE DotProductAttention
  // softmax_offset, num_heads / TP per rank; Megatron's TEDotProductAttention shards it over TP).
  if (a.softmax_type == SoftmaxType::kLearnable)
    add_param(out, "softmax_offset", ParamGroup::kAttention, ShardClass::kTensorParallel, CheckedInt(a.num_heads), t);
  if (ctx.layer.post_attention_norm)
    add_param(out, "post_attention_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
  // LoRA adapters beside linear_qkv (column parallel) and linear_proj (row parallel).
  add_lora_params(ctx, out, kLoraLinearQkv, LoraScope::kLayer, h, q + 2 * kv);
  add_lora_params(ctx, out, kLoraLinearProj, LoraScope::kLayer, q, h);
}

void GqaAttentionModel::activations(const BlockContext& ctx, BlockActivations& out) const {
  const auto& a = ctx.layer.attention;
  const auto& rc = ctx.setup.recompute;
  const CheckedInt h = ctx.model.hidden_size, d = a.kv_channels, t = ctx.tp;
  const CheckedInt T = ctx.tokens, Tl = ctx.local_tokens, ab = ctx.act_bytes, li = ctx.linear_input_bytes;
  const CheckedInt nq = CheckedInt(a.num_heads) / t, nkv = query_groups_per_rank(a, ctx.tp);
  const bool fused_kernel = fused_kernel_attention(ctx.setup.attention_backend);  // no s^2 scores
  const bool recompute_core = rc.has(kRecomputeCoreAttn);
  // linear_qkv (TELayerNormColumnParallelLinear) all-gathers its normed input under SP.
  const auto ln_linear_input =
      ctx.sequence_parallel ? SavedGemmInput::kLayerNormLinearGathered : SavedGemmInput::kOneCopy;

  // Offload groups (attention.py): the TE spec fuses the input norm into linear_qkv, so both
  // are saved in the qkv_linear context (attn_norm has no separate norm to offload); Q, K, V
  // and the scores in core_attn's; linear_proj's input in attn_proj's.
  // TE LayerNormLinear keeps the norm input (for the norm's backward) and the normed output
  // (the QKV GEMM input), both sequence-local under SP (layernorm_linear.py).
  add_act(out, "attention/input_norm_input", ab * Tl * h, kOffloadQkvLinear, Tl * h);
  // Under LoRA the frozen linear_qkv frees the normed output, unless its adapter wraps it
  // (return_layernorm_output; the saved tensor stays). The adapter takes that output: the same
  // tensor without SP, the all-gathered [T, h] with it (return_layernorm_output_gathered).
  const bool frozen = lora_frozen(ctx);
  if (!frozen || lora_wraps(ctx, kLoraLinearQkv))
    add_act(out, "attention/qkv_input", saved_gemm_input_bytes(ctx, Tl, h, ln_linear_input), kOffloadQkvLinear, Tl * h);
  add_lora_acts(ctx, out, kLoraLinearQkv, LoraScope::kLayer, T, h, !ctx.sequence_parallel && li == ab, T,
                (nq + 2 * nkv) * d);
  if (a.qk_norm) {
    // q_layernorm / k_layernorm keep their inputs (the un-normed Q and K).
    add_act(out, "attention/qk_norm_inputs", ab * T * (nq + nkv) * d, kOffloadQkvLinear, T * nkv * d);
  }
  // rope_utils.py apply_rotary_pos_emb leaves TE's fused RoPE under --no-rope-fusion, and for a
  // YaRN concentration factor other than 1 (attention.py passes it as mscale; ModelSpec::rope_yarn_factor).
  if (ctx.model.position_embedding == PositionEmbedding::kRope &&
      (!ctx.setup.apply_rope_fusion || ctx.model.rope_yarn_factor > 1)) {
    // rope_utils.py _apply_rotary_pos_emb_bshd: each of Q and K is rotated
    // as t * cos_ + rotate_half(t) * sin_, whose products keep cos_ and sin_, made per call in
    // the activation dtype [s/CP, 1, 1, d] (no batch dimension); t itself is not kept. TE's fused
    // kernel keeps only the model's one freqs tensor, shared by every layer.
    const CheckedInt s_local = CheckedInt(ctx.setup.seq_length) / ctx.cp;
    add_act(out, "attention/rope_cos_sin", 4 * ab * s_local * d, 0, s_local * d);
  }
  // Core attention inputs Q, K, V (also what a core_attn checkpoint keeps). The kernel's, under
  // Ulysses CP, are the exchange's reordered copies on cp_stream (block_helpers.hpp).
  const CheckedInt q_bytes = ab * T * nq * d, kv_bytes = 2 * ab * T * nkv * d;
  const bool a2a_stream = a2a_context_parallel_stream(ctx);
  const std::size_t qkv_first = out.saved.size();
  add_act(out, "attention/q", q_bytes, kOffloadCoreAttn, T * nq * d);
  add_act(out, "attention/kv", kv_bytes, kOffloadCoreAttn, T * nkv * d);
  if (a2a_stream && !recompute_core) mark_side_stream(out, qkv_first);
  if (fused_kernel) {
    // Flash/fused attention keeps the fp32 softmax statistics [b, n/TP, s] (LSE).
    if (!recompute_core) add_act(out, "attention/softmax_lse", 4 * T * nq, kOffloadCoreAttn, T * nq);
  } else if (!recompute_core) {
    const CheckedInt s_k = attention_key_length(ctx);
    // dot_product_attention.py: K, V repeat_interleave'd to n heads for GQA, kept by the bmms.
    if (nkv != nq) add_act(out, "attention/kv_expanded", 2 * ab * T * nq * d, kOffloadCoreAttn, T * nq * d);
    // [b, n/TP, s, s] softmax output (+ dropout mask and output with attention dropout).
    add_act(out, "attention/scores", unfused_score_bytes_per_element(ctx, nq) * T * nq * s_k, kOffloadCoreAttn,
            T * nq * s_k);
  }
  // Attention output O: kept by flash attention and as linear_proj's input (one tensor in
  // bf16; under FP8 linear_proj keeps its own 1-byte copy). It leaves the GPU only when
  // linear_proj's copy does (attn_proj, which Megatron-LM allows only with core_attn).
  // Under LoRA the frozen linear_proj keeps no input: O stays for flash attention, or for
  // linear_proj's adapter (the same tensor).
  const bool proj_keeps_output = !frozen || lora_wraps(ctx, kLoraLinearProj);
  // Under Ulysses CP the output linear_proj keeps in 16 bits is the exchange's, on cp_stream.
  const bool output_on_stream = a2a_stream && proj_keeps_output && li == ab;
  const std::size_t output_first = out.saved.size();
  if (fused_kernel || proj_keeps_output)
    add_act(out, "attention/output", ab * T * nq * d, kOffloadAttnProj, T * nq * d);
  if (output_on_stream) mark_side_stream(out, output_first);
  // Under TE's FlashAttention with several sequences per micro-batch, flash-attn's own [b, s, n, d]
  // output beside the [s, b, n * d] copy linear_proj keeps (block_helpers.hpp).
  if (!recompute_core && proj_keeps_output && li == ab) {
    add_act(out, "attention/flash_output_bshd", flash_attn_output_copy_bytes(ctx, ab * T * nq * d), kOffloadCoreAttn,
            T * nq * d);
    // Under Ulysses CP the core's head-sharded output beside linear_proj's (block_helpers.hpp).
    add_act(out, "attention/cp_a2a_head_sharded_output", a2a_context_parallel_output_copy_bytes(ctx, ab * T * nq * d),
            kOffloadCoreAttn, T * nq * d);
  }
  if (li != ab && !frozen)
    add_act(out, "attention/proj_input_fp8", saved_gemm_input_bytes(ctx, T, nq * d), kOffloadAttnProj, T * nq * d);
  add_lora_acts(ctx, out, kLoraLinearProj, LoraScope::kLayer, T, nq * d, true, Tl, h);
  if (ctx.layer.post_attention_norm) add_act(out, "attention/post_norm_input", ab * Tl * h, 0, Tl * h);
  add_act(out, "attention/bda_dropout_mask", bda_dropout_mask_bytes(ctx), 0, Tl * h);

  // Busiest moment, the block's backward: gradients of Q, K, V and of the block input (full
  // sequence before the SP reduce-scatter), plus the re-gathered QKV input under SP; unfused
  // attention also materialises the gradient of the score tensor.
  CheckedInt transient = ab * T * (nq + 2 * nkv) * d + ab * T * h;
  if (ctx.tp > a.num_query_groups) {
    // With more TP ranks than groups (get_query_key_value_tensors) the backward of the group's
    // slice writes the gradient into zeros of the all-gathered [T, (n + 2g) d] linear_qkv output,
    // beside the group's own [T, (n/g + 2) d] (the split's concatenated gradient), before
    // all_gather_last_dim_from_tensor_parallel_region's reduce-scatter brings it back to this
    // rank's share. The forward's all-gathered output (freed after the split: TE's
    // get_qkv_layout copies the query, key and value views it cannot use as they are) is as large.
    const CheckedInt n = a.num_heads, g = a.num_query_groups;
    transient += ab * T * (n + 2 * g) * d + ab * T * (n / g + 2) * d;
  }
  if (ctx.sequence_parallel) transient += li * T * h;
  if (!fused_kernel) transient += 2 * ab * T * nq * attention_key_length(ctx);
  transient += context_parallel_attention_transient(ctx, q_bytes, kv_bytes, ab * T * nq * d);
  out.transient = transient.value();
  add_context_parallel_side_stream(ctx, out, kv_bytes, ab * T * nq * d, 4 * T * nq);
  add_a2a_context_parallel_stream(ctx, out, q_bytes, kv_bytes / 2, kv_bytes / 2, ab * T * nq * d, recompute_core,
                                  output_on_stream);
  out.global_buffer = local_attention_score_buffer(ctx, nq, attention_key_length(ctx)).value();
}

void GqaAttentionModel::costs(const BlockContext& ctx, BlockCosts& out) const {
  BlockParams params;
  parameters(ctx, params);
  add_gemm_costs(ctx, params, out);
  // The core (attention.py, DotProductAttention): Q K^T and the product with V on d per head; K
  // and V of the query groups are what context parallelism exchanges.
  const auto& a = ctx.layer.attention;
  const double d = static_cast<double>(a.kv_channels > 0 ? a.kv_channels : ctx.model.hidden_size / a.num_heads);
  const double groups = static_cast<double>(a.num_query_groups > 0 ? a.num_query_groups : a.num_heads);
  // With more TP ranks than groups every rank keeps one group's K and V: what CP exchanges per
  // rank is one group's, as if there were TP groups.
  const double groups_kept = std::max(groups, static_cast<double>(ctx.tp));
  add_attention_core_costs(ctx, static_cast<double>(a.num_heads) * 2 * d, groups_kept * 2 * d, out);
  add_tp_block_collectives(ctx, out, "attention_tp");
  if (ctx.tp > a.num_query_groups) {
    // get_query_key_value_tensors all-gathers linear_qkv's output over TP before taking its
    // group's slice; its backward reduce-scatters the gradient.
    const double gathered = static_cast<double>(ctx.tokens) * (static_cast<double>(a.num_heads) + 2 * groups) * d *
                            static_cast<double>(ctx.act_bytes);
    const double pass = ring_bytes(gathered, ctx.tp);
    add_collective(out, "attention_qkv_all_gather", CommGroup::kTensor, pass, pass);
  }
  // linear_qkv [h -> (n + 2g) d] column-parallel, linear_proj [n d -> h] row-parallel.
  const double h = static_cast<double>(ctx.model.hidden_size), q = static_cast<double>(a.num_heads) * d;
  add_gemm(ctx, out, "linear_qkv", h, q + 2 * groups * d, GemmSplit::kColumn);
  add_gemm(ctx, out, "linear_proj", q, h, GemmSplit::kRow);
}

void register_gqa(Registrar& registry) { registry.add_layer_model(std::make_shared<GqaAttentionModel>()); }

}  // namespace mme::plugins
