#include "language_model.hpp"

#include <algorithm>

#include <mme/sdk/block_helpers.hpp>

namespace mme::plugins {

namespace {

// [T, h] in the activation dtype: a hidden-state tensor of one CP rank's micro-batch.
double hidden_bytes(const BlockContext& ctx) {
  return static_cast<double>(ctx.tokens) * static_cast<double>(ctx.model.hidden_size) *
         static_cast<double>(ctx.act_bytes);
}

// VocabParallelEmbedding's TP reduction of its output (tensor_parallel/layers.py): reduce-scattered
// to the sequence-parallel [s/TP, b, h] (backward: all-gather), or all-reduced without sequence
// parallelism (backward: none).
void add_embedding_reduction(const BlockContext& ctx, BlockCosts& out, std::string_view name) {
  const double pass = ring_bytes(hidden_bytes(ctx), ctx.tp);
  if (ctx.sequence_parallel)
    add_collective(out, name, CommGroup::kTensor, pass, pass);
  else
    add_collective(out, name, CommGroup::kTensor, 2 * pass, 0);
}

}  // namespace

// --- embedding ----------------------------------------------------------------------------------

void EmbeddingModel::validate_spec(const ModelSpec&, const LayerSpec&, std::size_t) const {
  // The vocabulary and hidden size are every block's (validate_model_spec checks them).
}

void EmbeddingModel::validate(const BlockContext&) const {
  // The engine pads the vocabulary to a multiple of TP: every layout splits it.
}

void EmbeddingModel::parameters(const BlockContext& ctx, BlockParams& out) const {
  const auto& m = ctx.model;
  const CheckedInt h = m.hidden_size;
  // LanguageModelEmbedding.word_embeddings: VocabParallelEmbedding [V/TP, h] of the padded
  // vocabulary; a checkpoint (and the total) holds the unpadded V rows.
  const CheckedInt total = h * m.vocab_size;
  out.terms.push({"word_embeddings", ParamGroup::kEmbedding, ShardClass::kTensorParallel, total.value(),
                  (CheckedInt(ctx.vocab_local) * h).value(), total.value()});
  // A learned absolute position embedding [max_positions, h], replicated on every TP rank.
  if (m.position_embedding == PositionEmbedding::kLearnedAbsolute)
    add_param(out, "position_embeddings", ParamGroup::kPositionEmbedding, ShardClass::kReplicated,
              h * m.max_position_embeddings, 1);
}

void EmbeddingModel::activations(const BlockContext& ctx, BlockActivations& out) const {
  // The lookup keeps the micro-batch's int64 token ids for backward (embedding backward).
  add_act(out, "embedding/token_ids", CheckedInt(8) * ctx.tokens);
  // Embedding dropout keeps a 1-byte mask of its [s/TP, b, h] output.
  add_act(out, "embedding/dropout_mask", bda_dropout_mask_bytes(ctx));
  // The first stage's dataloader attention mask, kept by the recompute checkpoints.
  add_act(out, "embedding/dataloader_attention_mask", dataloader_attention_mask_bytes(ctx));
  // The lookup's backward: tensor_parallel/layers.py VocabParallelEmbedding.forward runs
  // F.embedding (or weight[masked_input] in deterministic mode), whose backward builds a dense
  // weight gradient [V/TP, h] in the output's dtype (zeros, then the rows added); AccumulateGrad
  // hands it to Megatron's DDP hook (distributed_data_parallel.py _make_backward_post_hook),
  // which adds it into main_grad and drops it. Gradient accumulation fusion does not reach a
  // lookup, so every backward allocates it anew. A frozen embedding (LoRA) gets none.
  if (!lora_frozen(ctx)) out.transient = (ctx.act_bytes * CheckedInt(ctx.vocab_local) * ctx.model.hidden_size).value();
}

void EmbeddingModel::costs(const BlockContext& ctx, BlockCosts& out) const {
  // A lookup: no GEMM; the rows it gathers are activations, not a weight read.
  add_embedding_reduction(ctx, out, "embedding_tp_reduction");
}

// --- output head --------------------------------------------------------------------------------

void OutputHeadModel::validate_spec(const ModelSpec&, const LayerSpec&, std::size_t) const {}

void OutputHeadModel::validate(const BlockContext&) const {}

void OutputHeadModel::parameters(const BlockContext& ctx, BlockParams& out) const {
  const auto& m = ctx.model;
  const CheckedInt h = m.hidden_size;
  // GPTModel.output_layer: ColumnParallelLinear [V/TP, h]. Tied to the word embedding it is no
  // weight of its own when the same stage holds the embedding (pp = 1); a later stage keeps a
  // copy it synchronises with the first (gpt_model.py, shared_embedding_or_output_weight):
  // per rank, not in the model's total.
  if (!(m.tie_embeddings && ctx.pp == 1)) {
    const CheckedInt total = m.tie_embeddings ? CheckedInt(0) : h * m.vocab_size;
    out.terms.push({"output_layer", ParamGroup::kOutputLayer, ShardClass::kTensorParallel, total.value(),
                    (CheckedInt(ctx.vocab_local) * h).value(), total.value()});
  }
  // TransformerBlock.final_layernorm [h], replicated.
  add_param(out, "final_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
}

void OutputHeadModel::activations(const BlockContext& ctx, BlockActivations& out) const {
  const auto& s = ctx.setup;
  const CheckedInt h = ctx.model.hidden_size, T = ctx.tokens, Tl = ctx.local_tokens, ab = ctx.act_bytes;
  const CheckedInt vl = ctx.vocab_local;
  // The final norm keeps its input; the output layer keeps its (sequence-local) input, except
  // frozen under LoRA (layers.py linear_with_frozen_weight: LinearWithFrozenWeight saves the
  // weight only, and gathers an SP input through an ordinary tensor, not the global buffer).
  const bool frozen = lora_frozen(ctx);
  if (frozen)
    add_act(out, "final_norm_input", ab * Tl * h);
  else
    add_act(out, "final_norm_and_output_input", CheckedInt(2) * ab * Tl * h);
  // Megatron-LM's loss paths keep an fp32 [T, V/TP] tensor for backward: the unfused
  // tensor_parallel/cross_entropy.py and the fused native fusions/fused_cross_entropy.py
  // (calculate_logits_max: logits.float(); the softmax saved) alike.
  // Transformer Engine's parallel_cross_entropy (--cross-entropy-fusion-impl te) in the releases
  // the measured containers run (TE 2.11 in the B200 runs): cross_entropy_kernel writes the gradient
  // into the logits themselves, in their dtype, and the autograd function saves them (no copy,
  // no cast back). Newer TE (the reference snapshot, triton/cross_entropy.py
  // cross_entropy_forward) writes an fp32 grad_input beside the logits instead: the upper bound
  // covers it (te_loss_fp32_gradient_bytes). The measured B200 runs at 32k-128k tokens per rank
  // settle it: with the fp32 copy the estimate was 2.4-3.1 GiB over at 128k, in place within 0.4 %.
  const bool te_loss = s.cross_entropy_fusion && s.cross_entropy_te;
  if (te_loss)
    add_act(out, "logits_with_gradient", ab * T * vl);
  else
    add_act(out, "logits_fp32_softmax", CheckedInt(4) * T * vl);
  // ...while the bf16 logits are still alive (forward), and the bf16 cast of the fp32 logits
  // gradient (backward): one more 2-byte copy. TE's in-place loss has neither.
  CheckedInt transient = te_loss ? ab * T * h : ab * T * vl;  // TE: the layer's input gradient at least
  if (s.cross_entropy_fusion && !s.cross_entropy_te) {
    // The native fused path runs calculate_predicted_logits through jit_fuser (torch.compile,
    // megatron/core/jit.py): the compiled graph applies the in-place `-= max` and `exp(out=)` to
    // its fp32 input by computing the result into a new buffer and copying it back, so the fp32
    // logits exist twice next to the bf16 ones.
    transient = std::max(transient, (ab + 4) * T * vl);
  }
  if (!frozen) {
    // The output layer's backward (tensor_parallel/layers.py
    // LinearWithGradAccumulationAndAsyncCommunication.backward): autograd has cast the loss's
    // fp32 gradient to the logits' dtype and freed it (the saved fp32 tensor above); the layer
    // holds that gradient, its input's gradient [T, h] and a weight gradient [V/TP, h] in the
    // activation dtype, a new tensor in every backward (the placeholder of gradient
    // accumulation fusion, torch.empty in core_r0.14, or the real gradient without it).
    const CheckedInt held = ab * T * vl + ab * vl * h + ab * T * h, freed = CheckedInt(4) * T * vl;
    if (te_loss) {
      // The saved logits are the gradient: the layer adds its input's gradient, then the weight
      // gradient (the order the replay of reserved memory allocates them in).
      transient = ab * T * h + ab * vl * h;
      out.transient_parts.push({"output_layer_input_gradient", (ab * T * h).value()});
      out.transient_parts.push({"output_layer_weight_gradient", (ab * vl * h).value()});
    } else if (held > freed) {
      transient = std::max(transient, held - freed);
    }
  }
  out.transient = transient.value();
  // The last stage's dataloader attention mask, kept by the recompute checkpoints (the first
  // stage's embedding counts it when one stage holds both). The engine counts this block's saved
  // tensors once per loss (1 + MTP depths) where the mask is one tensor: with MTP it is left out
  // (at most b x s^2 / CP bytes under).
  if (ctx.pp > 1 && ctx.model.mtp_num_layers == 0)
    add_act(out, "dataloader_attention_mask", dataloader_attention_mask_bytes(ctx));
  // Megatron's own ColumnParallelLinear (the output layer) all-gathers its SP input into the
  // persistent global memory buffer (parallel_state.get_global_memory_buffer).
  if (ctx.sequence_parallel && !frozen) out.global_buffer = (ab * T * h).value();
  if (ctx.sequence_parallel && frozen) out.transient = (transient + ab * T * h).value();
  if (s.defer_embedding_wgrad) {
    // --defer-embedding-wgrad-compute (tensor_parallel/layers.py, gpt_model.py): the output layer
    // keeps each micro-batch's input and logits gradient in embedding_activation_buffer /
    // grad_output_buffer until the pipeline flush (schedules.py finish_embedding_wgrad_compute),
    // for up to --wgrad-deferral-limit of them.
    const std::int64_t all = s.num_micro_batches > 0 ? s.num_micro_batches : ctx.pp;
    const std::int64_t k = s.wgrad_deferral_limit > 0 ? std::min(s.wgrad_deferral_limit, all) : all;
    out.held_for_step.push({"deferred_output_wgrad_buffers", (CheckedInt(k) * ab * (T * vl + Tl * h)).value()});
  }
}

void OutputHeadModel::costs(const BlockContext& ctx, BlockCosts& out) const {
  // The output GEMM [T, h] x [h, V/TP] reads the whole [V/TP, h] weight, tied or not.
  const double h = static_cast<double>(ctx.model.hidden_size), vl = static_cast<double>(ctx.vocab_local);
  out.gemm_flops = 2 * static_cast<double>(ctx.tokens) * h * vl;
  out.weight_bytes = static_cast<double>(ctx.weight_bytes) * h * vl;
  // Megatron-LM's own ColumnParallelLinear (gpt_model.py output_layer), not a TE linear: in the
  // parameters' dtype under FP8 recipes too.
  out.gemms.push({"output_layer", static_cast<double>(ctx.tokens), vl, h, 1, false, true});
  // The loss's memory-bound kernels over the [T, V/TP] logits, bytes per logit forward and
  // backward, standing for the fp32 tensor activations() keeps (ab: the logits' dtype; at 4 bytes
  // .float() and the cast back copy nothing):
  const auto& s = ctx.setup;
  const double ab = static_cast<double>(ctx.act_bytes), cast = ctx.act_bytes == 4 ? 0.0 : 1.0;
  double per_logit = 0;
  if (s.cross_entropy_fusion && s.cross_entropy_te) {
    // TE's parallel_cross_entropy (pytorch/triton/cross_entropy.py), as activations() takes it
    // (TE 2.11): online_softmax_kernel reads the logits, cross_entropy_kernel reads them
    // again and writes the gradient over them; backward, element_mul_kernel scales it in place by
    // the per-token loss gradient. No cast.
    per_logit = ab + 2 * ab + 2 * ab;
  } else if (s.cross_entropy_fusion) {
    // fusions/fused_cross_entropy.py, each jit_fuser function one compiled kernel:
    // calculate_logits_max (.float() and the max in one pass), calculate_predicted_logits and
    // calculate_cross_entropy_loss (in place on their fp32 input: computed into a new buffer and
    // copied back, 16 bytes each), calculate_gradients (the scaled softmax written back, and its
    // cast to the logits' dtype).
    per_logit = (cast > 0 ? ab + 4 : 4) + 16 + 16 + 8 + cast * ab;
  } else {
    // tensor_parallel/cross_entropy.py, one kernel per op: .float(), max, -= max, exp, sum and
    // div_ forward; mul_ and autograd's cast to the logits' dtype backward.
    per_logit = cast * (ab + 4) + 4 + 8 + 8 + 4 + 8 + 8 + cast * (4 + ab);
  }
  const double logits = static_cast<double>(ctx.tokens) * vl;
  out.elementwise_bytes = per_logit * logits;
  out.elementwise_saved_bytes = (s.cross_entropy_fusion && s.cross_entropy_te ? ab : 4) * logits;
  // Column-parallel: the SP input all-gathered (backward: its gradient reduce-scattered), or,
  // without SP, the input's gradient all-reduced in backward.
  const double pass = ring_bytes(hidden_bytes(ctx), ctx.tp);
  if (ctx.sequence_parallel)
    add_collective(out, "output_layer_input", CommGroup::kTensor, pass, pass);
  else
    add_collective(out, "output_layer_input", CommGroup::kTensor, 0, 2 * pass);
}

// --- MTP projection -----------------------------------------------------------------------------

void MtpProjectionModel::validate_spec(const ModelSpec&, const LayerSpec&, std::size_t) const {}

void MtpProjectionModel::validate(const BlockContext&) const {}

void MtpProjectionModel::parameters(const BlockContext& ctx, BlockParams& out) const {
  const auto& m = ctx.model;
  const CheckedInt h = m.hidden_size;
  // MultiTokenPredictionLayer: enorm and hnorm (the embedding's and the hidden states' norms)...
  add_param(out, "enorm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
  add_param(out, "hnorm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
  // ... eh_proj, a column-parallel [2h -> h] (no bias) ...
  add_param(out, "eh_proj", ParamGroup::kMtp, ShardClass::kTensorParallel, CheckedInt(2) * h * h, ctx.tp);
  add_gemm_weight(out, ParamGroup::kMtp, h / ctx.tp, CheckedInt(2) * h);
  // ... and the depth's own final layernorm.
  add_param(out, "final_norm", ParamGroup::kNorms, ShardClass::kReplicated, norm_weight_count(m, h), 1);
}

void MtpProjectionModel::activations(const BlockContext& ctx, BlockActivations& out) const {
  const CheckedInt h = ctx.model.hidden_size, Tl = ctx.local_tokens, ab = ctx.act_bytes;
  // The depth embeds the shifted token ids again and keeps them for the embedding's backward.
  add_act(out, "mtp/token_ids", CheckedInt(8) * ctx.tokens);
  // enorm and hnorm keep their inputs and outputs (4 x [s/TP, b, h]), eh_proj its concatenated
  // [s/TP, b, 2h] input, and the depth's final norm its input and output (2 more).
  add_act(out, "mtp/norms_and_eh_proj", ab * Tl * h * (4 + 2 + 2));
}

void MtpProjectionModel::costs(const BlockContext& ctx, BlockCosts& out) const {
  const double h = static_cast<double>(ctx.model.hidden_size), tp = static_cast<double>(ctx.tp);
  // eh_proj [T, 2h] x [2h, h/TP].
  out.gemm_flops = 2 * static_cast<double>(ctx.tokens) * 2 * h * h / tp;
  out.weight_bytes = static_cast<double>(ctx.weight_bytes) * 2 * h * h / tp;
  add_gemm(ctx, out, "eh_proj", 2 * h, h, GemmSplit::kColumn);
  // The re-embedding's TP reduction; eh_proj's input [T, 2h] all-gathered under SP (backward:
  // reduce-scatter; without SP the input gradient's all-reduce), and its [T, h/TP] output
  // gathered over TP (gather_from_tensor_model_parallel_region; backward: a split).
  add_embedding_reduction(ctx, out, "mtp_embedding_tp_reduction");
  const double input = ring_bytes(2 * hidden_bytes(ctx), ctx.tp);
  if (ctx.sequence_parallel)
    add_collective(out, "eh_proj_input", CommGroup::kTensor, input, input);
  else
    add_collective(out, "eh_proj_input", CommGroup::kTensor, 0, 2 * input);
  add_collective(out, "eh_proj_output_gather", CommGroup::kTensor, ring_bytes(hidden_bytes(ctx), ctx.tp), 0);
}

void register_language_model(Registrar& registry) {
  registry.add_layer_model(std::make_shared<EmbeddingModel>());
  registry.add_layer_model(std::make_shared<OutputHeadModel>());
  registry.add_layer_model(std::make_shared<MtpProjectionModel>());
}

}  // namespace mme::plugins
