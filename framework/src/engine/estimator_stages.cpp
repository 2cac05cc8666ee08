// Phase 1 of a pass, the stages (estimator_phases.hpp): plan_stages resolves the layout and
// evaluates each layer kind and each block around the layers once, and partitions the pipeline;
// per pipeline stage, stage_layers adds up its layers' parameters and the activations of its
// micro-batches in flight.
// Each memory term names, in one comment line, the Megatron-LM behaviour it models.
#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <initializer_list>
#include <memory>
#include <unordered_map>

#include <fmt/core.h>

#include "mme/sdk/block_helpers.hpp"
#include "mme/sdk/error.hpp"

#include "activation_offload.hpp"
#include "communication_buffers.hpp"
#include "cuda_graphs.hpp"
#include "estimator_phases.hpp"
#include "low_precision.hpp"
#include "thread_instance.hpp"
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
    if (is_fp8_gemm_weight(t)) {
      e.fp8_params += t.per_rank;
      if (t.shard == ShardClass::kExpert) e.fp8_exp_params += t.per_rank;
    }
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

// One layer kind under a layout: its parameters, what it keeps per micro-batch and its busiest
// moment, into `e` (a TypeEval holds fixed-size term lists: filled in place, not copied).
// `ctx_blocks`: the layout's blocks, or the bf16 ones of --first-last-layers-bf16 (then no GEMM is
// quantized). `components`: keep the named activation terms.
void evaluate_layer_type(const EngineTables& im, const BlockLayout& blocks, bool components, const LayerType& lt,
                         bool is_mtp, TypeEval& e, const BlockLayout* ctx_blocks = nullptr) {
  const TrainingSetup& s = blocks.setup;
  const ElementBytes bytes = element_bytes(s);
  const BlockContext ctx = make_context(im.model, ctx_blocks ? *ctx_blocks : blocks, lt.spec, is_mtp);

  call_plugin("layer model parameters", [&] {
    lt.attention->parameters(ctx, e.attn_params);
    lt.mlp->parameters(ctx, e.mlp_params);
  });
  add_params(e, e.attn_params, s);
  add_params(e, e.mlp_params, s);
  if (ctx_blocks) {
    e.fp8_params = e.fp8_exp_params = 0;  // built outside the quantized model context: bf16 weights, no copies
  } else if (bytes.fp8) {
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
  if (components)
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
    e.transient += bytes.wgrad * largest;
  }
  e.global_buffer = std::max(e.attn_acts.global_buffer, e.mlp_acts.global_buffer);
  if (s.cuda_graph.on()) evaluate_layer_graphs(im.model, blocks, lt.spec, lt.moe, e);
}

// The embedding runs first in the forward and last in the backward: when its backward works (its
// dense weight gradient), autograd has freed everything else the micro-batch kept on the chunk
// (`chunk_saved` per micro-batch); only the other micro-batches' activations meet it. What it adds
// beyond them.
CheckedInt embedding_working_set(const LmBlockEval& embedding, CheckedInt chunk_saved) {
  CheckedInt own = 0;
  for (const auto& term : embedding.acts.saved) own += term.bytes;
  const CheckedInt freed = chunk_saved > own ? chunk_saved - own : CheckedInt(0);
  const CheckedInt t = embedding.acts.transient;
  return t > freed ? t - freed : CheckedInt(0);
}

}  // namespace

template <class Has>
CheckedInt LayerEvals::placeholders_of(Has has, const TrainingSetup& s) const {
  CachedDummyWgrads d;
  const std::size_t n = evals.size();
  for (std::size_t i = 0; i < n; ++i)
    for (const TypeEval* e : {&evals[i], bf16_evals.empty() ? nullptr : &bf16_evals[i]})
      if (e && has(e == &evals[i] ? i : n + i)) {
        d.add(e->attn_params, s);
        d.add(e->mlp_params, s);
      }
  if (has(2 * n)) {
    d.add(mtp_eval.attn_params, s);
    d.add(mtp_eval.mlp_params, s);
  }
  std::size_t slot = 2 * n + 1;
  for (const LmBlockEval* b : {&embedding, &mtp_projection, &output_head})
    if (has(slot++)) d.add(b->params, s);
  return d.bytes(1);
}

