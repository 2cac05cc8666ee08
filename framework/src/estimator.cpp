// The estimation engine. Each memory term below names, in one comment line, the Megatron-LM
// behaviour it models (file and function in Megatron-LM / megatron-core / Transformer Engine).
#include "mme/estimator.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/core.h>

#include "mme/checked.hpp"
#include "mme/error.hpp"
#include "mme/pipeline.hpp"
#include "sharded_data_parallel.hpp"

namespace mme {

const char* to_string(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::kWeights: return "weights";
    case MemoryCategory::kGradients: return "gradients";
    case MemoryCategory::kOptimizer: return "optimizer";
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kOther: return "other";
  }
  return "?";
}

std::int64_t padded_vocab_size(std::int64_t vocab, std::int64_t divisor, std::int64_t tp) {
  // megatron/training/tokenizer (vocab_utils.py): pad to a multiple of divisor x TP.
  const std::int64_t multiple = checked_mul(divisor, tp, "vocab padding multiple");
  return checked_mul((vocab + multiple - 1) / multiple, multiple, "padded vocab size");
}

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;
// PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp): a cached block of the large
// pool (requests above 1 MiB) is split only when more than kSmallSize = 1 MiB would remain, so
// such a tensor's block, which max_memory_allocated counts, can exceed its size by up to 1 MiB.
constexpr std::int64_t kLargeAlloc = kMiB;

CheckedInt ceil_div(CheckedInt a, CheckedInt b) { return (a + b - 1) / b; }

// One distinct decoder-layer kind of the model (DeepSeek-V3 has two: dense-MLA and MoE-MLA).
struct LayerType {
  LayerSpec spec;
  const LayerMemoryModel* attention = nullptr;
  const LayerMemoryModel* mlp = nullptr;
};

// A layer type evaluated under one layout.
// Sizes are CheckedInt (checked.hpp): every sum and product below is checked for overflow.
struct TypeEval {
  CheckedInt tp_params = 0, rep_params = 0, exp_params = 0;  // per rank
  CheckedInt fp8_params = 0;     // per-rank parameters of GEMM weights (FP8-castable)
  CheckedInt saved = 0;          // bytes kept for backward per micro-batch
  CheckedInt transient = 0;      // working bytes at the layer's busiest moment
  CheckedInt global_buffer = 0;  // Megatron global memory buffer the layer gathers into
  BlockParams attn_params, mlp_params;
  BlockActivations attn_acts, mlp_acts;
  std::vector<std::pair<std::string, std::int64_t>> named_saved;  // "activations/<term>", bytes
  CheckedInt large_saved = 0;  // saved tensors of at least kLargeAlloc bytes (allocator rounding)
};

bool is_gemm_weight(const ParamTerm& t) {
  return t.group != ParamGroup::kNorms && t.group != ParamGroup::kRouter;
}

void add_params(TypeEval& e, const BlockParams& p) {
  for (const auto& t : p.terms) {
    switch (t.shard) {
      case ShardClass::kTensorParallel: e.tp_params += t.per_rank; break;
      case ShardClass::kReplicated: e.rep_params += t.per_rank; break;
      case ShardClass::kExpert: e.exp_params += t.per_rank; break;
    }
    if (is_gemm_weight(t)) e.fp8_params += t.per_rank;
  }
}

// Accumulates named components (only when asked for: the planner skips it).
class ComponentSink {
 public:
  explicit ComponentSink(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  // Names are few (tens per stage): a linear scan beats hashing or a tree here.
  void add(MemoryCategory cat, std::string_view name, CheckedInt bytes) {
    if (!enabled_ || bytes == 0) return;
    for (auto& c : items_) {
      if (c.category == cat && c.name == name) {
        c.bytes = (bytes + c.bytes).value();
        return;
      }
    }
    items_.push_back(Component{std::string(name), cat, bytes.value()});
  }
  std::vector<Component> take() { return std::move(items_); }

 private:
  bool enabled_;
  std::vector<Component> items_;
};

}  // namespace

struct Estimator::Impl {
  ModelSpec model;
  std::vector<LayerType> types;
  std::vector<std::size_t> layer_type;              // per decoder layer
  std::vector<std::vector<std::int64_t>> prefix;    // prefix[type][i]: layers of that type before i
  std::size_t mtp_type = 0;
  ParamCount params;  // exact counts, computed once

  std::int64_t count_in(std::size_t type, std::int64_t first, std::int64_t n) const {
    const auto& pre = prefix[type];
    return pre[static_cast<std::size_t>(first + n)] - pre[static_cast<std::size_t>(first)];
  }
};

