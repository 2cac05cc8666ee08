// The estimation engine. Each memory term below names, in one comment line, the Megatron-LM
// behaviour it models (file and function in Megatron-LM / megatron-core / Transformer Engine).
#include "mme/engine/estimator.hpp"

#include <algorithm>
#include <map>

#include <fmt/core.h>

#include "mme/engine/pipeline.hpp"
#include "mme/sdk/block_helpers.hpp"
#include "mme/sdk/checked.hpp"
#include "mme/sdk/error.hpp"

#include "communication_buffers.hpp"
#include "device_memory.hpp"
#include "estimator_internal.hpp"
#include "moe_routing.hpp"

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

struct Estimator::Impl : EngineTables {};

namespace {
constexpr std::string_view kUnfusedFallbackTerm =
    "attention may fall back to unfused (score tensors of s^2 per head kept)";
}  // namespace

const EngineTables& engine_tables(const Estimator& estimator) { return *estimator.impl_; }

namespace {

// Every pipeline stage of a pass, first to last.
std::vector<StageEstimate> stage_estimates(const Pass& ps) {
  std::vector<StageEstimate> out;
  out.reserve(static_cast<std::size_t>(ps.p));
  std::vector<std::int64_t> inflight;
  inflight.reserve(static_cast<std::size_t>(ps.v));
  for (std::int64_t r = 0; r < ps.p; ++r) {
    out.push_back(estimate_stage(ps, r, inflight));
    // The device total: the caching allocator's replay and what lies outside it (device_memory.cpp).
    if (ps.options.device_memory) add_device_memory(ps, out.back());
  }
  return out;
}

}  // namespace

namespace {

// A layer kind's parameter terms on one GPU: what `params` counts and the planner's speed proxy
// reads (unsharded totals and the elements one token uses).
BlockContext single_gpu_context(const ModelSpec& m, const LayerSpec& layer, const TrainingSetup& single, bool is_mtp) {
  BlockContext ctx{m, layer, single};
  ctx.is_mtp = is_mtp;
  ctx.vocab_local = padded_vocab_size(m.vocab_size, single.make_vocab_size_divisible_by, 1);
  return ctx;
}

KindParams single_gpu_params(const EngineTables& im, const LayerType& lt, const TrainingSetup& single, bool is_mtp) {
  const BlockContext ctx = single_gpu_context(im.model, lt.spec, single, is_mtp);
  KindParams kp;
  call_plugin("layer model parameters", [&] {
    lt.attention->parameters(ctx, kp.attention);
    lt.mlp->parameters(ctx, kp.mlp);
  });
  return kp;
}

// The layer-memory model of a block around the decoder layers, checked for its role.
LmBlock find_lm_block(const Registry& registry, const std::string& kind, BlockRole role, const LayerSpec& layer) {
  LmBlock b;
  b.model = registry.find_layer_model(kind);
  b.layer = &layer;
  if (!b.model || b.model->role() != role)
    throw PluginError(
        fmt::format("no layer-memory model for {} kind '{}' is loaded (check `mme plugins`)", to_string(role), kind));
  return b;
}

bool has_expert_params(const KindParams& kp) {
  for (const BlockParams* bp : {&kp.attention, &kp.mlp})
    for (const auto& t : bp->terms)
      if (t.shard == ShardClass::kExpert) return true;
  return false;
}

}  // namespace

