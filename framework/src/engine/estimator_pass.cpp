// One pass of the estimate in named steps: prepare_pass resolves the layout and evaluates each
// layer kind once; per pipeline stage, stage_layers adds up its layers' parameters and the
// activations of its micro-batches in flight, and estimate_stage its static memory and phases.
// Each memory term names, in one comment line, the Megatron-LM behaviour it models.
#include <algorithm>
#include <optional>

#include <fmt/core.h>

#include "mme/sdk/block_helpers.hpp"
#include "mme/sdk/error.hpp"

#include "activation_offload.hpp"
#include "communication_buffers.hpp"
#include "cuda_graphs.hpp"
#include "estimator_internal.hpp"
#include "low_precision.hpp"
#include "sharded_data_parallel.hpp"
#include "weight_gradients.hpp"

namespace mme {

namespace {

// "activations/<term>": the component name of a block's activation term.
std::string block_act_name(std::string_view term) { return fmt::format("activations/{}", term); }

void add_params(TypeEval& e, const BlockParams& p, const TrainingSetup& s) {
  const bool all_train = !s.lora.on();  // is_trainable, once per block
  for (const auto& t : p.terms) {
    switch (t.shard) {
      case ShardClass::kTensorParallel: e.tp_params += t.per_rank; break;
      case ShardClass::kReplicated: e.rep_params += t.per_rank; break;
      case ShardClass::kExpert: e.exp_params += t.per_rank; break;
    }
    if (is_fp8_gemm_weight(t)) e.fp8_params += t.per_rank;
    if (all_train || is_trainable(t, s)) (t.shard == ShardClass::kExpert ? e.train_exp : e.train_dense) += t.per_rank;
  }
}

}  // namespace

void add_block_params(LmBlockEval& e, const BlockParams& p, const TrainingSetup& s) {
  for (const auto& t : p.terms) {
    // The blocks around the layers hold no expert-sharded parameters (validate_lm_block).
    (t.shard == ShardClass::kReplicated ? e.rep : e.tp) += t.per_rank;
    if (is_fp8_gemm_weight(t)) e.fp8 += t.per_rank;
    if (is_trainable(t, s)) e.train += t.per_rank;
  }
}

namespace {

// One layer kind under the pass's layout: its parameters, what it keeps per micro-batch and its
// busiest moment, into `e` (a TypeEval holds fixed-size term lists: filled in place, not copied).
// `blocks`: the pass's layout, or the bf16 one of --first-last-layers-bf16 (then no GEMM is quantized).
void evaluate_layer_type(const Pass& ps, const LayerType& lt, bool is_mtp, TypeEval& e,
                         const BlockLayout* blocks = nullptr) {
  const auto& s = ps.s;
  const auto& options = ps.options;
  const std::int64_t wgrad_bytes = ps.wgrad_bytes;
  const BlockContext ctx = make_context(ps.im.model, blocks ? *blocks : ps.blocks, lt.spec, is_mtp);

  call_plugin("layer model parameters", [&] {
    lt.attention->parameters(ctx, e.attn_params);
    lt.mlp->parameters(ctx, e.mlp_params);
  });
  add_params(e, e.attn_params, s);
  add_params(e, e.mlp_params, s);
  if (blocks) {
    e.fp8_params = 0;  // built outside the quantized model context: bf16 weights, no copies
  } else if (ps.fp8) {
    const std::int64_t experts = lt.spec.mlp.num_experts / std::max<std::int64_t>(ctx.ep, 1);
    e.gemms = te_gemm_count(e.attn_params, experts) + te_gemm_count(e.mlp_params, experts);
  }
  call_plugin("layer model activations", [&] {
    lt.attention->activations(ctx, e.attn_acts);
    lt.mlp->activations(ctx, e.mlp_acts);
  });
  e.saved = CheckedInt(sum_saved(e.attn_acts)) + sum_saved(e.mlp_acts);
  for (const auto* acts : {&e.attn_acts, &e.mlp_acts})
    for (const auto& term : acts->saved) e.large_saved += term.bytes > kLargeAlloc ? 1 : 0;
  if (options.components)
    for (const auto* acts : {&e.attn_acts, &e.mlp_acts})
      for (const auto& term : acts->saved)
        e.named_saved.emplace_back(fmt::format("activations/{}", term.name), term.bytes);
  e.transient = std::max(e.attn_acts.transient, e.mlp_acts.transient);
  if (!s.gradient_accumulation_fusion || !s.transformer_engine) {
    // Without gradient accumulation fusion TE returns each weight gradient as a new tensor
    // in the parameter dtype, which the DDP backward hook adds into main_grad and frees
    // (distributed_data_parallel.py _make_backward_post_hook); Megatron's own linears
    // (--transformer-impl local) hand back a new placeholder of the weight's shape even with it
    // (tensor_parallel/layers.py, core_r0.14): the largest GEMM weight of the layer, once, on
    // top of its backward working set.
    CheckedInt largest = 0;
    for (const auto* bp : {&e.attn_params, &e.mlp_params})
      for (const auto& term : bp->terms)
        if ((is_fp8_gemm_weight(term) || term.group == ParamGroup::kLoraAdapter) && is_trainable(term, s))
          largest = std::max(largest, CheckedInt(term.per_rank));
    e.transient += wgrad_bytes * largest;
  }
  e.global_buffer = std::max(e.attn_acts.global_buffer, e.mlp_acts.global_buffer);
  if (s.cuda_graph.on()) evaluate_layer_graphs(ps, lt.spec, lt.moe, e);
}

// The layers and activations of pipeline rank r: parameters per shard class, what its
// micro-batches in flight keep for backward, its busiest moment and the global buffer.
struct StageLayers {
  CheckedInt tp_params, rep_params, exp_params, fp8_params;
  CheckedInt gemms;                                         // quantized TE GEMMs of the stage (their scaling state)
  CheckedInt train_dense, train_exp;                        // of them, the trained ones (LoRA: the adapters)
  CheckedInt unit_dense, unit_expert, units, largest_unit;  // the decoder (and MTP) layers: FSDP's units
  CheckedInt saved, transient, sp_gather_buffer, large_tensors;
  StageGraphs graphs;         // with CUDA graphs (cuda_graphs.cpp)
  CachedDummyWgrads dummies;  // TE's cached weight-gradient placeholders (weight_gradients.hpp)
};

StageLayers stage_layers(const Pass& ps, std::int64_t r, const std::vector<std::int64_t>& inflight,
                         ComponentSink& comps, StageEstimate& st) {
  // The pass's values under the names the terms below use.
  const auto& v = ps.v;
  const auto& evals = ps.evals;
  const auto& mtp_eval = ps.mtp_eval;
  const auto& part = ps.part;
  const auto& full_recompute = ps.full_recompute;
  const auto& layer_input_bytes = ps.layer_input_bytes;
  const auto& im = ps.im;
  const auto& rc = ps.s.recompute;
  CheckedInt tp_params = 0, rep_params = 0, exp_params = 0, fp8_params = 0, gemms = 0, train_dense = 0, train_exp = 0;
  // The decoder (and MTP) layers' parameters: Megatron-FSDP's units.
  CheckedInt unit_dense = 0, unit_expert = 0, units = 0, largest_unit = 0;
  CheckedInt saved = 0, transient = 0, sp_gather_buffer = 0;
  // The output head's busiest moment and what it keeps per micro-batch (the chunk with the loss).
  CheckedInt head_transient = 0, head_saved = 0;
  CheckedInt large_tensors = 3;  // the transient working set: a few tensors
  StageOffload offload(ps, r);   // activation offloading (activation_offload.cpp)
  const bool graphs_on = ps.s.cuda_graph.on();
  StageGraphs graphs;
  CachedDummyWgrads dummies;
  st.chunks.reserve(static_cast<std::size_t>(v));
  for (std::int64_t vr = 0; vr < v; ++vr) {
    const ChunkLayout& ch = part.at(r, vr);
    const std::int64_t mb = inflight[static_cast<std::size_t>(vr)];
    ChunkEstimate ce;
    ce.vpp_rank = vr;
    ce.first_layer = ch.first_layer;
    ce.num_layers = ch.num_layers;
    ce.mtp_layers = ch.mtp_layers;
    ce.embedding = ch.embedding;
    ce.loss = ch.loss;
    ce.inflight_microbatches = mb;
    CheckedInt chunk_act = 0, chunk_large = 0;
    auto act = [&](std::string_view name, CheckedInt bytes_per_mb) {
      chunk_act += bytes_per_mb;
      if (bytes_per_mb > kLargeAlloc) chunk_large += 1;
      if (comps.enabled()) comps.add(MemoryCategory::kActivations, name, bytes_per_mb * mb);
    };

    // Decoder layers and MTP layers of the chunk, in order.
    const std::int64_t layers_in_chunk = ch.num_layers + ch.mtp_layers;
    CheckedInt max_layer_saved = 0, max_layer_large = 0;
    auto account_layers = [&](const TypeEval& e, CheckedInt n, CheckedInt recomputed) {
      tp_params += n * e.tp_params;
      rep_params += n * e.rep_params;
      exp_params += n * e.exp_params;
      fp8_params += n * e.fp8_params;
      gemms += n * e.gemms;
      train_dense += n * e.train_dense;
      train_exp += n * e.train_exp;
      unit_dense += n * (e.tp_params + e.rep_params);
      unit_expert += n * e.exp_params;
      units += n;
      largest_unit = std::max(largest_unit, e.tp_params + e.rep_params + e.exp_params);
      dummies.add(e.attn_params, ps.s);
      dummies.add(e.mlp_params, ps.s);
      transient = std::max(transient, e.transient);
      sp_gather_buffer = std::max(sp_gather_buffer, e.global_buffer);
      max_layer_saved = std::max(max_layer_saved, e.saved);
      max_layer_large = std::max(max_layer_large, e.large_saved);
      if (graphs_on) graphs.add_layers(ps, e, n, mb);
      const CheckedInt full = n - recomputed;
      if (full > 0) {
        chunk_act += full * e.saved;
        chunk_large += full * e.large_saved;
        if (comps.enabled())
          for (const auto& [name, bytes] : e.named_saved)
            comps.add(MemoryCategory::kActivations, name, full * bytes * mb);
      }
      if (recomputed > 0) {
        act("activations/recompute_layer_inputs", recomputed * layer_input_bytes);
        if (layer_input_bytes > kLargeAlloc) chunk_large += recomputed - 1;  // act() counted one
      }
    };
    // How many layers of this chunk keep only their input (full recompute).
    std::int64_t recompute_left = 0;
    std::int64_t groups = 0;
    if (full_recompute) {
      if (rc.method == RecomputeMethod::kBlock) {
        recompute_left = std::min(rc.num_layers, layers_in_chunk);
      } else {
        recompute_left = layers_in_chunk;
        groups = ceil_div(layers_in_chunk, rc.num_layers).value();
      }
    }
    // --first-last-layers-bf16: the chunk's layers among the model's first and last ones.
    const Bf16LayerRanges bf16 = bf16_layers_in(ps.s, im.model.num_layers, ch.first_layer, ch.num_layers);
    for (std::size_t ti = 0; ti < im.types.size(); ++ti) {
      const std::int64_t n = im.count_in(ti, ch.first_layer, ch.num_layers);
      if (n == 0) continue;
      const std::int64_t n_bf16 = ps.bf16_evals.empty() ? 0
                                                        : im.count_in(ti, bf16.start_first, bf16.start_count) +
                                                              im.count_in(ti, bf16.end_first, bf16.end_count);
      const std::int64_t rec = std::min(n, recompute_left);
      recompute_left -= rec;
      const std::int64_t rec_bf16 = std::min(n_bf16, rec);
      if (n_bf16 > 0) account_layers(ps.bf16_evals[ti], n_bf16, rec_bf16);
      if (n > n_bf16) account_layers(evals[ti], n - n_bf16, rec - rec_bf16);
    }
    if (ch.mtp_layers > 0) {
      const std::int64_t rec = std::min(ch.mtp_layers, recompute_left);
      recompute_left -= rec;
      account_layers(mtp_eval, ch.mtp_layers, rec);
    }
    if (full_recompute && rc.method == RecomputeMethod::kUniform && groups > 0) {
      // Uniform: only each group of N layers keeps its input; the per-layer inputs counted
      // above become one per group.
      const CheckedInt kept = groups * layer_input_bytes;
      const CheckedInt counted = layers_in_chunk * layer_input_bytes;
      act("activations/recompute_layer_inputs", kept - counted);
      // The group re-materialised during backward: N layers of one micro-batch
      // (recompute.py CheckpointFunction.backward).
      transient = std::max(transient, std::min(rc.num_layers, layers_in_chunk) * max_layer_saved);
      large_tensors += std::min(rc.num_layers, layers_in_chunk) * max_layer_large;
    } else if (full_recompute && std::min(rc.num_layers, layers_in_chunk) > 0) {
      // Block: one recomputed layer at a time; with --recompute-num-layers 0 none is recomputed.
      transient = std::max(transient, max_layer_saved);
      large_tensors += max_layer_large;
    }

    // The blocks around the decoder layers on this chunk: their parameters, and what they keep
    // per micro-batch (`n` times: an MTP projection per depth, the output head once more per
    // depth), their busiest moment and the global buffer they gather into.
    auto account_block = [&](const LmBlockEval& b, CheckedInt params_n, CheckedInt acts_n, bool head = false) {
      tp_params += params_n * b.tp;
      rep_params += params_n * b.rep;
      fp8_params += params_n * b.fp8;
      train_dense += params_n * b.train;
      dummies.add(b.params, ps.s);
      for (const auto& term : b.acts.saved) {
        const CheckedInt bytes = acts_n * term.bytes;
        chunk_act += bytes;
        if (bytes > kLargeAlloc) chunk_large += 1;
        if (comps.enabled()) comps.add(MemoryCategory::kActivations, block_act_name(term.name), bytes * mb);
      }
      if (head) {
        head_transient = std::max(head_transient, CheckedInt(b.acts.transient));
        for (const auto& term : b.acts.saved) head_saved += acts_n * term.bytes;
      } else {
        transient = std::max(transient, CheckedInt(b.acts.transient));
        graphs.eager_transient = std::max(graphs.eager_transient, CheckedInt(b.acts.transient));
      }
      sp_gather_buffer = std::max(sp_gather_buffer, CheckedInt(b.acts.global_buffer));
    };
    if (ch.embedding) account_block(ps.embedding, 1, 1);
    if (ch.mtp_layers > 0) account_block(ps.mtp_projection, ch.mtp_layers, ch.mtp_layers);
    if (ch.loss)
      account_block(ps.output_head, 1, CheckedInt(1) + ch.mtp_layers, true);  // main loss + one per MTP depth
    // What the chunk's layers send to the host per micro-batch (activation offloading).
    const StageOffload::Sent sent = offload.chunk(ch, mb, comps);
    chunk_act -= sent.bytes;
    chunk_large -= sent.large_tensors;
    ce.activation_bytes_per_microbatch = chunk_act.value();
    saved += chunk_act * mb;
    large_tensors += chunk_large * mb;
    if (ch.loss) {
      // What the output head holds for the whole step (deferred weight-gradient buffers).
      for (const auto& term : ps.output_head.acts.held_for_step) {
        saved += term.bytes;
        if (comps.enabled()) comps.add(MemoryCategory::kActivations, block_act_name(term.name), term.bytes);
      }
    }
    st.layers += ch.num_layers;
    st.mtp_layers += ch.mtp_layers;
    st.chunks.push_back(ce);
  }
  // The loss and the output layer run last in the forward and first in the backward
  // (gpt_model.py: decoder, then output_layer and compute_language_model_loss): their working set
  // meets every saved tensor, but by the time any other block of that micro-batch runs its
  // backward, autograd has freed what the head kept for it (VocabParallelCrossEntropy's softmax,
  // the output layer's input); in that micro-batch's forward the head has not run yet.
  // The same holds for what runs eagerly next to replayed CUDA graphs (the head is never graphed).
  auto after_head = [&](CheckedInt t) {
    return std::max(head_transient, t > head_saved ? t - head_saved : CheckedInt(0));
  };
  transient = after_head(transient);
  graphs.eager_transient = after_head(graphs.eager_transient);
  // What offloading keeps or brings back on the GPU at the peak, and what the bound adds.
  saved += offload.on_gpu_at_peak(comps);
  st.offload_slack_bytes = offload.bound_slack().value();
  return StageLayers{tp_params, rep_params,       exp_params,    fp8_params, gemms,        train_dense,
                     train_exp, unit_dense,       unit_expert,   units,      largest_unit, saved,
                     transient, sp_gather_buffer, large_tensors, graphs,     dummies};
}

}  // namespace

ElementBytes element_bytes(const TrainingSetup& s) {
  ElementBytes b;
  b.fp8 = quantized_gemms(s);  // FP8 or NVFP4 GEMMs
  // Activations are kept in the training dtype: 2 bytes (bf16/fp16; FP8 GEMM inputs 1), 4 in fp32.
  b.act = s.precision == Precision::kFP32 ? 4 : 2;
  b.linear_input = b.fp8 ? 1 : b.act;
  b.wgrad = s.precision == Precision::kFP32 ? 4 : 2;
  // Bytes per parameter (distributed_optimizer / param_and_grad_buffer.py): the model's
  // parameters in the training dtype (bf16 under FP8), the gradient buffer in --main-grads-dtype
  // (fp32 unless fp16 training).
  b.param_dtype = s.precision == Precision::kFP16   ? DType::kFP16
                  : s.precision == Precision::kFP32 ? DType::kFP32
                                                    : DType::kBF16;
  b.grad_dtype = s.optimizer.main_grads.value_or(s.precision == Precision::kFP16 ? DType::kFP16 : DType::kFP32);
  b.param = dtype_bytes(b.param_dtype);
  b.grad = dtype_bytes(b.grad_dtype);
  return b;
}

TrainingSetup resolve_pass_setup(const ModelSpec& m, const TrainingSetup& requested) {
  if (const auto& n = requested.pipeline.layers_per_virtual_stage) {
    // arguments.py: virtual_pipeline_model_parallel_size = (num_layers // PP) // N.
    if (*n <= 0) throw LayoutError("--num-layers-per-virtual-pipeline-stage must be positive");
    if (requested.parallel.pp <= 1) throw LayoutError("--num-layers-per-virtual-pipeline-stage needs --pp > 1");
    const std::int64_t per_rank = m.num_layers / requested.parallel.pp;
    if (per_rank % *n != 0)
      throw LayoutError(
          fmt::format("{} layers per pipeline rank are not divisible by "
                      "--num-layers-per-virtual-pipeline-stage {}",
                      per_rank, *n));
    TrainingSetup req = requested;
    req.parallel.vpp = per_rank / *n;
    return resolve_setup(std::move(req));
  }
  return resolve_setup(requested);
}

BlockLayout block_layout(const ModelSpec& m, const TrainingSetup& s, AttentionBackend attention, double imbalance) {
  BlockLayout b;
  b.setup = s;
  b.setup.attention_backend = attention;
  b.setup.moe_routing_imbalance = imbalance > 1.0 ? std::optional<double>(imbalance) : std::nullopt;
  const ParallelLayout& par = s.parallel;
  b.tp = par.tp, b.cp = par.cp, b.ep = par.ep, b.etp = effective_etp(par);
  b.sp = sequence_parallel_on(par);
  b.tokens = CheckedInt(s.seq_length) * s.micro_batch_size / b.cp;  // T per CP rank
  b.local_tokens = b.sp ? b.tokens / b.tp : b.tokens;
  const ElementBytes bytes = element_bytes(s);
  b.act_bytes = bytes.act;
  b.linear_input_bytes = bytes.linear_input;
  b.weight_bytes = bytes.fp8 ? 1 : bytes.param;
  b.pp = par.pp;
  b.vocab_local = CheckedInt(padded_vocab_size(m.vocab_size, s.make_vocab_size_divisible_by, b.tp)) / b.tp;
  b.hidden_dropout = s.hidden_dropout.value_or(m.hidden_dropout);
  b.attention_dropout = s.attention_dropout.value_or(m.attention_dropout);
  return b;
}

// Block-level checks (heads, widths by TP/ETP), before the layout as a whole.
void validate_blocks(const EngineTables& im, const BlockLayout& blocks) {
  for (const auto& lt : im.types) {
    const BlockContext ctx = make_context(im.model, blocks, lt.spec, false);
    call_plugin("layer model validate", [&] { lt.attention->validate(ctx); });
    call_plugin("layer model validate", [&] { lt.mlp->validate(ctx); });
  }
  for (const LmBlock* b : {&im.embedding, &im.output_head, &im.mtp_projection}) {
    if (!b->model) continue;
    const BlockContext ctx = make_context(im.model, blocks, *b->layer, b == &im.mtp_projection);
    call_plugin("layer model validate", [&] { b->model->validate(ctx); });
  }
}

namespace {

// A block around the decoder layers under the pass's layout.
void evaluate_lm_block(const Pass& ps, const LmBlock& b, bool is_mtp, LmBlockEval& e) {
  if (!b.model) return;
  const BlockContext ctx = make_context(ps.im.model, ps.blocks, *b.layer, is_mtp);
  call_plugin("layer model parameters", [&] { b.model->parameters(ctx, e.params); });
  call_plugin("layer model activations", [&] { b.model->activations(ctx, e.acts); });
  for (const auto& t : e.params.terms)
    if (t.shard == ShardClass::kExpert)
      throw PluginError(
          fmt::format("layer-memory model '{}' ({}) reports expert-sharded parameters ('{}'), "
                      "which only an MLP block may hold",
                      b.model->kind(), to_string(b.model->role()), t.name));
  add_block_params(e, e.params, ps.s);
}

}  // namespace

Pass prepare_pass(const EngineTables& im, const TrainingSetup& requested, const EstimateOptions& options,
                  const AttentionChoice& choice, AttentionBackend attention, double imbalance, PassKind kind) {
  const ModelSpec& m = im.model;
  Pass ps(im, options, choice);
  ps.s = resolve_pass_setup(m, requested);
  const TrainingSetup& s = ps.s;
  ps.blocks = block_layout(m, s, attention, imbalance);
  const ParallelLayout& par = s.parallel;
  const std::int64_t t = par.tp, c = par.cp;
  ps.p = par.pp;
  ps.h = m.hidden_size;
  const ElementBytes bytes = element_bytes(s);
  ps.fp8 = bytes.fp8;
  ps.vocab = padded_vocab_size(m.vocab_size, s.make_vocab_size_divisible_by, t);
  checked_mul(checked_mul(ps.blocks.tokens.value(), ps.blocks.vocab_local.value(), "logits"), 8, "logits bytes");
  ps.wgrad_bytes = bytes.wgrad;
  ps.param_dtype = bytes.param_dtype, ps.grad_dtype = bytes.grad_dtype, ps.param_b = bytes.param;
  ps.grad_b = bytes.grad;
  // Block-level checks first (heads, widths by TP/ETP), then the layout as a whole.
  validate_blocks(im, ps.blocks);
  if (kind == PassKind::kEstimate) {  // the bound's pass has the same setup, checked already
    validate_setup(m, s);
    validate_activation_offload(m, s);
    validate_cuda_graphs(m, s);
  }
  ps.evals.resize(im.types.size());
  for (std::size_t i = 0; i < im.types.size(); ++i) evaluate_layer_type(ps, im.types[i], false, ps.evals[i]);
  if (has_bf16_layers(s)) {
    // fp8_utils.py get_fp8_context / fp4_utils.py get_fp4_context: nullcontext() for the first and
    // last layers, so their GEMMs and saved inputs stay in the activation dtype.
    BlockLayout bf16 = ps.blocks;
    bf16.linear_input_bytes = bf16.act_bytes;
    bf16.weight_bytes = ps.param_b;
    ps.bf16_evals.resize(im.types.size());
    for (std::size_t i = 0; i < im.types.size(); ++i)
      evaluate_layer_type(ps, im.types[i], false, ps.bf16_evals[i], &bf16);
  }
  if (m.mtp_num_layers > 0) evaluate_layer_type(ps, im.types[im.mtp_type], true, ps.mtp_eval);
  evaluate_lm_block(ps, im.embedding, false, ps.embedding);
  evaluate_lm_block(ps, im.output_head, false, ps.output_head);
  evaluate_lm_block(ps, im.mtp_projection, true, ps.mtp_projection);
  validate_lora(ps);

  ps.part = partition_pipeline(m.num_layers, m.mtp_num_layers, par, s.pipeline);
  ps.v = ps.part.vpp;

  // Full recompute (transformer_block.py _checkpointed_forward): a checkpointed layer keeps
  // only its input hidden states, [s/TP (SP), b, h] per micro-batch.
  const auto& rc = s.recompute;
  const bool full_recompute = rc.granularity == RecomputeGranularity::kFull;
  const CheckedInt layer_input_bytes = ps.blocks.act_bytes * ps.blocks.local_tokens * ps.h;

  // Bytes per parameter (element_bytes) and of the optimizer state.
  const auto& opt = s.optimizer;
  const DType param_dtype = ps.param_dtype, grad_dtype = ps.grad_dtype;
  // Optimizer state bytes per parameter, before sharding.
  // fp32 training needs no separate fp32 master copy of the parameters.
  std::int64_t main_param_b = param_dtype == DType::kFP32 ? 0 : 4, exp_avg_b = 4, exp_avg_sq_b = 4,
               main_grad_copy_b = 0;
  if (opt.precision_aware) {
    // TE FusedAdam master weights: a 16-bit remainder of a bf16 param (store_param_remainders),
    // else the chosen dtype (optimizer/__init__.py, distrib_optimizer.py).
    main_param_b = opt.main_params == DType::kFP32 ? (opt.store_param_remainders && param_dtype == DType::kBF16 ? 2 : 4)
                                                   : dtype_bytes(opt.main_params);
    exp_avg_b = dtype_bytes(opt.exp_avg);
    exp_avg_sq_b = dtype_bytes(opt.exp_avg_sq);
  } else if (grad_dtype != DType::kFP32) {
    // Float16 optimizers copy 16-bit main grads to fp32 (main_param.grad = main_grad.float()).
    main_grad_copy_b = 4;
  }
  if (opt.cpu_offload_fraction > 0 && opt.precision_aware) {
    // HybridDeviceOptimizer(param_update_in_fp32=True) replaces TE FusedAdam's master weights:
    // its own fp32 copy of each 16-bit shard (on the host for the offloaded share) and default
    // fp32 moments, whatever --exp-avg-dtype says; 16-bit gradients become fp32 copies for the
    // GPU share (hybrid_optimizer.py _get_sub_optimizer_param_groups, _set_sub_optimizer_grads).
    main_param_b = param_dtype == DType::kFP32 ? 0 : 4;
    exp_avg_b = 4, exp_avg_sq_b = 4;
    main_grad_copy_b = grad_dtype != DType::kFP32 ? 4 : 0;
  }
  if (opt.name == "sgd") exp_avg_b = 4, exp_avg_sq_b = 0;  // momentum only
  const bool muon = opt.name == "muon";
  const double keep_on_gpu = 1.0 - opt.cpu_offload_fraction;
  const std::int64_t dense_shards = opt.distributed ? par.dp * c / opt.instances : 1;
  const std::int64_t expert_shards = opt.distributed ? par.expert_dp / opt.instances : 1;

  // Framework workspaces that live for the whole run (other_bytes).
  const bool hopper_or_newer = options.compute_capability >= 90;
  // transformer_engine/pytorch/module/base.py get_workspace(): one cuBLAS workspace,
  // 32 MiB + 1 KiB on Hopper and newer, 4 MiB before.
  const std::int64_t te_workspace = !s.transformer_engine ? 0 : hopper_or_newer ? 32 * kMiB + 1024 : 4 * kMiB;
  // PyTorch's own cuBLAS and cuBLASLt workspaces (CublasHandlePool.cpp), one each, sized by
  // CUBLAS_WORKSPACE_CONFIG or the default: 4096 KiB x 8 on Hopper, else 4096 KiB x 2 +
  // 16 KiB x 8. Recent releases give Blackwell the Hopper size too, older ones the small one
  // (the GB200 golden files without CUBLAS_WORKSPACE_CONFIG show both, 48 MiB apart); the
  // estimate takes the larger.
  const std::int64_t torch_workspace = !s.cublas_workspace_config.empty()
                                           ? parse_cublas_workspace_config(s.cublas_workspace_config)
                                       : hopper_or_newer ? 4096 * 1024 * 8
                                                         : 4096 * 1024 * 2 + 16 * 1024 * 8;
  const bool grouped_gemm = im.any_moe && s.moe_grouped_gemm && s.transformer_engine;
  ps.full_recompute = full_recompute, ps.layer_input_bytes = layer_input_bytes;
  ps.main_param_b = main_param_b, ps.exp_avg_b = exp_avg_b, ps.exp_avg_sq_b = exp_avg_sq_b;
  ps.main_grad_copy_b = main_grad_copy_b, ps.muon = muon, ps.keep_on_gpu = keep_on_gpu;
  ps.dense_shards = dense_shards, ps.expert_shards = expert_shards;
  ps.te_workspace = te_workspace, ps.torch_workspace = torch_workspace, ps.grouped_gemm = grouped_gemm;
  return ps;
}

namespace {

LayerCosts layer_costs(const Pass& ps, const LayerType& lt, bool is_mtp) {
  const BlockContext ctx = make_context(ps.im.model, ps.blocks, lt.spec, is_mtp);
  LayerCosts out;
  for (const LayerMemoryModel* block : {lt.attention, lt.mlp}) {
    BlockCosts c;
    call_plugin("layer model costs", [&] { block->costs(ctx, c); });
    out.forward_flops += c.gemm_flops + c.attention_flops + c.expert_flops;
    out.recompute_flops += c.recompute_flops;
    out.weight_bytes += c.weight_bytes + c.expert_weight_bytes;
    auto both = [&](CommGroup g) { return sum_forward_bytes(c, g) + sum_backward_bytes(c, g); };
    out.tp_bytes += both(CommGroup::kTensor);
    out.cp_bytes += both(CommGroup::kContext);
    out.ep_bytes += both(CommGroup::kExpert);
    out.etp_bytes += both(CommGroup::kExpertTensor);
  }
  return out;
}

}  // namespace

// The per-layer-kind breakdown (--verbose, layer_kinds).
void describe_layer_kinds(const Pass& ps, Estimate& est) {
  // The pass's values under the names the terms below use.
  const auto& evals = ps.evals;
  const auto& mtp_eval = ps.mtp_eval;
  const auto& im = ps.im;
  const ModelSpec& m = ps.im.model;
  auto describe = [&](const LayerType& lt, const TypeEval& e, std::int64_t count, bool mtp) {
    LayerKindEstimate k;
    k.attention = lt.spec.attention.kind;
    k.mlp = lt.spec.mlp.kind;
    k.layers = count;
    k.mtp = mtp;
    k.parameters = (e.tp_params + e.rep_params + e.exp_params).value();
    k.activation_bytes_per_microbatch = e.saved.value();
    k.transient_bytes = e.transient.value();
    k.costs = layer_costs(ps, lt, mtp);
    for (const auto* bp : {&e.attn_params, &e.mlp_params})
      for (const auto& term : bp->terms)
        k.components.push_back({fmt::format("parameters/{}", term.name), MemoryCategory::kWeights, term.per_rank});
    for (const auto& [name, bytes] : e.named_saved) k.components.push_back({name, MemoryCategory::kActivations, bytes});
    est.layer_kinds.push_back(std::move(k));
  };
  for (std::size_t ti = 0; ti < im.types.size(); ++ti)
    describe(im.types[ti], evals[ti], im.count_in(ti, 0, m.num_layers), false);
  if (m.mtp_num_layers > 0) describe(im.types[im.mtp_type], mtp_eval, 0, true);
}

namespace {

// The workspaces every stage keeps (other_bytes): Transformer Engine's and PyTorch's cuBLAS
// workspaces, TE grouped GEMM's and Megatron's global memory buffer.
CheckedInt workspace_buffers(const Pass& ps, CheckedInt sp_gather_buffer, ComponentSink& comps) {
  const CheckedInt te_workspace = ps.te_workspace, torch_workspace = ps.torch_workspace;
  CheckedInt other = te_workspace + 2 * torch_workspace;
  comps.add(MemoryCategory::kOther, "other/te_cublas_workspace", te_workspace);
  comps.add(MemoryCategory::kOther, "other/torch_cublas_workspaces", 2 * torch_workspace);
  if (ps.grouped_gemm) {
    // TE grouped GEMM (TEGroupedMLP) adds one cuBLAS workspace per extra stream
    // (get_multi_stream_cublas_workspace, 4 streams).
    other += 4 * te_workspace;
    comps.add(MemoryCategory::kOther, "other/te_grouped_gemm_workspaces", 4 * te_workspace);
  }
  other += sp_gather_buffer;
  comps.add(MemoryCategory::kOther, "other/megatron_global_memory_buffer", sp_gather_buffer);
  return other;
}

}  // namespace

StageEstimate estimate_stage(const Pass& ps, std::int64_t r, std::vector<std::int64_t>& inflight) {
  // The pass's values under the names the terms below use.
  const auto& s = ps.s;
  const auto& c = ps.blocks.cp;
  const auto& p = ps.p;
  const auto& v = ps.v;
  const auto& fp8 = ps.fp8;
  const auto& param_dtype = ps.param_dtype;
  const auto& param_b = ps.param_b;
  const auto& grad_b = ps.grad_b;
  const auto& main_param_b = ps.main_param_b;
  const auto& exp_avg_b = ps.exp_avg_b;
  const auto& exp_avg_sq_b = ps.exp_avg_sq_b;
  const auto& main_grad_copy_b = ps.main_grad_copy_b;
  const auto& muon = ps.muon;
  const auto& keep_on_gpu = ps.keep_on_gpu;
  const auto& dense_shards = ps.dense_shards;
  const auto& expert_shards = ps.expert_shards;
  const auto& options = ps.options;
  const ParallelLayout& par = ps.s.parallel;
  const auto& opt = ps.s.optimizer;
  StageEstimate st;
  st.pp_rank = r;
  ComponentSink comps(options.components);
  inflight_microbatches(inflight, p, v, r, s.num_micro_batches, s.pipeline.microbatch_group_size.value_or(0),
                        ep_overlap_extra_warmup(s, v));
  auto [tp_params, rep_params, all_exp_params, fp8_params, gemms, train_dense, train_exp, unit_dense, unit_expert,
        units, largest_unit, saved, transient, sp_gather_buffer, large_tensors, graphs, dummies] =
      stage_layers(ps, r, inflight, comps, st);
  // Static memory.
  const CheckedInt all_dense_params = tp_params + rep_params;
  const CheckedInt parameters = all_dense_params + all_exp_params;
  st.parameters = parameters.value();
  st.expert_parameters = all_exp_params.value();
  st.trainable_parameters = (train_dense + train_exp).value();
  // Gradients and optimizer states cover the trained parameters only: all of them, or under LoRA
  // the adapters (the frozen base weights get no main_grad slot, the optimizer never sees them).
  const CheckedInt dense_params = train_dense, exp_params = train_exp;
  // LoRA's adapters in LoRA.lora_dtype (unset: the parameters' dtype), the frozen base as ever.
  const CheckedInt adapters = s.lora.on() ? train_dense + train_exp : CheckedInt(0);
  const std::int64_t adapter_b = s.lora.dtype ? dtype_bytes(*s.lora.dtype) : param_b;
  std::optional<ShardedDpMemory> fsdp;
  if (s.fsdp.kind != FsdpKind::kNone) {
    ShardedDpStage sd;
    sd.unit_dense = unit_dense;
    sd.unit_expert = unit_expert;
    sd.other_dense = all_dense_params - unit_dense;
    sd.units = units;
    sd.largest_unit = largest_unit;
    sd.fp8_params = fp8_params;
    sd.dense_group = par.dp * c / opt.instances;
    sd.expert_group = par.expert_dp / opt.instances;
    sd.instances = opt.instances;
    sd.param_bytes = param_b;
    sd.fp8_param_gather = quantized_param_gather(s);
    fsdp = sharded_data_parallel_memory(sd, s.fsdp, opt, param_dtype);
  }
  if (transient > 0) comps.add(MemoryCategory::kActivations, "activations/transient_peak", transient);
  if (fsdp && fsdp->transient > 0) {
    // Gathered layers and unsharded gradient buckets at the backward's start, next to the
    // activations and the block's own working set.
    transient += fsdp->transient;
    for (const auto& [name, bytes] : fsdp->transient_terms) comps.add(MemoryCategory::kActivations, name, bytes);
  }

  CheckedInt weight = param_b * (parameters - adapters) + adapter_b * adapters;
  if (quantized_param_gather(s))  // uint8 (NVFP4: packed) param buffer for the quantized GEMM weights
    weight -= param_b * fp8_params - ceil_div(quantized_param_half_bytes(s) * fp8_params, 2);
  CheckedInt gradient_bytes = grad_b * (dense_params + exp_params);
  if (fsdp) weight = fsdp->weights, gradient_bytes = fsdp->gradients;
  st.weight_bytes = weight.value();
  st.gradient_bytes = gradient_bytes.value();
  // HybridDeviceOptimizer (optimizer/cpu_offloading/hybrid_optimizer.py) moves the states of
  // the offloaded share of parameters to the host. With the precision-aware optimizer the
  // fp32 master weights go with them; without it the distributed optimizer keeps its fp32
  // main params (and the fp32 gradient copies it makes) on the GPU and hands them over.
  auto shard = [&](std::int64_t bytes_per_param, CheckedInt count, std::int64_t shards,
                   bool offloadable = true) -> CheckedInt {
    const CheckedInt bytes = ceil_div(count * bytes_per_param, shards);
    if (keep_on_gpu >= 1.0 || !offloadable) return bytes;
    const double kept = static_cast<double>(bytes.value()) * keep_on_gpu + 0.5;
    return kept < 0x1p63 ? static_cast<std::int64_t>(kept) : bytes.value();
  };
  CheckedInt optim = 0;
  // distrib_optimizer.py _copy_model_grads_to_main_grads: `main_grad.float()` copies 16-bit
  // gradients in the optimizer step; they live until zero_grad(set_to_none=True) at the start
  // of the next train_step (training.py), so never next to the activations.
  CheckedInt step_only = 0;
  const std::int64_t state_b = main_param_b + exp_avg_b + exp_avg_sq_b + main_grad_copy_b;
  if (fsdp) {
    optim = fsdp->optimizer;
    step_only = fsdp->step_only;
    for (const auto& [name, bytes] : fsdp->optimizer_terms) comps.add(MemoryCategory::kOptimizer, name, bytes);
  } else if (muon) {
    // Muon: one fp32 momentum for 2-D GEMM weights, Adam for the rest (emerging_optimizers.py).
    const std::int64_t muon_b = main_param_b + 4 + main_grad_copy_b;
    const CheckedInt muon_dense =
        std::max(std::min(fp8_params, dense_params) - std::min(fp8_params, exp_params), CheckedInt(0));
    optim = shard(muon_b, muon_dense, dense_shards) + shard(state_b, dense_params - muon_dense, dense_shards) +
            shard(muon_b, exp_params, expert_shards);
    step_only = shard(main_grad_copy_b, dense_params, dense_shards, false) +
                shard(main_grad_copy_b, exp_params, expert_shards, false);
    comps.add(MemoryCategory::kOptimizer, "optimizer/muon_and_adam_states", optim);
  } else {
    const bool main_offloadable = opt.precision_aware;
    const CheckedInt main_dense = shard(main_param_b, dense_params, dense_shards, main_offloadable);
    const CheckedInt main_exp = shard(main_param_b, exp_params, expert_shards, main_offloadable);
    const CheckedInt moments_dense = shard(exp_avg_b + exp_avg_sq_b, dense_params, dense_shards);
    const CheckedInt moments_exp = shard(exp_avg_b + exp_avg_sq_b, exp_params, expert_shards);
    // The fp32 gradient copies: the distributed optimizer's for every shard, or with the
    // precision-aware optimizer HybridDeviceOptimizer's for its GPU share only.
    const CheckedInt grad_copy = shard(main_grad_copy_b, dense_params, dense_shards, main_offloadable) +
                                 shard(main_grad_copy_b, exp_params, expert_shards, main_offloadable);
    step_only = grad_copy;
    optim = main_dense + main_exp + moments_dense + moments_exp + grad_copy;
    // distrib_optimizer.py: fp32 main params of the local shard (shard_model_param.clone().float()).
    comps.add(MemoryCategory::kOptimizer, "optimizer/main_params", main_dense + main_exp);
    // Adam exp_avg and exp_avg_sq of the local shard (optimizer/__init__.py).
    comps.add(MemoryCategory::kOptimizer, "optimizer/adam_moments", moments_dense + moments_exp);
    comps.add(MemoryCategory::kOptimizer, "optimizer/fp32_main_grads", grad_copy);
  }
  st.optimizer_bytes = optim.value();
  if (fsdp) {
    for (const auto& [name, bytes] : fsdp->weight_terms) comps.add(MemoryCategory::kWeights, name, bytes);
    for (const auto& [name, bytes] : fsdp->gradient_terms) comps.add(MemoryCategory::kGradients, name, bytes);
  } else {
    const CheckedInt dense_adapters = s.lora.on() ? train_dense : CheckedInt(0);
    comps.add(MemoryCategory::kWeights, "weights/dense", param_b * (all_dense_params - dense_adapters));
    comps.add(MemoryCategory::kWeights, "weights/experts", param_b * (all_exp_params - (adapters - dense_adapters)));
    comps.add(MemoryCategory::kWeights, "weights/lora_adapters", adapter_b * adapters);
    comps.add(MemoryCategory::kGradients, "gradients/main_grad_buffer", gradient_bytes);
  }

  CheckedInt other = workspace_buffers(ps, sp_gather_buffer, comps);
  // TE's weight-gradient placeholders, one per distinct weight shape of the stage (module/base.py
  // get_dummy_wgrad), from the first backward on.
  const CheckedInt dummy_wgrads = uses_cached_dummy_wgrads(s) ? dummies.bytes(param_b) : CheckedInt(0);
  other += dummy_wgrads;
  comps.add(MemoryCategory::kOther, "other/te_dummy_wgrads", dummy_wgrads);
  // Newer Megatron-LM takes the output layer's placeholder from the same cache (layers.py
  // get_dummy_wgrad): its [V/TP, h] then stays; the bound's (StageEstimate).
  if (r == p - 1 && s.gradient_accumulation_fusion && !s.lora.on() && s.fsdp.kind != FsdpKind::kTorchFsdp2)
    st.cached_output_wgrad_bytes = (ps.blocks.vocab_local * ps.h * ps.blocks.act_bytes).value();
  if (fp8) {
    // The recipe's copies of the GEMM weights (low_precision.cpp): TE's workspace cache across
    // micro-batches, or the column-wise copy of primary quantized weights; its scaling state.
    const QuantizedWeightCopies copies =
        quantized_weight_copies(s, fp8_params, options.compute_capability, fsdp.has_value());
    const CheckedInt scaling = scaling_state_bytes(s, gemms);
    other += copies.workspace + copies.columnwise + scaling;
    comps.add(MemoryCategory::kOther, "other/te_fp8_weight_cache", copies.workspace);
    comps.add(MemoryCategory::kOther, "other/fp8_primary_weight_columnwise", copies.columnwise);
    comps.add(MemoryCategory::kOther, "other/fp8_scaling_state", scaling);
  }
  if (fsdp) {
    other += fsdp->persistent_buffers;
    for (const auto& [name, bytes] : fsdp->other_terms) comps.add(MemoryCategory::kOther, name, bytes);
  }
  // CUDA graphs (cuda_graphs.cpp): the static inputs and gradient buffers stay allocated.
  const CheckedInt graph_buffer_bytes = graph_buffers(ps, graphs);
  other += graph_buffer_bytes;
  comps.add(MemoryCategory::kOther, "other/cuda_graph_static_inputs", graphs.static_inputs);
  comps.add(MemoryCategory::kOther, "other/cuda_graph_gradient_buffers", graph_buffer_bytes - graphs.static_inputs);
  st.other_bytes = other.value();
  // Communication overlap (communication_buffers.cpp): the combined 1F1B schedule's extra
  // attention block; the userbuffers and the bucket padding count in the upper bound only.
  const StageCommunication comm = stage_communication(ps, r, dense_params, exp_params);
  saved += comm.ep_overlap_saved;
  comps.add(MemoryCategory::kActivations, "activations/ep_overlap_forward_attention", comm.ep_overlap_saved);
  st.outside_allocator_bytes = comm.userbuffers.value();
  st.bucket_padding_bytes = comm.bucket_padding.value();
  const CheckedInt activation_bytes = saved + transient;
  const CheckedInt static_bytes = weight + gradient_bytes + optim + other;
  st.activation_bytes = activation_bytes.value();
  st.static_bytes = static_bytes.value();
  st.step_only_bytes = step_only.value();
  // The peak of a step is the larger of its phases, not their sum.
  st.forward_backward_bytes = (static_bytes - step_only + activation_bytes).value();
  st.step_transient_bytes = fsdp ? fsdp->step_transient.value() : 0;
  st.optimizer_step_bytes = (static_bytes + st.step_transient_bytes).value();
  if (ps.s.cuda_graph.on()) {
    // With CUDA graphs: the eager warm-up steps (before the buffers exist), the capture and the
    // replayed steps (cuda_graphs.hpp).
    const GraphPhases graph =
        graph_phases(ps, graphs, graph_buffer_bytes, static_bytes - step_only - graph_buffer_bytes, saved, transient);
    st.forward_backward_bytes = std::max(graph.replay, graph.eager).value();
    st.cuda_graph_capture_bytes = graph.capture.value();
    st.cuda_graph_replay_bytes = graph.replay.value();
    st.cuda_graph_pool_bytes = graph.pool.value();
  }
  st.total_bytes = std::max({st.forward_backward_bytes, st.optimizer_step_bytes, st.cuda_graph_capture_bytes});
  st.peak_phase = st.cuda_graph_capture_bytes > std::max(st.forward_backward_bytes, st.optimizer_step_bytes)
                      ? "cuda-graph-capture"
                  : st.optimizer_step_bytes > st.forward_backward_bytes ? "optimizer-step"
                                                                        : "forward-backward";
  // The blocks of the live activation tensors at the forward/backward peak can exceed their
  // sizes (kLargeAlloc above): the bound allows the worst case.
  st.allocator_slack_bytes = (large_tensors * kLargeAlloc).value();
  st.inflight_microbatches = inflight.front();
  st.components = comps.take();
  return st;
}

// The assumptions the report lists (the planner asks for none).
void add_assumptions(const Pass& ps, Estimate& est) {
  // The pass's values under the names the terms below use.
  const auto& s = ps.s;
  const auto& attn = ps.attn;
  const auto& p = ps.p;
  const auto& im = ps.im;
  auto& a = est.assumptions;
  a.push_back(attn.backend == AttentionBackend::kFlash ? attn.reason + ": no s^2 score tensors" : attn.reason);
  if (!s.environment_used.empty()) {
    std::string env;
    for (const auto& e : s.environment_used) env += (env.empty() ? "" : ", ") + e;
    a.push_back("environment: " + env);
  }
  if (!s.environment_ignored.empty()) {
    std::string env;
    for (const auto& e : s.environment_ignored) env += (env.empty() ? "" : ", ") + e;
    a.push_back("environment without a memory effect mme models: " + env);
  }
  if (s.num_micro_batches == 0 && p > 1)
    a.push_back("global batch size not given: enough micro-batches assumed to fill the pipeline");
  if (im.any_moe)
    a.push_back(s.moe_capacity_factor
                    ? fmt::format("MoE capacity factor {}{}", *s.moe_capacity_factor,
                                  s.moe_pad_to_capacity ? ", expert inputs padded to capacity" : "")
                    : "dropless MoE with balanced routing (each rank receives its average share of tokens)");
  a.push_back(fmt::format("{} cross entropy: fp32 [tokens, vocab/TP] kept for backward",
                          !s.cross_entropy_fusion ? "unfused"
                          : s.cross_entropy_te    ? "fused (te)"
                                                  : "fused (native)"));
  if (!s.gradient_accumulation_fusion)
    a.push_back("no gradient accumulation fusion: each weight gradient is a separate tensor before it joins main_grad");
  // fused_bias_dropout.py: the same function, compiled or eager; both keep dropout's 1-byte mask.
  if (!s.bias_dropout_fusion)
    a.push_back(
        "no bias-dropout-add fusion: the eager bias-dropout-add keeps the same dropout mask (no memory effect)");
  add_offload_assumptions(ps, a);
  add_graph_assumptions(ps, a);
  for (const auto& st : est.stages) {
    if (st.step_only_bytes > 0) {
      a.push_back(
          "16-bit gradients: their fp32 copies exist only from the optimizer step to the next zero_grad, "
          "not next to the activations");
      break;
    }
  }
  add_communication_assumptions(ps, a);
  add_low_precision_assumptions(s, ps.options.compute_capability, a);
  if (const std::string lora = lora_assumption(ps); !lora.empty()) a.push_back(lora);
  a.push_back(
      ps.options.device_memory
          ? "totals are allocator-visible bytes (torch.cuda.max_memory_allocated); the device total adds the caching "
            "allocator's segments (reserved) and what lies outside PyTorch (CUDA context, NCCL, TE userbuffers)"
          : "totals are allocator-visible bytes (torch.cuda.max_memory_allocated); the CUDA context, NCCL buffers "
            "and allocator fragmentation are covered by the fit verdict's reserve and headroom");
}

}  // namespace mme