CheckedInt LayerEvals::placeholder_elements(std::uint64_t mask, const TrainingSetup& s) const {
  for (const auto& [m, elements] : placeholders_by_mask_)
    if (m == mask) return elements;
  const CheckedInt elements = placeholders_of([mask](std::size_t slot) { return (mask >> slot) & 1u; }, s);
  placeholders_by_mask_.emplace_back(mask, elements);
  return elements;
}

CheckedInt LayerEvals::placeholder_elements(const std::vector<std::uint8_t>& present, const TrainingSetup& s) const {
  return placeholders_of([&present](std::size_t slot) { return present[slot] != 0; }, s);
}

namespace {

// The slots of a LayerEvals a stage holds (LayerEvals::slots).
class HeldSlots {
 public:
  explicit HeldSlots(const LayerEvals& lev) : lev_(lev), wide_(lev.slots() > 64), present_(wide_ ? lev.slots() : 0) {}
  void hold(std::size_t slot) {
    if (wide_)
      present_[slot] = 1;
    else
      mask_ |= std::uint64_t{1} << slot;
  }
  CheckedInt placeholder_elements(const TrainingSetup& s) const {
    return wide_ ? lev_.placeholder_elements(present_, s) : lev_.placeholder_elements(mask_, s);
  }

 private:
  const LayerEvals& lev_;
  bool wide_;
  std::uint64_t mask_ = 0;
  std::vector<std::uint8_t> present_;  // past 64 slots
};

// The layers a stage holds per slot (LayerEvals::slots: the kinds, their bf16 variants, MTP),
// summed over its chunks: what does not depend on the micro-batches in flight is added once per
// slot (add_layer_slots). On the stack for the usual few kinds: the planner makes millions of calls.
class SlotCounts {
 public:
  explicit SlotCounts(std::size_t slots) : size_(slots), many_(slots > kFew ? slots : 0, 0) {
    if (many_.empty())
      for (std::size_t i = 0; i < slots; ++i) few_[i] = 0;
  }
  std::size_t size() const { return size_; }
  void add(std::size_t slot, std::int64_t n) { data()[slot] += n; }
  std::int64_t operator[](std::size_t slot) const { return many_.empty() ? few_[slot] : many_[slot]; }

 private:
  static constexpr std::size_t kFew = 16;
  std::int64_t* data() { return many_.empty() ? few_.data() : many_.data(); }
  std::size_t size_;
  std::array<std::int64_t, kFew> few_;  // (only the first size_ are set)
  std::vector<std::int64_t> many_;
};

// The stage's layers' parameters per rank, their busiest moment and the global buffer they
// gather into, from the layers it holds per slot.
void add_layer_slots(const LayerEvals& lev, const SlotCounts& n_of, HeldSlots& held, StageLayers& out) {
  const std::size_t nt = lev.evals.size();
  for (std::size_t slot = 0; slot < n_of.size(); ++slot) {
    const CheckedInt n = n_of[slot];
    if (n == 0) continue;
    const TypeEval& e = slot < nt ? lev.evals[slot] : slot < 2 * nt ? lev.bf16_evals[slot - nt] : lev.mtp_eval;
    out.tp_params += n * e.tp_params;
    out.rep_params += n * e.rep_params;
    out.exp_params += n * e.exp_params;
    out.fp8_params += n * e.fp8_params;
    out.fp8_exp_params += n * e.fp8_exp_params;
    out.gemms += n * e.gemms;
    out.train_dense += n * e.train_dense;
    out.train_exp += n * e.train_exp;
    out.unit_dense += n * (e.tp_params + e.rep_params);
    out.unit_expert += n * e.exp_params;
    out.units += n;
    out.largest_unit = std::max(out.largest_unit, e.tp_params + e.rep_params + e.exp_params);
    held.hold(slot);
    out.transient = std::max(out.transient, e.transient);
    out.sp_gather_buffer = std::max(out.sp_gather_buffer, e.global_buffer);
  }
}

}  // namespace