Estimator::Estimator(const ModelSpec& model, const Registry& registry) : impl_(std::make_unique<Impl>()) {
  validate_model_spec(model);
  impl_->model = model;
  auto& im = *impl_;
  const LayerKinds grouped = group_layer_kinds(im.model);
  for (const LayerSpec* kind : grouped.kinds) {
    const LayerSpec& layer = *kind;
    LayerType t;
    t.spec = layer;
    t.attention = registry.find_layer_model(layer.attention.kind);
    t.mlp = registry.find_layer_model(layer.mlp.kind);
    if (!t.attention || t.attention->role() != BlockRole::kAttention)
      throw PluginError(fmt::format("no layer-memory model for attention kind '{}' is loaded (check `mme plugins`)",
                                    layer.attention.kind));
    if (!t.mlp || t.mlp->role() != BlockRole::kMlp)
      throw PluginError(
          fmt::format("no layer-memory model for MLP kind '{}' is loaded (check `mme plugins`)", layer.mlp.kind));
    im.types.push_back(std::move(t));
  }
  im.layer_type = grouped.kind_of_layer;
  im.prefix.assign(im.types.size(), std::vector<std::int64_t>(model.layers.size() + 1, 0));
  for (std::size_t t = 0; t < im.types.size(); ++t)
    for (std::size_t i = 0; i < model.layers.size(); ++i)
      im.prefix[t][i + 1] = im.prefix[t][i] + (im.layer_type[i] == t ? 1 : 0);
  im.mtp_type = im.layer_type.back();
  im.params = count_parameters_uncached();
}

Estimator::~Estimator() = default;
Estimator::Estimator(Estimator&&) noexcept = default;
Estimator& Estimator::operator=(Estimator&&) noexcept = default;

const ModelSpec& Estimator::model() const { return impl_->model; }

Estimator::ParamCount Estimator::count_parameters() const { return impl_->params; }

Estimator::ParamCount Estimator::count_parameters_uncached() const {
  const auto& im = *impl_;
  const auto& m = im.model;
  TrainingSetup setup;
  setup.parallel.world_size = 1;
  setup = resolve_setup(setup);
  std::map<std::string, CheckedInt> total, active;
  std::vector<std::string> order;
  auto add = [&](const std::string& group, CheckedInt t, CheckedInt a) {
    if (!total.count(group)) order.push_back(group);
    total[group] += t;
    active[group] += a;
  };
  const CheckedInt h = m.hidden_size;
  const CheckedInt norm = CheckedInt(m.normalization == Normalization::kLayerNorm ? 2 : 1) * h;
  ParamCount out;
  // Word embedding (HF checkpoints store the unpadded vocabulary) and, untied, the output head.
  add("embedding", h * m.vocab_size, h * m.vocab_size);
  if (m.position_embedding == PositionEmbedding::kLearnedAbsolute)
    add("position_embedding", h * m.max_position_embeddings, h * m.max_position_embeddings);
  if (!m.tie_embeddings) add("output_layer", h * m.vocab_size, h * m.vocab_size);
  add("norms", norm, norm);  // final norm
  auto layer_params = [&](const LayerType& lt, bool is_mtp, CheckedInt& t, CheckedInt& a,
                          const std::function<void(const ParamTerm&)>& each) {
    BlockContext ctx{m, lt.spec, setup};
    ctx.is_mtp = is_mtp;
    BlockParams bp;
    for (const LayerMemoryModel* block : {lt.attention, lt.mlp}) {
      bp.terms.clear();
      call_plugin("layer model parameters", [&] { block->parameters(ctx, bp); });
      for (const auto& term : bp.terms) {
        t += term.total;
        a += term.active;
        each(term);
      }
    }
  };
  // Identical layers count alike: once per layer kind, times the number of layers of that kind.
  for (std::size_t ti = 0; ti < im.types.size(); ++ti) {
    const CheckedInt n = im.count_in(ti, 0, m.num_layers);
    CheckedInt t = 0, a = 0;
    layer_params(im.types[ti], false, t, a, [&](const ParamTerm& term) {
      add(to_string(term.group), n * term.total, n * term.active);
    });
  }
  CheckedInt sum_total = 0, sum_active = 0;
  for (const auto& g : order) {
    sum_total += total[g];
    sum_active += active[g];
    out.breakdown.emplace_back(g, total[g].value());
    out.active_breakdown.emplace_back(g, active[g].value());
  }
  out.total = sum_total.value();
  out.active = sum_active.value();
  // MTP depth: a transformer layer of the last layer's kind + enorm, hnorm, eh_proj (2h -> h)
  // and its own final norm (multi_token_prediction.py MultiTokenPredictionLayer); the
  // embedding and output head are shared with the main model.
  // Every depth is alike: one depth's count times the depth.
  if (m.mtp_num_layers > 0) {
    CheckedInt t = 0, a = 0;
    layer_params(im.types[im.mtp_type], true, t, a, [](const ParamTerm&) {});
    out.mtp = ((t + 3 * norm + 2 * h * h) * m.mtp_num_layers).value();
  }
  if (out.mtp > 0) out.breakdown.emplace_back("mtp", out.mtp);
  return out;
}

