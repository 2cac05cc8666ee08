// Small helpers for layer-memory models (plugins): the terms every transformer block shares.
// Sizes are CheckedInt (checked.hpp): a block model that declares its operands CheckedInt gets
// every product checked, so config values too large for 64 bits are an error, not a wrap.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "mme/sdk/checked.hpp"
#include "mme/sdk/layer_model.hpp"

namespace mme {

// Elements of one norm's weights: RMSNorm has a scale, LayerNorm a scale and a bias.
inline CheckedInt norm_weight_count(const ModelSpec& m, CheckedInt width) {
  return CheckedInt(m.normalization == Normalization::kLayerNorm ? 2 : 1) * width;
}

// Bytes of the 1-byte mask a bias-dropout-add keeps for its [s/TP, b, h] output
// (fused_bias_dropout.py), zero without hidden dropout.
inline CheckedInt bda_dropout_mask_bytes(const BlockContext& ctx) {
  return ctx.hidden_dropout > 0 ? CheckedInt(ctx.local_tokens) * ctx.model.hidden_size : CheckedInt(0);
}

// The dataloader's attention mask a micro-batch keeps until its backward
// (--create-attention-mask-in-dataloader): core/utils.py get_batch_on_this_tp_rank puts a bool
// [b, 1, s, s] on the GPU of the first and last pipeline stages (the chunks of the embedding and
// the loss: training/utils is_first_or_last_pipeline_stage), get_batch_on_this_cp_rank slices it
// to [b, 1, s/CP, s] (index_select: a new tensor), and the model hands it to every layer. The
// recompute checkpoints keep their inputs, the mask among them: full recompute
// (transformer_block.py _checkpointed_forward, tensor_parallel.checkpoint) on a chunk with a
// recomputed layer, and `core_attn` recompute (attention.py _checkpointed_attention_forward).
// Without them nothing keeps it after the forward. One tensor per micro-batch, whatever the
// number of layers; ctx.tokens x s bytes.
inline CheckedInt dataloader_attention_mask_bytes(const BlockContext& ctx) {
  const TrainingSetup& s = ctx.setup;
  if (!s.create_attention_mask) return 0;
  const auto& rc = s.recompute;
  const bool full =
      rc.granularity == RecomputeGranularity::kFull && (rc.method == RecomputeMethod::kUniform || rc.num_layers > 0);
  const bool core_attn = rc.granularity == RecomputeGranularity::kSelective && rc.has(kRecomputeCoreAttn);
  if (!full && !core_attn) return 0;
  return CheckedInt(ctx.tokens) * s.seq_length;
}

// Whether a gated MLP's activation runs in one of Megatron-LM's fused kernels, which keep only
// their input (fc1's output): mlp.py MLP.forward takes bias_swiglu_impl for SwiGLU
// (--no-bias-swiglu-fusion turns it off) and bias_geglu_impl for a gated F.gelu
// (--no-bias-gelu-fusion, which arguments.py also turns off without --add-bias-linear). The routed
// experts (experts.py TEGroupedMLP and SequentialMLP, which scale by the routing probabilities)
// fuse SwiGLU and a gated quick_gelu (weighted_bias_quick_geglu_impl, fused_bias_geglu.py, which
// keeps fc1's output, the bias and the probabilities as weighted_bias_swiglu_impl does), under
// bias_activation_fusion: --bias-gelu-fusion for anything but SwiGLU (argument_utils.py), which
// arguments.py turns off without --add-bias-linear. Unfused, glu() = act(x_glu) * x_linear also keeps
// act(x_glu) for the product. (A dense or shared-expert quick-GEGLU under that fusion is refused:
// MLP.forward raises "Only support fusion of gelu and swiglu".)
inline bool gated_activation_fused(const BlockContext& ctx, bool routed_experts) {
  const auto& m = ctx.model;
  if (m.activation == "silu" || m.activation == "swish") return ctx.setup.bias_swiglu_fusion;
  if (m.activation == "quick_gelu") return routed_experts && m.add_bias_linear && ctx.setup.bias_gelu_fusion;
  return !routed_experts && m.activation == "gelu" && m.add_bias_linear && ctx.setup.bias_gelu_fusion;
}

// Whether Megatron-LM's MLP.forward (dense MLPs and shared experts, mlp.py) refuses the model's gated
// activation: under bias_activation_fusion it fuses only gelu and SwiGLU and raises for a
// quick-GEGLU (no per-token scale there).
inline bool mlp_refuses_fused_activation(const BlockContext& ctx) {
  const auto& m = ctx.model;
  return m.activation == "quick_gelu" && m.gated_linear_unit && m.add_bias_linear && ctx.setup.bias_gelu_fusion;
}

// The [tokens, F] tensors glu() keeps beyond act(x_glu) where no fused kernel runs it (mlp.py
// MLP.forward, experts.py bias_act_func): with activation_func_clamp_value, x_glu.clamp() is a new
// tensor the activation keeps and the product keeps the clamped x_linear (both had been views of
// fc1's output); with glu_linear_offset alone, the product keeps x_linear + offset.
inline int unfused_glu_extra_tensors(const ModelSpec& m) {
  const bool clamp = m.activation_clamp_value > 0;
  return (clamp ? 1 : 0) + (clamp || m.glu_linear_offset != 0 ? 1 : 0);
}

// Key length the unfused attention scores of one CP rank span.
inline CheckedInt attention_key_length(const BlockContext& ctx) { return CheckedInt(ctx.setup.seq_length) / ctx.cp; }

// Bytes per element of the unfused [b, heads/TP, s, s] score tensors kept for backward
// (dot_product_attention.py): softmax output, plus dropout mask (1 B) and output with dropout.
inline CheckedInt unfused_score_bytes_per_element(const BlockContext& ctx, CheckedInt heads_per_rank) {
  const CheckedInt dropout = ctx.attention_dropout > 0 ? CheckedInt(1) + ctx.act_bytes : CheckedInt(0);
  // Megatron's FusedScaleMaskSoftmax (fusions/fused_softmax.py) falls back to torch softmax when
  // --no-masked-softmax-fusion is given or the fused kernel does not take the shape
  // (is_kernel_available: 16 < s_k <= 4096, s_q and s_k divisible by 4, b * heads divisible by 4).
  // With softmax_in_fp32 (--attention-softmax-in-fp32, forced by
  // --apply-query-key-layer-scaling) forward_torch_softmax then keeps the fp32 softmax output,
  // and without dropout the 16-bit cast of it too, which the bmm with V keeps.
  const std::int64_t sk = ctx.setup.seq_length / ctx.cp;
  const bool kernel = ctx.setup.masked_softmax_fusion && 16 < sk && sk <= 4096 && sk % 4 == 0 &&
                      (ctx.setup.micro_batch_size * heads_per_rank.value()) % 4 == 0;
  if (!ctx.setup.transformer_engine && ctx.act_bytes == 2 && ctx.setup.attention_softmax_in_fp32 && !kernel)
    return CheckedInt(4) + (ctx.attention_dropout > 0 ? dropout : CheckedInt(ctx.act_bytes));
  return CheckedInt(ctx.act_bytes) + dropout;
}

// Transformer Engine's FlashAttention (attention/dot_product_attention/backends.py,
// FlashAttention.forward) runs flash-attn on [b, s, n, d]: Megatron-LM's [s, b, n, d] Q, K and V
// become contiguous transposed copies (the ones flash-attn saves; the originals are freed), and
// the output, which flash-attn saves as it wrote it, [b, s, n, d], is returned as a contiguous
// [s, b, n * d] copy, the tensor linear_proj then saves. With one sequence per micro-batch both
// transposes are views already contiguous (no copy); cuDNN fused attention works on [s, b, n, d]
// as it is. `output_bytes`: one attention output of a micro-batch; returns the bytes of the second
// copy both keep (0 where there is none). The caller decides whether both are kept.
inline CheckedInt flash_attn_output_copy_bytes(const BlockContext& ctx, CheckedInt output_bytes) {
  if (ctx.setup.attention_backend != AttentionBackend::kFlash || ctx.setup.micro_batch_size <= 1) return 0;
  return output_bytes;
}

// Ulysses context parallelism (attention/dot_product_attention/context_parallel.py,
// AttnFuncWithCPAndQKVOA2A, and the a2a part of a2a+p2p in AttnFuncWithCPAndKVP2P) runs the
// kernel on head shards of the whole sequence: it saves the kernel's head-sharded output for its
// backward (out_part, before flash_attn_a2a_communicate sends it back) and returns a new
// sequence-sharded one, the tensor linear_proj then saves. The p2p ring and the all-gather
// exchange return the tensor they save. `output_bytes`: one attention output of a micro-batch on
// this CP rank; returns the bytes of the second one (0 where there is none). The caller decides
// whether both are kept.
inline CheckedInt a2a_context_parallel_output_copy_bytes(const BlockContext& ctx, CheckedInt output_bytes) {
  const CpCommType t = ctx.setup.cp_comm_type;
  if (ctx.cp <= 1 || (t != CpCommType::kA2A && t != CpCommType::kA2AP2P)) return 0;
  return output_bytes;
}

// Megatron's own DotProductAttention (--transformer-impl local) computes the raw scores with
// baddbmm into the global memory buffer (dot_product_attention.py, get_tensor(..., "mpu")):
// [b * n/TP, s, s_k] in the activation dtype, allocated once and kept. TE's unfused attention
// allocates its scores per call instead. Returns 0 where no such buffer exists.
inline CheckedInt local_attention_score_buffer(const BlockContext& ctx, CheckedInt heads_per_rank,
                                               CheckedInt key_length) {
  if (ctx.setup.transformer_engine || fused_kernel_attention(ctx.setup.attention_backend)) return 0;
  return CheckedInt(ctx.act_bytes) * ctx.tokens * heads_per_rank * key_length;
}

// What Transformer Engine's context-parallel attention holds at its busiest moment beyond the
// gradients of Q, K and V that a block without CP already counts in its backward transient
// (attention/dot_product_attention/context_parallel.py). q, kv and o are the bytes of this CP
// rank's Q, K+V and output. The tensors saved for backward are the same as without CP (the p2p
// path saves the last KV it received instead of K and V; a2a saves the exchanged shards).
// Zero without CP or with unfused attention (which refuses CP).
inline CheckedInt context_parallel_attention_transient(const BlockContext& ctx, CheckedInt q, CheckedInt kv,
                                                       CheckedInt o) {
  if (ctx.cp <= 1 || !fused_kernel_attention(ctx.setup.attention_backend)) return 0;
  const CheckedInt cp = ctx.cp;
  // AttnFuncWithCPAndKVP2P.backward: dq_buffer (one Q) and two [2, K+V] ring buffers that carry
  // KV and dKV; the per-step dq_/dk_/dv_ are the gradients already counted. Its forward holds
  // two KV ring buffers and the cp per-step outputs (out_per_step) until the final correction;
  // whichever is larger.
  const CheckedInt p2p_backward = q + 4 * kv, p2p_forward = 2 * kv + cp * o;
  const CheckedInt p2p = std::max(p2p_backward.value(), p2p_forward.value() - (q + kv).value());
  // AttnFuncWithCPAndKVAllGather.backward: dk/dv of the whole sequence (zeros, cp x KV) and the
  // re-gathered k_ag/v_ag (cp x KV).
  const CheckedInt all_gather = 2 * cp * kv;
  // AttnFuncWithCPAndQKVOA2A.backward: dout exchanged by all-to-all (one O) and dq/dk/dv
  // exchanged back (one Q + KV) next to the kernel's own.
  const CheckedInt a2a = o + q + kv;
  switch (ctx.setup.cp_comm_type) {
    case CpCommType::kP2P: return p2p;
    case CpCommType::kAllGather: return all_gather;
    case CpCommType::kA2A: return a2a;
    case CpCommType::kA2AP2P: return p2p + a2a;  // the a2a exchange inside, the ring across
  }
  return p2p;
}

// What AttnFuncWithCPAndKVP2P.forward allocates on its second stream (context_parallel.py: step
// i runs under torch.cuda.stream(flash_attn_streams[i % 2]), flash_attn_streams[1] being
// cp_stream), on the CP rank whose steps are all whole (the last: every step after the first
// attends its whole chunk of queries, "lower-triangle"). Each odd step i allocates there the
// buffer that receives the next step's K and V (p2p_comm_buffers[i + 1], when i < cp - 1; kv
// bytes), its partial output (out_per_step[i], o bytes) and its softmax statistics
// (softmax_lse_per_step[i], fp32 per head and query: lse bytes); all live until the forward
// returns. The a2a+p2p exchange runs the same ring (over the whole CP group, as the transient
// above takes it); the all-gather and a2a exchanges use the main stream.
inline void add_context_parallel_side_stream(const BlockContext& ctx, BlockActivations& out, CheckedInt kv,
                                             CheckedInt o, CheckedInt lse) {
  if (ctx.cp <= 1 || !fused_kernel_attention(ctx.setup.attention_backend)) return;
  if (ctx.setup.cp_comm_type != CpCommType::kP2P && ctx.setup.cp_comm_type != CpCommType::kA2AP2P) return;
  const std::int64_t odd_steps = ctx.cp / 2;       // i = 1, 3, ... below cp
  const std::int64_t receives = (ctx.cp - 1) / 2;  // odd i below cp - 1
  if (receives > 0) out.side_stream.push({"context_parallel/kv_receive_buffer", kv.value(), receives});
  out.side_stream.push({"context_parallel/out_per_step", o.value(), odd_steps});
  out.side_stream.push({"context_parallel/softmax_lse_per_step", lse.value(), odd_steps});
}

// Transformer Engine's Ulysses exchange (--cp-comm-type a2a: context_parallel.py
// AttnFuncWithCPAndQKVOA2A, flash_attn_a2a_communicate) finishes every all-to-all on cp_stream:
// before the kernel it reorders each of Q, K and V there (reorder_seq_chunks_for_a2a_before_attn,
// an index_select: the tensors the kernel saves), after it makes the output it returns to
// linear_proj contiguous there, and in backward it reorders dout there and makes dq, dk and dv
// contiguous there. PyTorch's caching allocator serves a stream from that stream's blocks only,
// so these live in a pool of their own (ActTerm::side_stream for the saved ones). The hierarchical
// a2a+p2p exchange is not reported (its ring keeps other tensors on the same stream).
inline bool a2a_context_parallel_stream(const BlockContext& ctx) {
  return ctx.cp > 1 && fused_kernel_attention(ctx.setup.attention_backend) &&
         ctx.setup.cp_comm_type == CpCommType::kA2A;
}

// Marks the saved terms from index `first` on as allocated on the block's own stream
// (ActTerm::side_stream): call it with out.saved.size() taken before adding them.
inline void mark_side_stream(BlockActivations& out, std::size_t first) {
  for (std::size_t i = first; i < out.saved.size(); ++i) out.saved.begin()[i].side_stream = true;
}

// What the Ulysses exchange allocates on cp_stream beyond the saved terms a block marks (q, k, v
// and o: one micro-batch's bytes on this CP rank, each tensor). `core_recomputed`: core_attn
// recompute, whose checkpoint keeps the exchange's inputs on the main stream and runs the forward
// again in backward (Q, K, V and the output on cp_stream once more); `output_saved`: linear_proj
// keeps the returned output (marked by the caller), else it goes when the forward returns.
inline void add_a2a_context_parallel_stream(const BlockContext& ctx, BlockActivations& out, CheckedInt q, CheckedInt k,
                                            CheckedInt v, CheckedInt o, bool core_recomputed, bool output_saved) {
  if (!a2a_context_parallel_stream(ctx)) return;
  if (!output_saved) out.side_stream.push({"context_parallel/a2a_output", o.value(), 1});
  if (core_recomputed) {
    out.side_stream_backward.push({"context_parallel/a2a_q_recomputed", q.value(), 1});
    out.side_stream_backward.push({"context_parallel/a2a_k_recomputed", k.value(), 1});
    out.side_stream_backward.push({"context_parallel/a2a_v_recomputed", v.value(), 1});
    if (!output_saved) out.side_stream_backward.push({"context_parallel/a2a_output_recomputed", o.value(), 1});
  }
  out.side_stream_backward.push({"context_parallel/a2a_dout", o.value(), 1});
  out.side_stream_backward.push({"context_parallel/a2a_dq", q.value(), 1});
  out.side_stream_backward.push({"context_parallel/a2a_dk", k.value(), 1});
  out.side_stream_backward.push({"context_parallel/a2a_dv", v.value(), 1});
}

// Adds a parameter term whose per-rank share is total / divisor.
inline void add_param(BlockParams& out, std::string_view name, ParamGroup group, ShardClass shard, CheckedInt total,
                      CheckedInt divisor, CheckedInt active = -1) {
  out.terms.push(
      {name, group, shard, total.value(), (total / divisor).value(), active < 0 ? total.value() : active.value()});
}

// A Transformer Engine linear of the block whose weight one rank holds as [rows, cols]
// (BlockParams::gemm_weights): listed once per distinct shape.
inline void add_gemm_weight(BlockParams& out, ParamGroup group, CheckedInt rows, CheckedInt cols) {
  for (const auto& w : out.gemm_weights)
    if (w.rows == rows.value() && w.cols == cols.value() && w.group == group) return;
  out.gemm_weights.push({group, rows.value(), cols.value()});
}

inline void add_act(BlockActivations& out, std::string_view name, CheckedInt bytes) {
  if (bytes != 0) out.saved.push({name, bytes.value()});
}
// A saved term of a decoder layer's block: `module` is the OffloadModule group whose context
// saves it (0: none), `tensor_elements` the elements of each of its tensors (what activation
// offloading compares with its minimum size).
inline void add_act(BlockActivations& out, std::string_view name, CheckedInt bytes, std::uint32_t module,
                    CheckedInt tensor_elements) {
  if (bytes != 0) out.saved.push({name, bytes.value(), module, tensor_elements.value()});
}

// Marks the saved terms from index `first` on as captured by the partial CUDA-graph scopes
// `scope` (ActTerm::graph_scope): call it with out.saved.size() taken before adding them.
inline void mark_graph_scope(BlockActivations& out, std::size_t first, std::uint32_t scope) {
  for (std::size_t i = first; i < out.saved.size(); ++i) out.saved.begin()[i].graph_scope |= scope;
}

// --- LoRA (TrainingSetup::lora) ----------------------------------------------------------------

// Under LoRA every base weight is frozen (requires_grad False). Transformer Engine's linears then
// keep no input for a weight gradient: linear.py and grouped_linear.py save the input only when
// weight.requires_grad, layernorm_linear.py frees its norm output unless return_layernorm_output
// (which the LoRA wrapper sets on the linears it wraps); Megatron's own linears go through
// LinearWithFrozenWeight, which saves only the weight. The norm inputs stay (their input gradient).
inline bool lora_frozen(const BlockContext& ctx) { return ctx.setup.lora.on(); }
inline bool lora_wraps(const BlockContext& ctx, LoraTarget t) { return ctx.setup.lora.targets_module(t); }

// Where an adapter sits: the linears of a decoder layer's attention or dense MLP, the shared
// experts, or each routed expert.
enum class LoraScope { kLayer, kSharedExperts, kRoutedExperts };

// The names of one adapter's terms (string literals, as terms need).
struct LoraTermNames {
  std::string_view params, input, dropout_output, dropout_mask, a_output;
};
inline LoraTermNames lora_term_names(LoraTarget t, LoraScope scope) {
#define MME_LORA_NAMES(prefix, name)                                                   \
  LoraTermNames {                                                                      \
    "lora_" name, prefix "lora_" name "_input", prefix "lora_" name "_dropout_output", \
        prefix "lora_" name "_dropout_mask", prefix "lora_" name "_a_output"           \
  }
  switch (scope) {
    case LoraScope::kSharedExperts:
      return t == kLoraLinearFc1 ? MME_LORA_NAMES("moe/", "shared_fc1") : MME_LORA_NAMES("moe/", "shared_fc2");
    case LoraScope::kRoutedExperts:
      return t == kLoraLinearFc1 ? MME_LORA_NAMES("moe/", "expert_fc1") : MME_LORA_NAMES("moe/", "expert_fc2");
    case LoraScope::kLayer: break;
  }
  switch (t) {
    case kLoraLinearQkv: return MME_LORA_NAMES("attention/", "linear_qkv");
    case kLoraLinearProj: return MME_LORA_NAMES("attention/", "linear_proj");
    case kLoraLinearFc1: return MME_LORA_NAMES("mlp/", "linear_fc1");
    case kLoraLinearFc2: break;
  }
  return MME_LORA_NAMES("mlp/", "linear_fc2");
#undef MME_LORA_NAMES
}

// The adapter of a linear [in -> out] (Megatron-Bridge's ParallelLinearAdapter, an assumption:
// docs/memory-model.md, "LoRA"): linear_in [in -> r] and linear_out [r -> out]. Beside a
// column-parallel linear, linear_in is a ColumnParallelLinear over r (gather_output) and linear_out
// a ColumnParallelLinear over out; beside a row-parallel one, linear_in is a RowParallelLinear over
// in and linear_out a ColumnParallelLinear over out (gather_output). Either way a rank holds
// r (in + out) / TP. Beside routed experts (`experts` > 0): one adapter per expert, E / EP of them
// on a rank, split over ETP like the experts; a token uses top-k of them.
inline void add_lora_params(const BlockContext& ctx, BlockParams& out, LoraTarget t, LoraScope scope, CheckedInt in,
                            CheckedInt out_features, CheckedInt experts = 0, CheckedInt top_k = 0) {
  if (!lora_wraps(ctx, t)) return;
  const CheckedInt one = CheckedInt(ctx.setup.lora.rank) * (in + out_features);
  const std::string_view name = lora_term_names(t, scope).params;
  if (experts > 0) {
    out.terms.push({name, ParamGroup::kLoraAdapter, ShardClass::kExpert, (experts * one).value(),
                    ((experts / ctx.ep) * one / ctx.etp).value(), (top_k * one).value()});
    return;
  }
  add_param(out, name, ParamGroup::kLoraAdapter, ShardClass::kTensorParallel, one, ctx.tp);
}

// What one adapter keeps for backward per micro-batch (ParallelLinearAdapter.forward; its linears
// are Megatron's own, whose LinearWithGradAccumulationAndAsyncCommunication saves its input, with
// sequence parallelism off in the adapter's config): its input, `rows` x `in_width` elements in the
// activation dtype, unless the block keeps that very tensor already (`input_kept`: counted once);
// dropout at 'pre' keeps its output instead and a 1-byte mask; linear_out keeps linear_in's
// [rows, r] output (gathered over TP); dropout at 'post' keeps a mask over the `out_rows` x
// `out_width` adapter output. The activation between the two is the identity, the alpha / r scale
// keeps nothing.
inline void add_lora_acts(const BlockContext& ctx, BlockActivations& out, LoraTarget t, LoraScope scope,
                          CheckedInt rows, CheckedInt in_width, bool input_kept, CheckedInt out_rows,
                          CheckedInt out_width) {
  if (!lora_wraps(ctx, t)) return;
  const auto& lora = ctx.setup.lora;
  const LoraTermNames n = lora_term_names(t, scope);
  const CheckedInt ab = ctx.act_bytes, in = rows * in_width;
  const bool dropout = lora.dropout > 0;
  if (dropout && lora.dropout_position == LoraDropoutPosition::kPre) {
    add_act(out, n.dropout_output, ab * in, 0, in);
    add_act(out, n.dropout_mask, in, 0, in);
  } else if (!input_kept) {
    add_act(out, n.input, ab * in, 0, in);
  }
  add_act(out, n.a_output, ab * rows * lora.rank, 0, rows * lora.rank);
  if (dropout && lora.dropout_position == LoraDropoutPosition::kPost)
    add_act(out, n.dropout_mask, out_rows * out_width, 0, out_rows * out_width);
}

// --- Costs (BlockCosts) ----------------------------------------------------------------------

// The GEMM FLOPs and weight bytes of a block's forward pass, from its parameter terms: 2 FLOPs
// per weight a token uses (ParamTerm::active; norms run no GEMM) and token of the rank's TP
// share (tokens / TP), routed experts apart; each weight read once per pass, in the GEMMs'
// element size, as the layout shards it (total / TP, replicated whole, experts / (EP x ETP)).
inline void add_gemm_costs(const BlockContext& ctx, const BlockParams& params, BlockCosts& out) {
  const double tokens_per_rank = static_cast<double>(ctx.tokens) / static_cast<double>(ctx.tp);
  const auto wb = static_cast<double>(ctx.weight_bytes);
  for (const auto& t : params.terms) {
    const auto total = static_cast<double>(t.total);
    const bool expert = t.shard == ShardClass::kExpert;
    switch (t.shard) {
      case ShardClass::kTensorParallel: out.weight_bytes += wb * total / static_cast<double>(ctx.tp); break;
      case ShardClass::kReplicated: out.weight_bytes += wb * total; break;
      case ShardClass::kExpert: out.expert_weight_bytes += wb * total / static_cast<double>(ctx.ep * ctx.etp); break;
    }
    if (t.group == ParamGroup::kNorms) continue;
    (expert ? out.expert_flops : out.gemm_flops) += 2 * static_cast<double>(t.active) * tokens_per_rank;
  }
}

// The forward GEMM FLOPs of the terms of one parameter group (what recomputing them costs).
inline double group_gemm_flops(const BlockContext& ctx, const BlockParams& params, ParamGroup group) {
  double active = 0;
  for (const auto& t : params.terms)
    if (t.group == group) active += static_cast<double>(t.active);
  return 2 * active * static_cast<double>(ctx.tokens) / static_cast<double>(ctx.tp);
}

// Bytes one rank sends in a ring all-gather or reduce-scatter of a tensor of `bytes` over n
// ranks: (n - 1) / n of it (an all-reduce is both: twice this).
inline double ring_bytes(double bytes, std::int64_t n) {
  return n > 1 ? bytes * static_cast<double>(n - 1) / static_cast<double>(n) : 0.0;
}

// One forward GEMM of a block on this rank (BlockCosts::gemms): the weight [in -> out] over the
// micro-batch's tokens on the CP rank, split as `split` says. A replicated weight (the router,
// MLA's down projections) reads the block's input as it comes, split over TP under sequence
// parallelism (the rank's local tokens).
inline void add_gemm(const BlockContext& ctx, BlockCosts& out, std::string_view name, double in, double out_features,
                     GemmSplit split, bool high_precision = false) {
  const auto tp = static_cast<double>(ctx.tp);
  const double n = split == GemmSplit::kColumn ? out_features / tp : out_features;
  const double k = split == GemmSplit::kRow ? in / tp : in;
  const auto m = static_cast<double>(split == GemmSplit::kReplicated ? ctx.local_tokens : ctx.tokens);
  out.gemms.push({name, m, n, k, 1, false, high_precision, split});
}

// A routed expert's forward GEMM (experts.py TEGroupedMLP: one grouped GEMM over the E / EP local
// experts), its weight [in -> out] split over ETP (fc1 column-wise, fc2 row-wise). Routing spreads
// the top-k copies of the tokens of the EP x ETP ranks that exchange them (T / TP each) evenly over
// the E experts (balanced routing: what forced balancing gives), so each local expert sees
// T EP ETP k / (TP E) tokens, and the rank's FLOPs are those of expert_flops.
inline void add_expert_gemm(const BlockContext& ctx, BlockCosts& out, std::string_view name, double in,
                            double out_features, bool column) {
  const auto& f = ctx.layer.mlp;
  if (f.num_experts <= 0) return;
  const auto etp = static_cast<double>(ctx.etp), experts = static_cast<double>(f.num_experts);
  const double tokens = static_cast<double>(ctx.tokens) / static_cast<double>(ctx.tp) * static_cast<double>(ctx.ep) *
                        etp * static_cast<double>(f.top_k) / experts;
  const double n = column ? out_features / etp : out_features;
  const double k = column ? in : in / etp;
  out.gemms.push({name, tokens, n, k, experts / static_cast<double>(ctx.ep), true, false});
}

inline void add_collective(BlockCosts& out, std::string_view name, CommGroup group, double forward, double backward) {
  if (forward > 0 || backward > 0) out.collectives.push({name, group, forward, backward});
}

// A transformer block's tensor-parallel traffic (tensor_parallel/mappings.py): the
// [T, h] block input all-gathered and its output reduce-scattered under sequence parallelism,
// or its output all-reduced without it (the input's copy is free); the backward pass mirrors
// the forward one. Either way two ring passes of T x h each way.
inline void add_tp_block_collectives(const BlockContext& ctx, BlockCosts& out, std::string_view name) {
  const double hidden =
      static_cast<double>(ctx.tokens) * static_cast<double>(ctx.model.hidden_size) * static_cast<double>(ctx.act_bytes);
  const double two_passes = 2 * ring_bytes(hidden, ctx.tp);
  add_collective(out, name, CommGroup::kTensor, two_passes, two_passes);
}

// HBM bytes of the memory-bound kernels with which the CP p2p ring merges its cp steps' partial
// results (TE context_parallel.py, AttnFuncWithCPAndKVP2P, sbhd, causal, 16-bit), forward and
// backward together, on the CP rank that merges the most: the last, whose every step covers its
// whole chunk (the others merge half a chunk in some steps, and the ring waits for the slowest).
// Forward, after the loop: flash_attn_fwd_out_correction_init writes the output from the first
// step's (read + write), flash_attn_fwd_out_correction adds each later step's to it (read both,
// write): 2 + 3 (cp - 1) element accesses of the output. Backward: dq the same (dq.copy_, then
// dq.add_ per step); dk and dv (kv_width per token) copied in half at the first step, added in
// half at the cp - 2 middle ones and whole at the last: 1 + 1.5 (cp - 2) + 3. width = the query's
// and output's elements per token (heads x (d_qk + d_v)), kv_width the exchanged K and V's; the
// softmax statistics' corrections (one fp32 per head and token) are left out, 1 / d of these.
// Selective core_attn recompute repeats the forward part: not counted.
inline double cp_ring_correction_bytes(const BlockContext& ctx, double width, double kv_width) {
  if (ctx.cp <= 1) return 0;
  const double tokens = static_cast<double>(ctx.tokens), tp = static_cast<double>(ctx.tp);
  const double ab = static_cast<double>(ctx.act_bytes), cp = static_cast<double>(ctx.cp);
  const double q_and_out = (2 + 3 * (cp - 1)) * tokens * (width / tp);
  const double kv = (1 + 1.5 * (cp - 2) + 3) * tokens * (kv_width / tp);
  return ab * (q_and_out + kv);
}

// Keys per query the attention kernel works through, times two: the sequence length s for causal
// attention (half the keys on average). Under a sliding window of w earlier tokens
// (AttentionSpec::window) flash-attn and cuDNN compute whole 128-key tiles: a block of 128 queries
// spans ceil((w + 128) / 128) tiles of the band, at most the causal count.
inline double attention_keys_times_two(const BlockContext& ctx) {
  const double s = static_cast<double>(ctx.setup.seq_length);
  const std::int64_t w = ctx.layer.attention.window;
  if (w <= 0) return s;
  constexpr double kTile = 128;
  const double band = std::ceil((static_cast<double>(w) + kTile) / kTile) * kTile;
  return std::min(s, 2 * band);
}

// The attention core of one CP rank's queries against the whole causal sequence: width = heads
// x (d_qk + d_v) multiply-adds per query and key, half the keys on average (causal; a sliding
// window's band, attention_keys_times_two), on the rank's heads (heads / TP); `core_attn`
// recompute runs it again. Context parallelism passes each rank's K and V (kv_width elements per
// token, on the rank's heads) around the CP ring once forward and, with their gradients, twice
// backward (TE context_parallel.py, p2p).
inline void add_attention_core_costs(const BlockContext& ctx, double width, double kv_width, BlockCosts& out) {
  const auto tokens = static_cast<double>(ctx.tokens), tp = static_cast<double>(ctx.tp);
  const double core = width * attention_keys_times_two(ctx) * tokens / tp;
  out.attention_flops += core;
  if (ctx.setup.recompute.has(kRecomputeCoreAttn)) out.recompute_flops += core;
  if (ctx.cp > 1) {
    const double ab = static_cast<double>(ctx.act_bytes), cp = static_cast<double>(ctx.cp);
    const double ring = (cp - 1) * tokens * (kv_width / tp) * ab;
    switch (ctx.setup.cp_comm_type) {
      case CpCommType::kAllGather:
        // AttnFuncWithCPAndKVAllGather: K and V all-gathered forward, their gradients
        // reduce-scattered backward.
        add_collective(out, "context_parallel_kv_all_gather", CommGroup::kContext, ring, ring);
        break;
      case CpCommType::kA2A: {
        // AttnFuncWithCPAndQKVOA2A (Ulysses): Q, K and V all-to-all from sequence to head shards
        // before the core and O back after it, forward; their gradients backward. Q and O are
        // `width` together.
        const double a2a = (cp - 1) / cp * tokens * ((width + kv_width) / tp) * ab;
        add_collective(out, "context_parallel_qkvo_all_to_all", CommGroup::kContext, a2a, a2a);
        break;
      }
      default:
        // p2p (and a2a+p2p's ring part): AttnFuncWithCPAndKVP2P passes K and V around the ring
        // forward, K, V and their gradients backward.
        add_collective(out, "context_parallel_kv_ring", CommGroup::kContext, ring, 2 * ring);
        out.elementwise_bytes += cp_ring_correction_bytes(ctx, width, kv_width);
        break;
    }
  }
}

}  // namespace mme
