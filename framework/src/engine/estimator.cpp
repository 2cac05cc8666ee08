// The estimation engine. Each memory term below names, in one comment line, the Megatron-LM
// behaviour it models (file and function in Megatron-LM / megatron-core / Transformer Engine).
#include "mme/engine/estimator.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/core.h>

#include "mme/sdk/checked.hpp"
#include "mme/sdk/error.hpp"
#include "estimator_internal.hpp"
#include "mme/engine/pipeline.hpp"

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
  const Pass ps = prepare_pass(*impl_, requested, options, attention, imbalance);
  const ModelSpec& m = impl_->model;
  Estimate est;
  est.setup = ps.s;
  est.attention = ps.attn.backend;
  est.stages.reserve(static_cast<std::size_t>(ps.p));
  const ParamCount& pc = impl_->params;
  est.model = ModelSummary{m.name, m.family, m.model_type, m.adapter, pc.total, pc.active, pc.mtp, ps.vocab,
                           m.num_layers, ps.h.value()};
  if (options.components && options.layer_breakdown) describe_layer_kinds(ps, est);
  std::int64_t best_total = -1;
  for (std::int64_t r = 0; r < ps.p; ++r) {
    est.stages.push_back(estimate_stage(ps, r));
    if (est.stages.back().total_bytes > best_total) {
      best_total = est.stages.back().total_bytes;
      est.peak_stage = static_cast<std::size_t>(r);
    }
  }
  if (options.components) add_assumptions(ps, est);  // for people; the planner needs none
  return est;
}

}  // namespace mme
