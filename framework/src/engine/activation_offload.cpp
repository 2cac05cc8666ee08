// Activation offloading (activation_offload.hpp). Each rule names the Megatron-LM or Transformer
// Engine code it models.
#include "activation_offload.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

namespace mme {

namespace {

// The groups a decoder layer opens in its forward, in order (transformer_layer.py: attn_norm,
// then the attention's qkv_linear, core_attn, attn_proj; mlp_norm, then the experts' expert_fc1
// and moe_act). fused_group_mlp is refused and gdp_qkv belongs to layers mme does not model.
constexpr std::uint32_t kGroupOrder[] = {kOffloadAttnNorm, kOffloadQkvLinear, kOffloadCoreAttn, kOffloadAttnProj,
                                         kOffloadMlpNorm,  kOffloadExpertFc1, kOffloadMoeAct};

// TE's default offload path moves only tensors of at least 256K elements
// (cpu_offload.py OffloadableLayerState._check_if_offload).
constexpr std::int64_t kTeMinOffloadElements = 256 * 1024;

bool layer_offload_on(const ActivationOffloadSettings& o) {
  // arguments.py: --cpu-offloading-num-layers > 0 sets cpu_offloading.
  return o.cpu_offloading || o.cpu_offloading_num_layers > 0;
}

// Whether a saved term of a decoder layer goes to the host, module and size permitting.
bool fine_grained_moves(const ActivationOffloadSettings& o, const ActTerm& t) {
  // ChunkOffloadHandler.tensor_need_offloading_checker: numel >= min_offloaded_tensor_size.
  return (t.module & o.modules) != 0 && t.tensor_elements > 0 && t.tensor_elements >= o.min_tensor_size;
}
bool layer_offload_moves(const ActivationOffloadSettings& o, const ActTerm& t) {
  if (!o.cpu_offloading_activations || t.tensor_elements <= 0) return false;
  // The v1 path offloads what TE's modules mark (mark_activation_offload), whatever its size.
  return o.te_offload_v1 || t.tensor_elements >= kTeMinOffloadElements;
}

template <typename Moves>
CheckedInt sum_moving(const TypeEval& e, Moves moves) {
  CheckedInt sum = 0;
  for (const auto* acts : {&e.attn_acts, &e.mlp_acts})
    for (const auto& t : acts->saved)
      if (moves(t)) sum += t.bytes;
  return sum;
}

// Subtracts the share of a layer's named terms that `moves` sends to the host, for `mb`
// micro-batches; counts the moving tensors above kLargeAlloc.
template <typename Moves>
CheckedInt subtract_moving(const TypeEval& e, std::int64_t mb, ComponentSink& comps, Moves moves) {
  CheckedInt large = 0;
  for (const auto* acts : {&e.attn_acts, &e.mlp_acts}) {
    for (const auto& t : acts->saved) {
      if (!moves(t)) continue;
      large += t.bytes > kLargeAlloc ? 1 : 0;
      if (comps.enabled())
        comps.add(MemoryCategory::kActivations, fmt::format("activations/{}", t.name), CheckedInt(-t.bytes) * mb);
    }
  }
  return large;
}

}  // namespace

void validate_activation_offload(const ModelSpec& m, const TrainingSetup& s) {
  const auto& o = s.activation_offload;
  if (layer_offload_on(o)) {
    // transformer_config.py __post_init__.
    if (o.cpu_offloading_num_layers < 0 || o.cpu_offloading_num_layers >= m.num_layers)
      throw LayoutError(fmt::format("CPU offloading can be done only for layers less than {}", m.num_layers));
    if (s.parallel.pp > 1)
      throw LayoutError("Currently there is no support for Pipeline parallelism with CPU offloading");
    if (s.recompute.granularity != RecomputeGranularity::kNone)
      throw LayoutError("CPU offloading does not work when activation recomputation is enabled");
    // cpu_offload.py get_cpu_offload_context.
    if (!o.cpu_offloading_activations && !o.cpu_offloading_weights)
      throw LayoutError("CPU Offloading is enabled while it is not mentioned what to offload (weights/activations)");
  }
  if (!o.fine_grained) return;
  // transformer_config.py __post_init__ and arguments.py validate_args.
  if (layer_offload_on(o))
    throw LayoutError("fine_grained_activation_offloading cannot be enabled with cpu_offloading.");
  if (!s.transformer_engine)
    throw LayoutError("Fine-grained activation offloading is only supported with transformer_engine implementation");
  if (o.modules == 0)
    throw LayoutError(
        "--fine-grained-activation-offloading needs --offload-modules (transformer_config.py asserts a non-empty "
        "offload_modules)");
  if ((o.modules & kOffloadAttnProj) && !(o.modules & kOffloadCoreAttn))
    throw LayoutError(
        "attn_proj cannot be set to offload_modules alone without core_attn because the input of attn_proj is the "
        "output of core_attn, which is needed in core_attn.backward().");
  const std::uint32_t inside_moe = o.modules & (kOffloadMoeAct | kOffloadExpertFc1 | kOffloadFusedGroupMlp);
  if (s.recompute.has(kRecomputeMoe) && inside_moe) {
    std::string names;
    for (const auto bit : {kOffloadExpertFc1, kOffloadMoeAct, kOffloadFusedGroupMlp})
      if (inside_moe & bit) names += fmt::format("{}'{}'", names.empty() ? "" : ", ", offload_modules_to_string(bit));
    throw LayoutError(fmt::format(
        "Cannot offload {{{0}}} while recomputing the entire MoE layer. 'moe' in recompute_modules wraps the full MoE "
        "forward in a checkpoint, so offloading activations inside it is redundant and will cause errors. Either "
        "remove 'moe' from --recompute-modules or remove {{{0}}} from --offload-modules.",
        names));
  }
  if (o.modules & kOffloadFusedGroupMlp)
    throw LayoutError(
        "fused_group_mlp requires use_transformer_engine_op_fuser. (mme does not model Transformer Engine's "
        "operation fuser)");
  if (o.min_tensor_size < 0) throw LayoutError("min_offloaded_tensor_size must be non-negative.");
  if (!kActivationOffloadFractionRange.holds(o.fraction))
    throw LayoutError("activation_offload_fraction must be in range [0, 1].");
  if (o.delta_bytes_across_pp_ranks < 0) throw LayoutError("delta_offload_bytes_across_pp_ranks must be non-negative.");
}

StageOffload::StageOffload(const StagePlan& plan, std::int64_t pp_rank) : plan_(plan), pp_rank_(pp_rank) {
  const auto& o = plan.s.activation_offload;
  on_ = (o.fine_grained && o.modules != 0) || layer_offload_on(o);
}

std::vector<const TypeEval*> StageOffload::kept_layers(const ChunkLayout& ch) const {
  // The recomputed layers as stage_layers counts them: full recompute, uniform, keeps no layer's
  // tensors; block recomputes the chunk's first N layers (transformer_block.py
  // _checkpointed_forward), counted per layer kind in the kinds' order.
  const auto& rc = plan_.s.recompute;
  const auto& im = plan_.im;
  const std::int64_t in_chunk = ch.num_layers + ch.mtp_layers;
  std::int64_t left = 0;
  if (plan_.full_recompute) left = rc.method == RecomputeMethod::kBlock ? std::min(rc.num_layers, in_chunk) : in_chunk;
  std::vector<std::int64_t> recomputed(im.types.size(), 0), seen(im.types.size(), 0);
  for (std::size_t ti = 0; ti < im.types.size(); ++ti) {
    recomputed[ti] = std::min(im.count_in(ti, ch.first_layer, ch.num_layers), left);
    left -= recomputed[ti];
  }
  std::vector<const TypeEval*> out;
  for (std::int64_t i = ch.first_layer; i < ch.first_layer + ch.num_layers; ++i) {
    const std::size_t t = im.layer_type[static_cast<std::size_t>(i)];
    if (seen[t]++ >= recomputed[t]) out.push_back(&plan_.layers->evals[t]);
  }
  const std::int64_t mtp_recomputed = std::min(ch.mtp_layers, left);
  for (std::int64_t j = mtp_recomputed; j < ch.mtp_layers; ++j) out.push_back(&plan_.layers->mtp_eval);
  return out;
}

StageOffload::Sent StageOffload::chunk(const ChunkLayout& ch, std::int64_t mb, ComponentSink& comps) {
  if (!on_) return {};
  const std::vector<const TypeEval*> layers = kept_layers(ch);
  Sent sent = plan_.s.activation_offload.fine_grained ? fine_grained_chunk(layers, mb, comps)
                                                      : layer_offload_chunk(ch, layers, mb, comps);
  sent_in_flight_ += sent.bytes * mb;
  return sent;
}

StageOffload::Sent StageOffload::fine_grained_chunk(const std::vector<const TypeEval*>& layers, std::int64_t mb,
                                                    ComponentSink& comps) {
  const auto& o = plan_.s.activation_offload;
  // The chunk's groups in forward order, those with tensors to offload (OffloadTensorGroup per
  // layer and module; a group whose tensors are all below the minimum size sends nothing).
  struct Group {
    std::size_t layer;
    std::uint32_t module;
    CheckedInt bytes;
  };
  std::vector<Group> groups;
  for (std::size_t li = 0; li < layers.size(); ++li) {
    for (const std::uint32_t bit : kGroupOrder) {
      if (!(o.modules & bit)) continue;
      const CheckedInt bytes =
          sum_moving(*layers[li], [&](const ActTerm& t) { return t.module == bit && fine_grained_moves(o, t); });
      if (bytes > 0) groups.push_back({li, bit, bytes});
    }
  }
  // PipelineOffloadManager.post_warmup_callback: --activation-offload-fraction keeps the last
  // int(n * (1 - fraction)) eligible groups of each chunk on the GPU.
  const auto kept = static_cast<std::size_t>(std::floor(static_cast<double>(groups.size()) * (1.0 - o.fraction)));
  groups.resize(groups.size() - std::min(kept, groups.size()));
  Sent sent;
  std::vector<CheckedInt> per_layer(layers.size(), 0);
  for (const auto& g : groups) {
    sent.bytes += g.bytes;
    per_layer[g.layer] += g.bytes;
    sent.large_tensors += subtract_moving(*layers[g.layer], mb, comps, [&](const ActTerm& t) {
      return t.module == g.module && fine_grained_moves(o, t);
    });
  }
  for (const auto& b : per_layer) largest_layer_ = std::max(largest_layer_, b);
  // The upper bound: a second layer's worth on the GPU (the prefetch running further ahead, the
  // next chunk's last layer reloaded early, or with --overlap-moe-expert-parallel-comm the
  // forward layer interleaved with the backward one).
  slack_ = largest_layer_;
  return sent;
}

StageOffload::Sent StageOffload::layer_offload_chunk(const ChunkLayout& ch, const std::vector<const TypeEval*>& layers,
                                                     std::int64_t mb, ComponentSink& comps) {
  const auto& o = plan_.s.activation_offload;
  // One chunk (no pipeline parallelism); its decoder layers are the TransformerBlock's, MTP
  // layers run outside its offload context.
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(0, ch.num_layers));
  const std::size_t offloaded = std::min(n, static_cast<std::size_t>(o.cpu_offloading_num_layers));
  auto moves = [&](const ActTerm& t) { return layer_offload_moves(o, t); };
  Sent sent;
  std::vector<CheckedInt> moving(n, 0), saved(n, 0);
  for (std::size_t i = 0; i < n && i < layers.size(); ++i) {
    moving[i] = sum_moving(*layers[i], moves);
    saved[i] = layers[i]->saved;
    if (i >= offloaded) continue;
    sent.bytes += moving[i];
    sent.large_tensors += subtract_moving(*layers[i], mb, comps, moves);
    slack_ = std::max(slack_, moving[i]);
  }
  if (offloaded == 0) return sent;
  if (o.te_offload_v1) {
    // cpu_offload_v1.py AsyncDoubleBufferGroupOffloadHandler: layer i's GPU copy is released at
    // the commit of layer window[i] (the last offloaded one at the end of the forward), and is
    // reloaded when the backward reaches that layer: one offloaded layer more than the L - N
    // kept ones is on the GPU at the end of the forward and the start of the backward.
    reload_window_ = moving[offloaded - 1];
  } else {
    // cpu_offload.py DefaultOffloadSynchronizer: layer i < N is released before the forward of
    // layer L - N + i and reloaded when the backward of layer L - 1 - N + i starts, so the
    // backward holds the window of L - N layers ending at the layer it is in. When the reloaded
    // early layers outweigh the later ones they replace, that window exceeds the end of the
    // forward: d layers into the backward, layers N - d .. N - 1 are back and the last d are freed.
    const std::size_t kept_layers = n - offloaded;
    for (std::size_t d = 1; d <= std::min(offloaded, kept_layers); ++d) {
      CheckedInt back = 0, freed = 0;
      for (std::size_t k = 0; k < d; ++k) back += moving[offloaded - 1 - k], freed += saved[n - 1 - k];
      if (back > freed) reload_window_ = std::max(reload_window_, back - freed);
    }
  }
  return sent;
}