Estimator::Estimator(const ModelSpec& model, const Registry& registry) : impl_(std::make_unique<Impl>()) {
  validate_model_blocks(model, registry);
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
  TrainingSetup single;
  single.parallel.world_size = 1;
  single = resolve_setup(single);
  for (auto& t : im.types) {
    t.single_gpu = single_gpu_params(im, t, single, false);
    t.moe = has_expert_params(t.single_gpu);
    im.any_moe = im.any_moe || t.moe;
  }
  if (im.model.mtp_num_layers > 0) im.mtp_single_gpu = single_gpu_params(im, im.types[im.mtp_type], single, true);
  // The blocks around the layers: the embedding sees the first decoder layer, the output head
  // and the MTP projection the last.
  const auto& lm = im.model.lm_blocks;
  im.embedding = find_lm_block(registry, lm.embedding, BlockRole::kEmbedding, im.model.layers.front());
  im.output_head = find_lm_block(registry, lm.output_head, BlockRole::kOutputHead, im.model.layers.back());
  if (im.model.mtp_num_layers > 0)
    im.mtp_projection = find_lm_block(registry, lm.mtp_projection, BlockRole::kMtpProjection, im.model.layers.back());
  for (LmBlock* b : {&im.embedding, &im.output_head, &im.mtp_projection}) {
    if (!b->model) continue;
    const BlockContext ctx = single_gpu_context(im.model, *b->layer, single, b == &im.mtp_projection);
    call_plugin("layer model parameters", [&] { b->model->parameters(ctx, b->single_gpu); });
  }
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
  std::map<std::string, CheckedInt> total, active;
  std::vector<std::string> order;
  auto add = [&](const std::string& group, CheckedInt t, CheckedInt a) {
    if (!total.count(group)) order.push_back(group);
    total[group] += t;
    active[group] += a;
  };
  ParamCount out;
  // The embedding and the output head with the final norm, as their block models count them
  // (HF checkpoints store the unpadded vocabulary; a tied output layer is the embedding's weight).
  for (const LmBlock* b : {&im.embedding, &im.output_head})
    for (const auto& term : b->single_gpu.terms) add(to_string(term.group), term.total, term.active);
  // Identical layers count alike: once per layer kind, times the number of layers of that kind.
  for (std::size_t ti = 0; ti < im.types.size(); ++ti) {
    const CheckedInt n = im.count_in(ti, 0, m.num_layers);
    const KindParams& kp = im.types[ti].single_gpu;
    for (const BlockParams* bp : {&kp.attention, &kp.mlp})
      for (const auto& term : bp->terms) add(to_string(term.group), n * term.total, n * term.active);
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
  // MTP depth: a transformer layer of the last layer's kind and the MTP projection block
  // (enorm, hnorm, eh_proj, its own final norm); the embedding and output head are shared with
  // the main model. Every depth is alike: one depth's count times the depth.
  if (m.mtp_num_layers > 0) {
    CheckedInt t = mme::sum_total(im.mtp_projection.single_gpu);
    for (const BlockParams* bp : {&im.mtp_single_gpu.attention, &im.mtp_single_gpu.mlp})
      for (const auto& term : bp->terms) t += term.total;
    out.mtp = (t * m.mtp_num_layers).value();
  }
  if (out.mtp > 0) out.breakdown.emplace_back("mtp", out.mtp);
  return out;
}

Estimator::LoraCount Estimator::count_lora_parameters(const LoraSettings& lora) const {
  const auto& im = *impl_;
  // As the estimate (lora.cpp validate_lora): MLA's linears are not the four targets.
  for (const auto& lt : im.types)
    if (lt.spec.attention.kind == "mla") throw LayoutError("LoRA on multi-latent attention is not modelled");
  TrainingSetup single;
  single.parallel.world_size = 1;
  single.lora = lora;
  single = resolve_setup(single);
  CheckedInt total = 0, active = 0, mtp = 0;
  auto add = [](const KindParams& kp, CheckedInt n, CheckedInt& t, CheckedInt* a) {
    for (const BlockParams* bp : {&kp.attention, &kp.mlp})
      for (const auto& term : bp->terms) {
        if (term.group != ParamGroup::kLoraAdapter) continue;
        t += n * term.total;
        if (a) *a += n * term.active;
      }
  };
  for (std::size_t ti = 0; ti < im.types.size(); ++ti)
    add(single_gpu_params(im, im.types[ti], single, false), im.count_in(ti, 0, im.model.num_layers), total, &active);
  if (im.model.mtp_num_layers > 0)
    add(single_gpu_params(im, im.types[im.mtp_type], single, true), im.model.mtp_num_layers, mtp, nullptr);
  return LoraCount{total.value(), active.value(), mtp.value()};
}

Estimate Estimator::run(const TrainingSetup& requested, const EstimateOptions& options) const {
  // Transformer Engine's attention choice on this GPU (training_setup.cpp resolve_attention).
  // (It reads only the backend, the implementation and the environment, which resolve_setup keeps.)
  const AttentionChoice attn = resolve_attention(requested, options.compute_capability);
  Estimate est = run_pass(requested, options, attn, attn.backend, 1.0);
  for (auto& st : est.stages) st.upper_bytes = st.total_bytes;
  est.upper_stage = est.peak_stage;
  if (!options.upper_bound) {
    finish_device_memory(est);
    return est;
  }

  // The upper bound: what the point estimate cannot pin down, each a named mechanism
  // (docs/memory-model.md, "Upper bound").
  const TrainingSetup& s = est.setup;
  double imbalance = 1.0;
  if (impl_->any_moe && !(s.moe_capacity_factor && s.moe_pad_to_capacity)) {
    // Routing imbalance: the busiest expert rank receives more than its even share (most of
    // all early in training); a capacity factor drops tokens beyond it (moe_utils.py
    // get_capacity), so it caps the excess. Forced balancing leaves only uniform routing's
    // chance fluctuation (moe_routing.hpp); a value the user gives wins.
    imbalance = s.moe_routing_imbalance ? *s.moe_routing_imbalance
                : s.moe_force_load_balancing ? uniform_routing_imbalance(*impl_, s)
                                             : kDefaultMoeRoutingImbalance;
    if (s.moe_capacity_factor) imbalance = std::min(imbalance, std::max(1.0, *s.moe_capacity_factor));
  }
  const AttentionBackend bound_attention = attn.may_fall_back_to_unfused ? AttentionBackend::kUnfused : attn.backend;
  // The terms' text is worded only for a caller that shows it (the planner does not).
  const bool words = options.bound_terms;
  if (imbalance > 1.0 && words)
    est.bound_terms.push_back(
        fmt::format("MoE routing imbalance: the busiest expert rank receives {:.4g}x its even share "
                    "of tokens ({})",
                    imbalance,
                    !s.moe_routing_imbalance && s.moe_force_load_balancing
                        ? "the chance excess of random routing under --moe-router-force-load-balancing, passed with "
                          "probability below 0.1 %"
                        : "--moe-routing-imbalance"));
  if (bound_attention != attn.backend && words) est.bound_terms.emplace_back(kUnfusedFallbackTerm);
  const bool uncertain = imbalance > 1.0 || bound_attention != attn.backend;
  const bool second_pass = uncertain && est.peak().total_bytes <= options.bound_pass_up_to_bytes;
  // The bound's pass: only its stages are read (no setup, model summary or components).
  const std::vector<StageEstimate> bound = second_pass ? [&] {
    EstimateOptions quiet = options;
    quiet.components = false;
    quiet.layer_breakdown = false;
    quiet.bound_terms = false;
    quiet.device_memory = false;  // the bound's device total derives from the estimate's (finish_device_memory)
    try {
      return stage_estimates(prepare_pass(*impl_, requested, quiet, attn, bound_attention, imbalance, PassKind::kBound));
    } catch (const LayoutError& e) {
      if (bound_attention == attn.backend) throw;
      // A fallback the blocks refuse under this layout (unfused attention cannot run context
      // parallelism) is no state the run can reach: without flash-attn it stops instead.
      if (words) {
        est.assumptions.push_back(fmt::format(
            "no unfused-attention fallback in the upper bound: {}; without flash-attn this run stops instead",
            e.what()));
        std::erase(est.bound_terms, std::string(kUnfusedFallbackTerm));
      }
      return stage_estimates(prepare_pass(*impl_, requested, quiet, attn, attn.backend, imbalance, PassKind::kBound));
    }
  }()
                                                       : std::vector<StageEstimate>{};
  std::int64_t slack = 0, offload_slack = 0, graph_pool = 0, cached_wgrad = 0;
  for (std::size_t i = 0; i < est.stages.size(); ++i) {
    auto& st = est.stages[i];
    const StageEstimate& worst = second_pass ? bound[i] : st;
    // The allocator's block rounding and what activation offloading may keep on the GPU apply to
    // the forward/backward phase of the worse pass.
    // With CUDA graphs a replayed step holds the graphs' private pool next to what it allocates
    // (cuda_graphs.hpp).
    const CheckedInt graphed = CheckedInt(worst.cuda_graph_replay_bytes) + worst.cuda_graph_pool_bytes;
    const CheckedInt fb = CheckedInt(std::max(worst.forward_backward_bytes, graphed.value())) +
                          worst.allocator_slack_bytes + worst.offload_slack_bytes;
    offload_slack = std::max(offload_slack, worst.offload_slack_bytes);
    graph_pool = std::max(graph_pool, worst.cuda_graph_pool_bytes);
    // Communication buffers outside the allocator and the buckets' padding, next to either phase
    // (communication_buffers.cpp).
    st.upper_bytes = (CheckedInt(std::max({st.total_bytes, worst.total_bytes, fb.value()})) +
                      st.outside_allocator_bytes + st.bucket_padding_bytes + st.cached_output_wgrad_bytes)
                         .value();
    cached_wgrad = std::max(cached_wgrad, st.cached_output_wgrad_bytes);
    slack = std::max(slack, worst.allocator_slack_bytes);
    if (st.upper_bytes > est.stages[est.upper_stage].upper_bytes) est.upper_stage = i;
  }
  finish_device_memory(est);
  if (!words) return est;
  add_communication_bound_terms(est, est.bound_terms);
  if (graph_pool > 0)
    est.bound_terms.push_back(
        fmt::format("CUDA graphs: the graphs' private memory pool ({} MiB at most on a stage), reserved but not "
                    "allocated while they replay",
                    graph_pool / kMiB));
  if (offload_slack > 0)
    est.bound_terms.push_back(
        fmt::format("activation offloading: a second layer's offloaded tensors on the GPU during backward ({} MiB "
                    "at most on a stage)",
                    offload_slack / kMiB));
  if (cached_wgrad > 0)
    est.bound_terms.push_back(
        fmt::format("the output layer's weight-gradient placeholder kept for the run, as Megatron-LM releases "
                    "after core_r0.14 keep it in Transformer Engine's cache ({} MiB on the loss stage)",
                    cached_wgrad / kMiB));
  if (slack > 0)
    est.bound_terms.push_back(
        fmt::format("allocator block rounding: up to 1 MiB for each live activation tensor "
                    "above 1 MiB ({} MiB at most on a stage)",
                    slack / kMiB));
  return est;
}

Estimate Estimator::run_pass(const TrainingSetup& requested, const EstimateOptions& options,
                             const AttentionChoice& choice, AttentionBackend attention, double imbalance) const {
  Pass ps = prepare_pass(*impl_, requested, options, choice, attention, imbalance, PassKind::kEstimate);
  const ModelSpec& m = impl_->model;
  Estimate est;
  est.attention = ps.attn.backend;
  const ParamCount& pc = impl_->params;
  est.model = ModelSummary{m.name,    m.family, m.model_type, m.adapter,    pc.total,
                           pc.active, pc.mtp,   ps.vocab,     m.num_layers, ps.h.value()};
  if (options.components && options.layer_breakdown) describe_layer_kinds(ps, est);
  est.stages = stage_estimates(ps);
  for (std::size_t r = 0; r < est.stages.size(); ++r)
    if (est.stages[r].total_bytes > est.stages[est.peak_stage].total_bytes) est.peak_stage = r;
  if (options.components) add_assumptions(ps, est);  // for people; the planner needs none
  if (options.components && options.device_memory) add_device_assumptions(ps, est.assumptions);
  if (options.device_memory) est.allocator_config = allocator_config_text(ps.s);
  est.setup = std::move(ps.s);
  return est;
}

}  // namespace mme
