// The estimation engine. Each memory term below names, in one comment line, the Megatron-LM
// behaviour it models (file and function in Megatron-LM / megatron-core / Transformer Engine).
#include "mme/engine/estimator.hpp"

#include <algorithm>
#include <atomic>
#include <map>

#include <fmt/core.h>

#include "mme/engine/pipeline.hpp"
#include "mme/sdk/block_helpers.hpp"
#include "mme/sdk/checked.hpp"
#include "mme/sdk/error.hpp"

#include "device_memory.hpp"
#include "estimator_phases.hpp"

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

const EngineTables& engine_tables(const Estimator& estimator) { return *estimator.impl_; }

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
  static std::atomic<std::uint64_t> next_id{1};
  impl_->id = next_id.fetch_add(1, std::memory_order_relaxed);
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
  TrainingSetup single;
  single.parallel.world_size = 1;
  single.lora = lora;
  single = resolve_setup(single);
  // As the estimate: each block says whether it models LoRA (a block whose linears are not the
  // targets refuses it in validate()).
  for (const auto& lt : im.types) {
    const BlockContext ctx = single_gpu_context(im.model, lt.spec, single, false);
    call_plugin("layer model validate", [&] {
      lt.attention->validate(ctx);
      lt.mlp->validate(ctx);
    });
  }
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
  // (It reads the backend, the implementation, the environment and CP, which resolve_setup keeps,
  // and what the model's attention rules out.)
  const AttentionChoice attn = resolve_attention(requested, options.compute_capability, &impl_->model);
  // The point estimate's pass (phases 1 to 3 for every stage), then the bound (phase 4).
  Estimate est = point_estimate(*impl_, requested, options, attn);
  add_upper_bound(*impl_, options, attn, est);
  // The device total of each stage and of the bound (device_memory.cpp).
  finish_device_memory(est);
  return est;
}

Estimate estimate_peak_stages(const Estimator& estimator, const TrainingSetup& setup, const EstimateOptions& options) {
  EstimateOptions quiet = options;
  quiet.components = false;
  quiet.layer_breakdown = false;
  quiet.bound_terms = false;
  quiet.device_memory = false;
  const EngineTables& im = engine_tables(estimator);
  const AttentionChoice attn = resolve_attention(setup, quiet.compute_capability, &im.model);
  Estimate est = point_estimate(im, setup, quiet, attn, StageSelection::kMaySetPeak);
  add_upper_bound(im, quiet, attn, est, StageSelection::kMaySetPeak);
  return est;
}

}  // namespace mme