CheckedInt StageOffload::on_gpu_at_peak(ComponentSink& comps) const {
  if (!on_) return 0;
  const auto& o = plan_.s.activation_offload;
  CheckedInt total = 0;
  if (o.fine_grained) {
    // In backward about one layer's offloaded groups are on the GPU: the first layer of the
    // first backward chunk keeps its groups (post_warmup_callback's offload margin; the last
    // stage's chunk that goes straight into its backward, should_bulk_offload), and each group
    // boundary (on_group_start_backward -> bulk_reload) reloads the next offloaded group while the
    // groups in use are consumed, so a layer's worth of groups is back at a time.
    comps.add(MemoryCategory::kActivations, "activations/offload_layer_in_backward", largest_layer_);
    total += largest_layer_;
    // --delta-offload-bytes-across-pp-ranks: pipeline rank r keeps r x delta bytes of groups
    // on the GPU, from the first backward chunks (post_warmup_callback).
    const CheckedInt keep =
        std::min(CheckedInt(o.delta_bytes_across_pp_ranks) * pp_rank_, sent_in_flight_ - largest_layer_);
    if (keep > 0) {
      comps.add(MemoryCategory::kActivations, "activations/offload_kept_for_pp_balance", keep);
      total += keep;
    }
  } else if (reload_window_ > 0) {
    comps.add(MemoryCategory::kActivations, "activations/offload_reload_window", reload_window_);
    total += reload_window_;
  }
  return total;
}