Estimate Estimator::run(const TrainingSetup& requested, const EstimateOptions& options) const {
  // Transformer Engine's attention choice on this GPU (training_setup.cpp resolve_attention).
  // (It reads only the backend, the implementation and the environment, which resolve_setup keeps.)
  const AttentionChoice attn = resolve_attention(requested, options.compute_capability);
  Estimate est = run_pass(requested, options, attn.backend, 1.0);
  for (auto& st : est.stages) st.upper_bytes = st.total_bytes;
  est.upper_stage = est.peak_stage;
  if (!options.upper_bound) return est;

  // The upper bound: what the point estimate cannot pin down, each a named mechanism
  // (docs/memory-model.md, "Upper bound").
  const TrainingSetup& s = est.setup;
  bool moe = false;
  for (const auto& kind : impl_->types) moe = moe || kind.spec.mlp.num_experts > 0;
  double imbalance = 1.0;
  if (moe && !(s.moe_capacity_factor && s.moe_pad_to_capacity)) {
    // Routing imbalance: the busiest expert rank receives more than its even share (most of
    // all early in training); a capacity factor drops tokens beyond it (moe_utils.py
    // get_capacity), so it caps the excess.
    imbalance = s.moe_routing_imbalance.value_or(kDefaultMoeRoutingImbalance);
    if (s.moe_capacity_factor) imbalance = std::min(imbalance, std::max(1.0, *s.moe_capacity_factor));
  }
  const AttentionBackend bound_attention = attn.may_fall_back_to_unfused ? AttentionBackend::kUnfused : attn.backend;
  if (imbalance > 1.0)
    est.bound_terms.push_back(fmt::format("MoE routing imbalance: the busiest expert rank receives {}x its even share "
                                          "of tokens (--moe-routing-imbalance)", imbalance));
  if (bound_attention != attn.backend)
    est.bound_terms.push_back("attention may fall back to unfused (score tensors of s^2 per head kept)");
  const bool second_pass = !est.bound_terms.empty() && est.peak().total_bytes <= options.bound_pass_up_to_bytes;
  const Estimate bound = second_pass ? [&] {
    EstimateOptions quiet = options;
    quiet.components = false;
    quiet.layer_breakdown = false;
    return run_pass(requested, quiet, bound_attention, imbalance);
  }()
                                     : Estimate{};
  std::int64_t slack = 0;
  for (std::size_t i = 0; i < est.stages.size(); ++i) {
    auto& st = est.stages[i];
    const StageEstimate& worst = second_pass ? bound.stages[i] : st;
    // The allocator's block rounding applies to the forward/backward phase of the worse pass.
    const CheckedInt fb = CheckedInt(worst.forward_backward_bytes) + worst.allocator_slack_bytes;
    st.upper_bytes = std::max({st.total_bytes, worst.total_bytes, fb.value()});
    slack = std::max(slack, worst.allocator_slack_bytes);
    if (st.upper_bytes > est.stages[est.upper_stage].upper_bytes) est.upper_stage = i;
  }
  if (slack > 0)
    est.bound_terms.push_back(fmt::format("allocator block rounding: up to 1 MiB for each live activation tensor "
                                          "above 1 MiB ({} MiB at most on a stage)", slack / kMiB));
  return est;
}