StageLayers stage_layers(const StagePlan& plan, std::int64_t r, const std::vector<std::int64_t>& inflight,
                         ComponentSink& comps, StageEstimate& st) {
  // The pass's values under the names the terms below use.
  const auto& v = plan.v;
  const LayerEvals& lev = *plan.layers;
  const auto& evals = lev.evals;
  const auto& mtp_eval = lev.mtp_eval;
  const PipelinePartition& part = *plan.part;
  const auto& full_recompute = plan.full_recompute;
  const auto& layer_input_bytes = plan.layer_input_bytes;
  const auto& im = plan.im;
  const auto& rc = plan.s.recompute;
  // Summed in place (the caller's object): every term starts at 0.
  StageLayers out;
  // (References, not a structured binding: clang before 16 cannot capture one in a lambda.)
  CheckedInt &tp_params = out.tp_params, &rep_params = out.rep_params, &fp8_params = out.fp8_params,
             &train_dense = out.train_dense, &saved = out.saved, &transient = out.transient,
             &sp_gather_buffer = out.sp_gather_buffer, &large_tensors = out.large_tensors;
  StageGraphs& graphs = out.graphs;
  // The output head's busiest moment and what it keeps per micro-batch (the chunk with the loss).
  CheckedInt head_transient = 0, head_saved = 0;
  // The embedding's backward working set, beyond what its chunk has freed by then (below).
  CheckedInt embedding_transient = 0;
  large_tensors = 3;              // the transient working set: a few tensors
  StageOffload offload(plan, r);  // activation offloading (activation_offload.cpp)
  const std::size_t nt = im.types.size();
  HeldSlots held(lev);  // the kinds and blocks the stage holds: their weight shapes are TE's placeholders
  const bool graphs_on = plan.s.cuda_graph.on();
  SlotCounts layers_of(2 * nt + 1);  // the kinds, their bf16 variants, MTP
  if (plan.record_chunks) st.chunks.reserve(static_cast<std::size_t>(v));
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
    auto account_layers = [&](const TypeEval& e, std::size_t slot, std::int64_t n, CheckedInt recomputed) {
      layers_of.add(slot, n);  // its parameters and working set: after the chunks (add_layer_slots)
      max_layer_saved = std::max(max_layer_saved, e.saved);
      max_layer_large = std::max(max_layer_large, e.large_saved);
      if (graphs_on) graphs.add_layers(plan, e, n, mb);
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
    const Bf16LayerRanges bf16 = bf16_layers_in(plan.s, im.model.num_layers, ch.first_layer, ch.num_layers);
    for (std::size_t ti = 0; ti < im.types.size(); ++ti) {
      const std::int64_t n = im.count_in(ti, ch.first_layer, ch.num_layers);
      if (n == 0) continue;
      const std::int64_t n_bf16 = lev.bf16_evals.empty() ? 0
                                                         : im.count_in(ti, bf16.start_first, bf16.start_count) +
                                                               im.count_in(ti, bf16.end_first, bf16.end_count);
      const std::int64_t rec = std::min(n, recompute_left);
      recompute_left -= rec;
      const std::int64_t rec_bf16 = std::min(n_bf16, rec);
      if (n_bf16 > 0) account_layers(lev.bf16_evals[ti], nt + ti, n_bf16, rec_bf16);
      if (n > n_bf16) account_layers(evals[ti], ti, n - n_bf16, rec - rec_bf16);
    }
    if (ch.mtp_layers > 0) {
      const std::int64_t rec = std::min(ch.mtp_layers, recompute_left);
      recompute_left -= rec;
      account_layers(mtp_eval, 2 * nt, ch.mtp_layers, rec);
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
    auto account_block = [&](const LmBlockEval& b, std::size_t slot, CheckedInt params_n, CheckedInt acts_n,
                             bool head = false) {
      tp_params += params_n * b.tp;
      rep_params += params_n * b.rep;
      fp8_params += params_n * b.fp8;
      train_dense += params_n * b.train;
      held.hold(slot);
      for (const auto& term : b.acts.saved) {
        const CheckedInt bytes = acts_n * term.bytes;
        chunk_act += bytes;
        if (bytes > kLargeAlloc) chunk_large += 1;
        if (comps.enabled()) comps.add(MemoryCategory::kActivations, block_act_name(term.name), bytes * mb);
      }
      if (head) {
        head_transient = std::max(head_transient, CheckedInt(b.acts.transient));
        for (const auto& term : b.acts.saved) head_saved += acts_n * term.bytes;
      } else if (&b == &lev.embedding) {
        // Counted once the chunk's saved bytes are known (below).
      } else {
        transient = std::max(transient, CheckedInt(b.acts.transient));
        graphs.eager_transient = std::max(graphs.eager_transient, CheckedInt(b.acts.transient));
      }
      sp_gather_buffer = std::max(sp_gather_buffer, CheckedInt(b.acts.global_buffer));
    };
    if (ch.embedding) account_block(lev.embedding, 2 * nt + 1, 1, 1);
    if (ch.mtp_layers > 0) account_block(lev.mtp_projection, 2 * nt + 2, ch.mtp_layers, ch.mtp_layers);
    if (ch.loss)
      account_block(lev.output_head, 2 * nt + 3, 1, CheckedInt(1) + ch.mtp_layers,
                    true);  // main loss + one per MTP depth
    // What the chunk's layers send to the host per micro-batch (activation offloading).
    const StageOffload::Sent sent = offload.chunk(ch, mb, comps);
    chunk_act -= sent.bytes;
    chunk_large -= sent.large_tensors;
    ce.activation_bytes_per_microbatch = chunk_act.value();
    if (ch.embedding)
      embedding_transient = std::max(embedding_transient, embedding_working_set(lev.embedding, chunk_act));
    saved += chunk_act * mb;
    large_tensors += chunk_large * mb;
    if (ch.loss) {
      // What the output head holds for the whole step (deferred weight-gradient buffers).
      for (const auto& term : lev.output_head.acts.held_for_step) {
        saved += term.bytes;
        if (comps.enabled()) comps.add(MemoryCategory::kActivations, block_act_name(term.name), term.bytes);
      }
    }
    st.layers += ch.num_layers;
    st.mtp_layers += ch.mtp_layers;
    if (plan.record_chunks) st.chunks.push_back(ce);
  }
  add_layer_slots(lev, layers_of, held, out);
  // The loss and the output layer run last in the forward and first in the backward
  // (gpt_model.py: decoder, then output_layer and compute_language_model_loss): their working set
  // meets every saved tensor, but by the time any other block of that micro-batch runs its
  // backward, autograd has freed what the head kept for it (VocabParallelCrossEntropy's softmax,
  // the output layer's input); in that micro-batch's forward the head has not run yet.
  // The same holds for what runs eagerly next to replayed CUDA graphs (the head is never graphed).
  auto after_head = [&](CheckedInt t) {
    return std::max(head_transient, t > head_saved ? t - head_saved : CheckedInt(0));
  };
  transient = std::max(after_head(transient), embedding_transient);
  graphs.eager_transient = std::max(after_head(graphs.eager_transient), embedding_transient);
  // What offloading keeps or brings back on the GPU at the peak, and what the bound adds.
  saved += offload.on_gpu_at_peak(comps);
  st.offload_slack_bytes = offload.bound_slack().value();
  out.dummy_elements = held.placeholder_elements(plan.s);
  return out;
}

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

TrainingSetup resolve_pass_setup(const ModelSpec& m, const TrainingSetup& given) {
  // What the model decides of an unset setting (training_setup.hpp bias_dropout_fusion_on).
  TrainingSetup requested = given;
  requested.bias_dropout_fusion = bias_dropout_fusion_on(m, given);
  if (const auto& n = requested.pipeline.layers_per_virtual_stage) {
    // arguments.py: virtual_pipeline_model_parallel_size = (num_layers // PP) // N.
    if (*n <= 0) throw LayoutError("--num-layers-per-virtual-pipeline-stage must be positive");
    if (requested.parallel.pp <= 1) throw LayoutError("--num-layers-per-virtual-pipeline-stage needs --pp > 1");
    // arguments.py: no more than one of --num-layers-per-virtual-pipeline-stage,
    // --num-virtual-stages-per-pipeline-rank and --pipeline-model-parallel-layout; with an uneven
    // first or last stage the virtual stages are given as a count.
    if (requested.parallel.vpp != 1 || !requested.pipeline.layout.empty())
      throw LayoutError(fmt::format(
          "--num-layers-per-virtual-pipeline-stage {} and {}: Megatron-LM takes no more than one of "
          "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank (--vpp) and "
          "--pipeline-model-parallel-layout",
          *n,
          requested.pipeline.layout.empty() ? fmt::format("--vpp {}", requested.parallel.vpp) : "--pipeline-layout"));
    if (requested.pipeline.first_stage_layers || requested.pipeline.last_stage_layers)
      throw LayoutError(
          "--num-layers-per-virtual-pipeline-stage with --num-layers-in-first/last-pipeline-stage: Megatron-LM asks "
          "for the virtual stages as a count there (--vpp, Megatron's --num-virtual-stages-per-pipeline-rank)");
    // arguments.py: the embedding and the loss count as a layer each under
    // --account-for-embedding/loss-in-pipeline-split before the division by PP.
    const std::int64_t per_rank = (m.num_layers + requested.pipeline.accounted_blocks()) / requested.parallel.pp;
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
  BlockLayout b{s};
  b.setup.attention_backend = attention;
  b.setup.moe_routing_imbalance = imbalance > 1.0 ? std::optional<double>(imbalance) : std::nullopt;
  // Without the pipeline partition: which stage or chunk holds a layer does not change what the
  // layer keeps (the PP size stays: the blocks around the layers read it).
  b.setup.parallel.vpp = 1;
  b.setup.pipeline.first_stage_layers.reset();
  b.setup.pipeline.last_stage_layers.reset();
  b.setup.pipeline.account_for_embedding = b.setup.pipeline.account_for_loss = false;
  b.setup.pipeline.layout.clear();
  b.setup.pipeline.layers_per_virtual_stage.reset();
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

// A block around the decoder layers under a layout.
void evaluate_lm_block(const EngineTables& im, const BlockLayout& blocks, const LmBlock& b, bool is_mtp,
                       LmBlockEval& e) {
  if (!b.model) return;
  const BlockContext ctx = make_context(im.model, blocks, *b.layer, is_mtp);
  call_plugin("layer model parameters", [&] { b.model->parameters(ctx, e.params); });
  call_plugin("layer model activations", [&] { b.model->activations(ctx, e.acts); });
  for (const auto& t : e.params.terms)
    if (t.shard == ShardClass::kExpert)
      throw PluginError(
          fmt::format("layer-memory model '{}' ({}) reports expert-sharded parameters ('{}'), "
                      "which only an MLP block may hold",
                      b.model->kind(), to_string(b.model->role()), t.name));
  add_block_params(e, e.params, blocks.setup);
}

// Each layer kind and each block around the layers under `blocks` (the block models' own checks
// passed: validate_blocks ran before), then LoRA's checks on them.
std::shared_ptr<const LayerEvals> evaluate_layers(const EngineTables& im, const BlockLayout& blocks, bool components) {
  auto out = std::make_shared<LayerEvals>();
  static std::atomic<std::uint64_t> next_serial{1};
  out->serial = next_serial.fetch_add(1, std::memory_order_relaxed);
  const TrainingSetup& s = blocks.setup;
  out->evals.resize(im.types.size());
  for (std::size_t i = 0; i < im.types.size(); ++i)
    evaluate_layer_type(im, blocks, components, im.types[i], false, out->evals[i]);
  if (has_bf16_layers(s)) {
    // fp8_utils.py get_fp8_context / fp4_utils.py get_fp4_context: nullcontext() for the first and
    // last layers, so their GEMMs and saved inputs stay in the activation dtype.
    BlockLayout bf16 = blocks;
    bf16.linear_input_bytes = bf16.act_bytes;
    bf16.weight_bytes = element_bytes(s).param;
    out->bf16_evals.resize(im.types.size());
    for (std::size_t i = 0; i < im.types.size(); ++i)
      evaluate_layer_type(im, blocks, components, im.types[i], false, out->bf16_evals[i], &bf16);
  }
  if (im.model.mtp_num_layers > 0)
    evaluate_layer_type(im, blocks, components, im.types[im.mtp_type], true, out->mtp_eval);
  evaluate_lm_block(im, blocks, im.embedding, false, out->embedding);
  evaluate_lm_block(im, blocks, im.output_head, false, out->output_head);
  evaluate_lm_block(im, blocks, im.mtp_projection, true, out->mtp_projection);
  validate_lora(im, blocks, *out);
  return out;
}

// The engine's memo of layer evaluations, one per thread. evaluate_layers is a function of the
// model's tables, the BlockLayout and `components`, and the planner asks for the same ones over
// and over (every pipeline split and VPP size of a layout sees the same blocks). A full
// comparison of the key decides a hit, so a hit gives exactly what evaluating again would; the
// oldest entry makes room. An Estimator's id is never reused, so the entries of one that is gone
// are never hit.
class LayerEvalMemo {
 public:
  std::shared_ptr<const LayerEvals> find(std::uint64_t tables, const BlockLayout& blocks, bool components) const {
    const auto at = index_.find(hash(tables, blocks, components));
    if (at == index_.end()) return nullptr;
    const Entry& e = entries_[static_cast<std::size_t>(at->second - first_)];
    return e.tables == tables && e.components == components && e.blocks == blocks ? e.evals : nullptr;
  }
  void add(std::uint64_t tables, const BlockLayout& blocks, bool components, std::shared_ptr<const LayerEvals> evals) {
    const std::uint64_t h = hash(tables, blocks, components);
    const std::size_t size = footprint(*evals);
    // The oldest entries make room: at most kEntries, and kBudget bytes (a model of many layer
    // kinds has large evaluations).
    while (!entries_.empty() && (entries_.size() >= kEntries || bytes_ + size > kBudget)) {
      const Entry& old = entries_.front();
      if (const auto at = index_.find(old.hash); at != index_.end() && at->second == first_) index_.erase(at);
      bytes_ -= old.size;
      entries_.pop_front();
      ++first_;
    }
    entries_.push_back(Entry{h, tables, components, size, blocks, std::move(evals)});
    bytes_ += size;
    // An older entry of the same hash is no longer found: only a miss, never a wrong hit.
    index_[h] = first_ + entries_.size() - 1;
  }

 private:
  // Room for a planner slice's variants (micro-batches, recompute, knob combinations) in both
  // passes, within a few MiB per thread.
  static constexpr std::size_t kEntries = 256;
  static constexpr std::size_t kBudget = std::size_t{16} << 20;
  struct Entry {
    std::uint64_t hash = 0, tables = 0;
    bool components = false;
    std::size_t size = 0;  // footprint()
    BlockLayout blocks;
    std::shared_ptr<const LayerEvals> evals;
  };
  // The bytes an entry holds (the named terms' text roughly).
  static std::size_t footprint(const LayerEvals& e) {
    std::size_t n = sizeof(Entry) + sizeof(LayerEvals) + (e.evals.size() + e.bf16_evals.size()) * sizeof(TypeEval);
    for (const auto* list : {&e.evals, &e.bf16_evals})
      for (const TypeEval& t : *list) n += t.named_saved.size() * (sizeof(t.named_saved[0]) + 32);
    return n;
  }
  // A cheap filter on what varies between a search's layouts; equality decides.
  static std::uint64_t hash(std::uint64_t tables, const BlockLayout& b, bool components) {
    const TrainingSetup& s = b.setup;
    return fnv1a_words(std::initializer_list<std::int64_t>{
        static_cast<std::int64_t>(tables), b.tp, b.cp, b.ep, b.etp, b.pp, s.micro_batch_size, s.seq_length,
        s.num_micro_batches, static_cast<std::int64_t>(s.recompute.granularity),
        static_cast<std::int64_t>(s.recompute.modules), static_cast<std::int64_t>(s.attention_backend),
        static_cast<std::int64_t>(s.moe_routing_imbalance.value_or(0) * 4096), static_cast<std::int64_t>(s.fsdp.kind),
        static_cast<std::int64_t>(s.fsdp.strategy), static_cast<std::int64_t>(s.cuda_graph.impl),
        static_cast<std::int64_t>(s.cuda_graph.modules),
        static_cast<std::int64_t>(s.optimizer.cpu_offload_fraction * 4096), static_cast<std::int64_t>(components)});
  }
  std::deque<Entry> entries_;                               // oldest first
  std::uint64_t first_ = 0;                                 // the sequence number of entries_.front()
  std::unordered_map<std::uint64_t, std::uint64_t> index_;  // hash -> the sequence number of its entry
  std::size_t bytes_ = 0;                                   // footprint() of every entry
};

}  // namespace

StagePlan plan_stages(const EngineTables& im, const TrainingSetup& setup, bool components, AttentionBackend attention,
                      double imbalance, PassKind kind) {
  const ModelSpec& m = im.model;
  StagePlan plan(im, kind == PassKind::kBound ? TrainingSetup(setup) : resolve_pass_setup(m, setup), attention,
                 imbalance);
  const TrainingSetup& s = plan.s;
  const ParallelLayout& par = s.parallel;
  plan.p = par.pp;
  plan.h = m.hidden_size;
  plan.bytes = element_bytes(s);
  checked_mul(checked_mul(plan.blocks.tokens.value(), plan.blocks.vocab_local.value(), "logits"), 8, "logits bytes");
  // Block-level checks first (heads, widths by TP/ETP), then the layout as a whole, then the layer
  // kinds (a memo hit has passed the block checks and LoRA's before: the same blocks did).
  LayerEvalMemo& memo = thread_instance<LayerEvalMemo>();
  plan.layers = memo.find(im.id, plan.blocks, components);
  const bool evaluated = plan.layers != nullptr;
  if (!evaluated) validate_blocks(im, plan.blocks);
  if (kind == PassKind::kEstimate) {  // the bound's pass has the same setup, checked already
    validate_setup(m, s);
    validate_activation_offload(m, s);
    validate_cuda_graphs(m, s);
  }
  if (!evaluated) {
    plan.layers = evaluate_layers(im, plan.blocks, components);
    memo.add(im.id, plan.blocks, components, plan.layers);
  }

  plan.part = partition_pipeline_cached(m.num_layers, m.mtp_num_layers, par, s.pipeline);
  plan.v = plan.part->vpp;
  plan.extra_warmup = ep_overlap_extra_warmup(s, plan.v);
  // Full recompute (transformer_block.py _checkpointed_forward): a checkpointed layer keeps
  // only its input hidden states, [s/TP (SP), b, h] per micro-batch.
  plan.full_recompute = s.recompute.granularity == RecomputeGranularity::kFull;
  plan.layer_input_bytes = plan.blocks.act_bytes * plan.blocks.local_tokens * plan.h;
  return plan;
}
namespace {

LayerCosts layer_costs(const StagePlan& plan, const LayerType& lt, bool is_mtp) {
  const BlockContext ctx = make_context(plan.im.model, plan.blocks, lt.spec, is_mtp);
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
void describe_layer_kinds(const StagePlan& plan, Estimate& est) {
  // The pass's values under the names the terms below use.
  const auto& evals = plan.layers->evals;
  const auto& mtp_eval = plan.layers->mtp_eval;
  const auto& im = plan.im;
  const ModelSpec& m = plan.im.model;
  auto describe = [&](const LayerType& lt, const TypeEval& e, std::int64_t count, bool mtp) {
    LayerKindEstimate k;
    k.attention = lt.spec.attention.kind;
    k.mlp = lt.spec.mlp.kind;
    k.layers = count;
    k.mtp = mtp;
    k.parameters = (e.tp_params + e.rep_params + e.exp_params).value();
    k.activation_bytes_per_microbatch = e.saved.value();
    k.transient_bytes = e.transient.value();
    k.costs = layer_costs(plan, lt, mtp);
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

}  // namespace mme