void add_offload_assumptions(const StagePlan& plan, std::vector<std::string>& out) {
  const auto& o = plan.s.activation_offload;
  if (o.fine_grained && o.modules != 0) {
    std::string names = offload_modules_to_string(o.modules);
    std::replace(names.begin(), names.end(), ',', ' ');
    out.push_back(fmt::format(
        "fine-grained activation offloading ({}): the tensors of at least {} elements these groups save go to the "
        "host for every layer and micro-batch in flight{}; in backward about one layer's groups are on the GPU (the "
        "next group is reloaded at each group boundary), a second layer in the upper bound; a tensor counts as freed "
        "when its copy is queued (max_memory_allocated does not see the copies in flight)",
        names, o.min_tensor_size,
        o.fraction < 1.0 ? fmt::format(", but the last {}% of each chunk's groups", (1.0 - o.fraction) * 100) : ""));
    // Groups this model's layers do not have (GQA's input norm is fused into linear_qkv, dense
    // MLPs have no offload group, gdp_qkv belongs to hybrid layers).
    std::uint32_t found = 0;
    auto scan = [&](const TypeEval& e) {
      for (const auto* acts : {&e.attn_acts, &e.mlp_acts})
        for (const auto& t : acts->saved)
          if (fine_grained_moves(o, t)) found |= t.module;
    };
    for (const auto& e : plan.layers->evals) scan(e);
    if (plan.im.model.mtp_num_layers > 0) scan(plan.layers->mtp_eval);
    if (const std::uint32_t idle = o.modules & ~found) {
      std::string idle_names = offload_modules_to_string(idle);
      std::replace(idle_names.begin(), idle_names.end(), ',', ' ');
      out.push_back(fmt::format("offload modules with nothing to offload in this model and setup: {}", idle_names));
    }
    if (!o.te_offload_v1)
      out.push_back("Megatron-LM requires NVTE_CPU_OFFLOAD_V1=1 for fine-grained offloading with TE 2.10 and later");
  }
  if (layer_offload_on(o)) {
    const std::int64_t n = o.cpu_offloading_num_layers, layers = plan.im.model.num_layers;
    if (!o.cpu_offloading_activations)
      out.push_back(
          "TE activation offloading without activations (cpu_offloading_activations false): nothing "
          "leaves the GPU (weight offloading has no effect in TE)");
    else
      out.push_back(fmt::format(
          "TE activation offloading of the first {} of {} decoder layers ({}): {} go to the host; at most {} layers' "
          "tensors are on the GPU at once",
          n, layers, o.te_offload_v1 ? "NVTE_CPU_OFFLOAD_V1=1, cpu_offload_v1.py" : "cpu_offload.py, TE 2.10 and later",
          o.te_offload_v1 ? "the tensors TE's modules mark (taken as every saved tensor of the layer)"
                          : "their saved tensors of at least 256K elements",
          o.te_offload_v1 ? layers - n + 1 : layers - n));
  }
}

}  // namespace mme