Estimate Estimator::run_pass(const TrainingSetup& requested, const EstimateOptions& options,
                             AttentionBackend attention, double imbalance) const {
  const auto& im = *impl_;
  const ModelSpec& m = im.model;
  TrainingSetup req = requested;
  if (const auto& n = req.pipeline.layers_per_virtual_stage) {
    // arguments.py: virtual_pipeline_model_parallel_size = (num_layers // PP) // N.
    if (*n <= 0) throw LayoutError("--num-layers-per-virtual-pipeline-stage must be positive");
    if (req.parallel.pp <= 1) throw LayoutError("--num-layers-per-virtual-pipeline-stage needs --pp > 1");
    const std::int64_t per_rank = m.num_layers / req.parallel.pp;
    if (per_rank % *n != 0)
      throw LayoutError(fmt::format("{} layers per pipeline rank are not divisible by "
                                    "--num-layers-per-virtual-pipeline-stage {}",
                                    per_rank, *n));
    req.parallel.vpp = per_rank / *n;
  }
  const TrainingSetup s = resolve_setup(req);
  const AttentionChoice attn = resolve_attention(s, options.compute_capability);
  // What the block models see: this pass's backend and routed-token factor.
  TrainingSetup block_setup = s;
  block_setup.attention_backend = attention;
  block_setup.moe_routing_imbalance = imbalance > 1.0 ? std::optional<double>(imbalance) : std::nullopt;
  const ParallelLayout& par = s.parallel;

  const std::int64_t t = par.tp, c = par.cp, p = par.pp;
  const CheckedInt h = m.hidden_size;
  const bool sp = sequence_parallel_on(par);
  const CheckedInt tokens = CheckedInt(s.seq_length) * s.micro_batch_size / c;  // T per CP rank
  const CheckedInt local_tokens = sp ? tokens / t : tokens;
  const bool fp8 = s.precision == Precision::kFP8;
  // Activations are kept in the training dtype: 2 bytes (bf16/fp16; FP8 GEMM inputs 1), 4 in fp32.
  const std::int64_t act_bytes = s.precision == Precision::kFP32 ? 4 : 2;
  const double hidden_dropout = s.hidden_dropout.value_or(m.hidden_dropout);
  const double attention_dropout = s.attention_dropout.value_or(m.attention_dropout);
  const CheckedInt norm_params = CheckedInt(m.normalization == Normalization::kLayerNorm ? 2 : 1) * h;
  const std::int64_t vocab = padded_vocab_size(m.vocab_size, s.make_vocab_size_divisible_by, t);
  const CheckedInt vocab_local = vocab / t;
  checked_mul(checked_mul(tokens.value(), vocab_local.value(), "logits"), 8, "logits bytes");

  auto make_ctx = [&](const LayerType& lt, bool is_mtp) {
    BlockContext ctx{m, lt.spec, block_setup};
    ctx.tp = t;
    ctx.cp = c;
    ctx.ep = par.ep;
    ctx.etp = effective_etp(par);
    ctx.sequence_parallel = sp;
    ctx.tokens = tokens.value();
    ctx.local_tokens = local_tokens.value();
    ctx.act_bytes = act_bytes;
    ctx.linear_input_bytes = fp8 ? 1 : act_bytes;
    ctx.hidden_dropout = hidden_dropout;
    ctx.attention_dropout = attention_dropout;
    ctx.is_mtp = is_mtp;
    return ctx;
  };
  const std::int64_t wgrad_bytes = s.precision == Precision::kFP32 ? 4 : 2;
  auto evaluate = [&](const LayerType& lt, bool is_mtp) {
    TypeEval e;
    const BlockContext ctx = make_ctx(lt, is_mtp);
    call_plugin("layer model parameters", [&] {
      lt.attention->parameters(ctx, e.attn_params);
      lt.mlp->parameters(ctx, e.mlp_params);
    });
    add_params(e, e.attn_params);
    add_params(e, e.mlp_params);
    call_plugin("layer model activations", [&] {
      lt.attention->activations(ctx, e.attn_acts);
      lt.mlp->activations(ctx, e.mlp_acts);
    });
    e.saved = CheckedInt(sum_saved(e.attn_acts)) + sum_saved(e.mlp_acts);
    for (const auto* acts : {&e.attn_acts, &e.mlp_acts})
      for (const auto& term : acts->saved) e.large_saved += term.bytes > kLargeAlloc ? 1 : 0;
    if (options.components)
      for (const auto* acts : {&e.attn_acts, &e.mlp_acts})
        for (const auto& term : acts->saved) e.named_saved.emplace_back(fmt::format("activations/{}", term.name), term.bytes);
    e.transient = std::max(e.attn_acts.transient, e.mlp_acts.transient);
    if (!s.gradient_accumulation_fusion) {
      // Without gradient accumulation fusion TE returns each weight gradient as a new tensor
      // in the parameter dtype, which the DDP backward hook adds into main_grad and frees
      // (distributed_data_parallel.py _make_backward_post_hook): the largest GEMM weight of
      // the layer, once, on top of its backward working set.
      CheckedInt largest = 0;
      for (const auto* bp : {&e.attn_params, &e.mlp_params})
        for (const auto& term : bp->terms)
          if (is_gemm_weight(term)) largest = std::max(largest, CheckedInt(term.per_rank));
      e.transient += wgrad_bytes * largest;
    }
    e.global_buffer = std::max(e.attn_acts.global_buffer, e.mlp_acts.global_buffer);
    return e;
  };
  // Block-level checks first (heads, widths by TP/ETP), then the layout as a whole.
  for (const auto& lt : im.types) {
    const BlockContext ctx = make_ctx(lt, false);
    call_plugin("layer model validate", [&] { lt.attention->validate(ctx); });
    call_plugin("layer model validate", [&] { lt.mlp->validate(ctx); });
  }
  validate_setup(m, s);
  std::vector<TypeEval> evals;
  evals.reserve(im.types.size());
  for (const auto& lt : im.types) evals.push_back(evaluate(lt, false));
  const TypeEval mtp_eval = m.mtp_num_layers > 0 ? evaluate(im.types[im.mtp_type], true) : TypeEval{};

  const PipelinePartition part = partition_pipeline(m.num_layers, m.mtp_num_layers, par, s.pipeline);
  const std::int64_t v = part.vpp;

  // Full recompute (transformer_block.py _checkpointed_forward): a checkpointed layer keeps
  // only its input hidden states, [s/TP (SP), b, h] per micro-batch.
  const auto& rc = s.recompute;
  const bool full_recompute = rc.granularity == RecomputeGranularity::kFull;
  const CheckedInt layer_input_bytes = act_bytes * local_tokens * h;

  // Bytes per parameter (distributed_optimizer / param_and_grad_buffer.py).
  const auto& opt = s.optimizer;
  const DType param_dtype = s.precision == Precision::kFP16   ? DType::kFP16
                            : s.precision == Precision::kFP32 ? DType::kFP32
                                                              : DType::kBF16;
  const DType grad_dtype = opt.main_grads.value_or(s.precision == Precision::kFP16 ? DType::kFP16 : DType::kFP32);
  const std::int64_t param_b = dtype_bytes(param_dtype);
  const std::int64_t grad_b = dtype_bytes(grad_dtype);
  // Optimizer state bytes per parameter, before sharding.
  // fp32 training needs no separate fp32 master copy of the parameters.
  std::int64_t main_param_b = param_dtype == DType::kFP32 ? 0 : 4, exp_avg_b = 4, exp_avg_sq_b = 4,
               main_grad_copy_b = 0;
  if (opt.precision_aware) {
    // TE FusedAdam master weights: a 16-bit remainder of a bf16 param (store_param_remainders),
    // else the chosen dtype (optimizer/__init__.py, distrib_optimizer.py).
    main_param_b = opt.main_params == DType::kFP32
                       ? (opt.store_param_remainders && param_dtype == DType::kBF16 ? 2 : 4)
                       : dtype_bytes(opt.main_params);
    exp_avg_b = dtype_bytes(opt.exp_avg);
    exp_avg_sq_b = dtype_bytes(opt.exp_avg_sq);
  } else if (grad_dtype != DType::kFP32) {
    // Float16 optimizers copy 16-bit main grads to fp32 (main_param.grad = main_grad.float()).
    main_grad_copy_b = 4;
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
  const std::int64_t torch_workspace =
      !s.cublas_workspace_config.empty() ? parse_cublas_workspace_config(s.cublas_workspace_config)
      : hopper_or_newer                  ? 4096 * 1024 * 8
                                         : 4096 * 1024 * 2 + 16 * 1024 * 8;
  bool grouped_gemm = false;
  for (const auto& lt : im.types)
    grouped_gemm = grouped_gemm || (lt.spec.mlp.num_experts > 0 && s.moe_grouped_gemm && s.transformer_engine);

  Estimate est;
  est.setup = s;
  est.attention = attn.backend;
  est.stages.reserve(static_cast<std::size_t>(p));
  {
    const ParamCount& pc = im.params;
    est.model = ModelSummary{m.name, m.family, m.model_type, m.adapter, pc.total, pc.active, pc.mtp, vocab,
                             m.num_layers, h.value()};
  }
  if (options.components && options.layer_breakdown) {
    auto describe = [&](const LayerType& lt, const TypeEval& e, std::int64_t count, bool mtp) {
      LayerKindEstimate k;
      k.attention = lt.spec.attention.kind;
      k.mlp = lt.spec.mlp.kind;
      k.layers = count;
      k.mtp = mtp;
      k.parameters = (e.tp_params + e.rep_params + e.exp_params).value();
      k.activation_bytes_per_microbatch = e.saved.value();
      k.transient_bytes = e.transient.value();
      for (const auto* bp : {&e.attn_params, &e.mlp_params})
        for (const auto& term : bp->terms)
          k.components.push_back({fmt::format("parameters/{}", term.name), MemoryCategory::kWeights, term.per_rank});
      for (const auto& [name, bytes] : e.named_saved)
        k.components.push_back({name, MemoryCategory::kActivations, bytes});
      est.layer_kinds.push_back(std::move(k));
    };
    for (std::size_t ti = 0; ti < im.types.size(); ++ti)
      describe(im.types[ti], evals[ti], im.count_in(ti, 0, m.num_layers), false);
    if (m.mtp_num_layers > 0) describe(im.types[im.mtp_type], mtp_eval, 0, true);
  }


  std::int64_t best_total = -1;
  for (std::int64_t r = 0; r < p; ++r) {
    StageEstimate st;
    st.pp_rank = r;
    ComponentSink comps(options.components);
    const std::vector<std::int64_t> inflight =
        inflight_microbatches(p, v, r, s.num_micro_batches, s.pipeline.microbatch_group_size.value_or(0));

    CheckedInt tp_params = 0, rep_params = 0, exp_params = 0, fp8_params = 0;
    // The decoder (and MTP) layers' parameters: Megatron-FSDP's units.
    CheckedInt unit_dense = 0, unit_expert = 0, units = 0, largest_unit = 0;
    CheckedInt saved = 0, transient = 0, sp_gather_buffer = 0;
    CheckedInt large_tensors = 3;  // the transient working set: a few tensors
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
        unit_dense += n * (e.tp_params + e.rep_params);
        unit_expert += n * e.exp_params;
        units += n;
        largest_unit = std::max(largest_unit, e.tp_params + e.rep_params + e.exp_params);
        transient = std::max(transient, e.transient);
        sp_gather_buffer = std::max(sp_gather_buffer, e.global_buffer);
        max_layer_saved = std::max(max_layer_saved, e.saved);
        max_layer_large = std::max(max_layer_large, e.large_saved);
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
      for (std::size_t ti = 0; ti < im.types.size(); ++ti) {
        const std::int64_t n = im.count_in(ti, ch.first_layer, ch.num_layers);
        if (n == 0) continue;
        const std::int64_t rec = std::min(n, recompute_left);
        recompute_left -= rec;
        account_layers(evals[ti], n, rec);
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
      } else if (full_recompute && layers_in_chunk > 0) {
        transient = std::max(transient, max_layer_saved);  // block: one layer at a time
        large_tensors += max_layer_large;
      }

      if (ch.embedding) {
        // LanguageModelEmbedding: word embedding [V/TP, h], vocab-parallel.
        tp_params += vocab_local * h;
        if (m.position_embedding == PositionEmbedding::kLearnedAbsolute) rep_params += h * m.max_position_embeddings;
        // Embedding lookup keeps the int64 token ids of the micro-batch for backward.
        act("activations/embedding/token_ids", 8 * tokens);
        // Embedding dropout keeps a 1-byte mask of its [s/TP, b, h] output.
        if (hidden_dropout > 0) act("activations/embedding/dropout_mask", local_tokens * h);
      }
      if (ch.mtp_layers > 0) {
        // MultiTokenPredictionLayer: enorm + hnorm + eh_proj (2h -> h, column-parallel) + final norm.
        tp_params += CheckedInt(ch.mtp_layers) * 2 * h * h / t;
        fp8_params += CheckedInt(ch.mtp_layers) * 2 * h * h / t;
        rep_params += CheckedInt(ch.mtp_layers) * 3 * norm_params;
        // Per depth: shifted token ids, enorm and hnorm inputs/outputs, the concatenated
        // [s/TP, b, 2h] eh_proj input, and the depth's final-norm input and output.
        act("activations/mtp/token_ids", CheckedInt(ch.mtp_layers) * 8 * tokens);
        act("activations/mtp/norms_and_eh_proj",
            CheckedInt(ch.mtp_layers) * act_bytes * local_tokens * h * (4 + 2 + 2));
      }
      if (ch.loss) {
        // Final norm [h] and output layer [V/TP, h]; tied embeddings skip the output weight
        // only when the same stage holds the embedding (gpt_model.py, pre_process).
        rep_params += norm_params;
        if (!(m.tie_embeddings && p == 1)) tp_params += vocab_local * h;
        const CheckedInt heads = CheckedInt(1) + ch.mtp_layers;  // main loss + one per MTP depth
        // Final norm keeps its input; the output layer keeps its (sequence-local) input.
        act("activations/final_norm_and_output_input", heads * 2 * act_bytes * local_tokens * h);
        // Every loss path keeps an fp32 [T, V/TP] tensor for backward: the unfused
        // tensor_parallel/cross_entropy.py and the fused native fusions/fused_cross_entropy.py
        // (calculate_logits_max: logits.float(); the softmax saved) alike, and TE's
        // parallel_cross_entropy (cross_entropy.py: grad_input = empty_like(fp32), saved).
        act("activations/logits_fp32_softmax", heads * 4 * tokens * vocab_local);
        // ...while the bf16 logits are still alive (forward), and the bf16 cast of the fp32
        // logits gradient (backward): one more 2-byte copy.
        transient = std::max(transient, act_bytes * tokens * vocab_local);
        if (s.cross_entropy_fusion && !s.cross_entropy_te) {
          // The native fused path runs calculate_predicted_logits through jit_fuser
          // (torch.compile, megatron/core/jit.py): the compiled graph applies the in-place
          // `-= max` and `exp(out=)` to its fp32 input by computing the result into a new
          // buffer and copying it back, so the fp32 logits exist twice next to the bf16 ones.
          transient = std::max(transient, (CheckedInt(act_bytes) + 4) * tokens * vocab_local);
        }
        // Megatron's own ColumnParallelLinear (the output layer) all-gathers its SP input into
        // the persistent global memory buffer (parallel_state.get_global_memory_buffer).
        if (sp) sp_gather_buffer = std::max(sp_gather_buffer, act_bytes * tokens * h);
      }
      ce.activation_bytes_per_microbatch = chunk_act.value();
      saved += chunk_act * mb;
      large_tensors += chunk_large * mb;
      if (ch.loss && s.defer_embedding_wgrad) {
        // --defer-embedding-wgrad-compute (tensor_parallel/layers.py, gpt_model.py): the last
        // stage's output layer keeps each micro-batch's input and logits gradient in
        // embedding_activation_buffer / grad_output_buffer until the pipeline flush
        // (schedules.py finish_embedding_wgrad_compute), for up to --wgrad-deferral-limit of them.
        const std::int64_t all = s.num_micro_batches > 0 ? s.num_micro_batches : p;
        const std::int64_t k = s.wgrad_deferral_limit > 0 ? std::min(s.wgrad_deferral_limit, all) : all;
        const CheckedInt deferred = CheckedInt(k) * act_bytes * (tokens * vocab_local + local_tokens * h);
        saved += deferred;
        comps.add(MemoryCategory::kActivations, "activations/deferred_output_wgrad_buffers", deferred);
      }
      st.layers += ch.num_layers;
      st.mtp_layers += ch.mtp_layers;
      st.chunks.push_back(ce);
    }
    // Static memory.
    const CheckedInt dense_params = tp_params + rep_params;
    const CheckedInt parameters = dense_params + exp_params;
    st.parameters = parameters.value();
    st.expert_parameters = exp_params.value();
    std::optional<ShardedDpMemory> fsdp;
    if (s.fsdp.kind != FsdpKind::kNone) {
      ShardedDpStage sd;
      sd.unit_dense = unit_dense;
      sd.unit_expert = unit_expert;
      sd.other_dense = dense_params - unit_dense;
      sd.units = units;
      sd.largest_unit = largest_unit;
      sd.fp8_params = fp8_params;
      sd.dense_group = par.dp * c / opt.instances;
      sd.expert_group = par.expert_dp / opt.instances;
      sd.instances = opt.instances;
      sd.param_bytes = param_b;
      sd.fp8_param_gather = s.fp8_param_gather;
      fsdp = sharded_data_parallel_memory(sd, s.fsdp, opt, param_dtype);
    }
    if (transient > 0) comps.add(MemoryCategory::kActivations, "activations/transient_peak", transient);
    if (fsdp && fsdp->transient > 0) {
      // Gathered layers and unsharded gradient buckets at the backward's start, next to the
      // activations and the block's own working set.
      transient += fsdp->transient;
      comps.add(MemoryCategory::kActivations, "activations/fsdp_in_flight", fsdp->transient);
    }

    CheckedInt weight = param_b * parameters;
    if (s.fp8_param_gather) weight -= (param_b - 1) * fp8_params;  // uint8 param buffer for FP8 GEMM weights
    CheckedInt gradient_bytes = grad_b * parameters;
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
      const CheckedInt muon_dense = std::max(std::min(fp8_params, dense_params) - std::min(fp8_params, exp_params),
                                             CheckedInt(0));
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
      const CheckedInt grad_copy = shard(main_grad_copy_b, dense_params, dense_shards, false) +
                                   shard(main_grad_copy_b, exp_params, expert_shards, false);
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
      comps.add(MemoryCategory::kWeights, "weights/dense", param_b * dense_params);
      comps.add(MemoryCategory::kWeights, "weights/experts", param_b * exp_params);
      comps.add(MemoryCategory::kGradients, "gradients/main_grad_buffer", gradient_bytes);
    }

    CheckedInt other = te_workspace + 2 * CheckedInt(torch_workspace);
    comps.add(MemoryCategory::kOther, "other/te_cublas_workspace", te_workspace);
    comps.add(MemoryCategory::kOther, "other/torch_cublas_workspaces", 2 * CheckedInt(torch_workspace));
    if (grouped_gemm) {
      // TE grouped GEMM (TEGroupedMLP) adds one cuBLAS workspace per extra stream
      // (get_multi_stream_cublas_workspace, 4 streams).
      other += 4 * te_workspace;
      comps.add(MemoryCategory::kOther, "other/te_grouped_gemm_workspaces", 4 * te_workspace);
    }
    other += sp_gather_buffer;
    comps.add(MemoryCategory::kOther, "other/megatron_global_memory_buffer", sp_gather_buffer);
    if (fp8 && !s.fp8_param_gather) {
      // TE caches the FP8 copy (and its transpose) of every GEMM weight across micro-batches.
      other += 2 * fp8_params;
      comps.add(MemoryCategory::kOther, "other/te_fp8_weight_cache", 2 * fp8_params);
    }
    if (fsdp) {
      other += fsdp->persistent_buffers;
      for (const auto& [name, bytes] : fsdp->other_terms) comps.add(MemoryCategory::kOther, name, bytes);
    }
    st.other_bytes = other.value();
    const CheckedInt activation_bytes = saved + transient;
    const CheckedInt static_bytes = weight + gradient_bytes + optim + other;
    st.activation_bytes = activation_bytes.value();
    st.static_bytes = static_bytes.value();
    st.step_only_bytes = step_only.value();
    // The peak of a step is the larger of its phases, not their sum.
    st.forward_backward_bytes = (static_bytes - step_only + activation_bytes).value();
    st.optimizer_step_bytes = (static_bytes + (fsdp ? fsdp->step_transient : CheckedInt(0))).value();
    st.total_bytes = std::max(st.forward_backward_bytes, st.optimizer_step_bytes);
    st.peak_phase = st.optimizer_step_bytes > st.forward_backward_bytes ? "optimizer-step" : "forward-backward";
    // The blocks of the live activation tensors at the forward/backward peak can exceed their
    // sizes (kLargeAlloc above): the bound allows the worst case.
    st.allocator_slack_bytes = (large_tensors * kLargeAlloc).value();
    st.inflight_microbatches = inflight.front();
    st.components = comps.take();
    if (st.total_bytes > best_total) {
      best_total = st.total_bytes;
      est.peak_stage = static_cast<std::size_t>(r);
    }
    est.stages.push_back(std::move(st));
  }

  if (!options.components) return est;  // the assumptions are for people; the planner needs none
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
  for (const auto& lt : im.types) {
    if (lt.spec.mlp.num_experts > 0) {
      a.push_back(s.moe_capacity_factor
                      ? fmt::format("MoE capacity factor {}{}", *s.moe_capacity_factor,
                                    s.moe_pad_to_capacity ? ", expert inputs padded to capacity" : "")
                      : "dropless MoE with balanced routing (each rank receives its average share of tokens)");
      break;
    }
  }
  a.push_back(fmt::format("{} cross entropy: fp32 [tokens, vocab/TP] kept for backward",
                          !s.cross_entropy_fusion ? "unfused" : s.cross_entropy_te ? "fused (te)" : "fused (native)"));
  if (!s.gradient_accumulation_fusion)
    a.push_back("no gradient accumulation fusion: each weight gradient is a separate tensor before it joins main_grad");
  for (const auto& st : est.stages) {
    if (st.step_only_bytes > 0) {
      a.push_back("16-bit gradients: their fp32 copies exist only from the optimizer step to the next zero_grad, "
                  "not next to the activations");
      break;
    }
  }
  a.push_back("totals are allocator-visible bytes (torch.cuda.max_memory_allocated); the CUDA context, NCCL buffers "
              "and allocator fragmentation are covered by the fit verdict's reserve and headroom");
  return est;
}

}  // namespace mme
