// A model as Megatron-LM launch flags: the inverse of the megatron_args adapter
// (plugins/adapters/megatron_args), flag by flag, for `mme estimate --print-megatron-args` and the
// browser page's export. What Megatron-LM has no flag for is refused, never dropped. Which flags
// describe a block is the Megatron-LM module class the block says it models (megatron_block()).
#include <algorithm>
#include <optional>

#include <fmt/core.h>

#include "mme/engine/pipeline.hpp"
#include "mme/engine/registry.hpp"
#include "mme/inputs/megatron_args.hpp"
#include "mme/inputs/megatron_flags.hpp"
#include "mme/inputs/setup_schema.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/layer_model.hpp"
#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/text.hpp"

namespace mme {

namespace {

using MF = ModelFlag;

std::string number(double v) { return fmt::format("{}", v); }

[[noreturn]] void not_expressible(const ModelSpec& m, const std::string& what) {
  throw UsageError(fmt::format("{}: {}: Megatron-LM has no launch flag for it", m.name, what));
}

// The Megatron-LM module class a block kind models, as its layer-memory model says.
MegatronBlock megatron_block_of(const Registry& registry, const std::string& kind) {
  const LayerMemoryModel* model = registry.find_layer_model(kind);
  return model ? model->megatron_block() : MegatronBlock::kNone;
}

std::vector<std::string> model_flags_of(const ModelSpec& m, const AttentionSpec& attn, MegatronBlock attn_block,
                                        std::int64_t window, const std::vector<int>& windowed, const MlpSpec* dense,
                                        const MlpSpec* moe, const std::vector<int>& pattern);
std::vector<std::string> hybrid_to_megatron_args(const ModelSpec& m, const Registry& registry);

}  // namespace

std::vector<std::string> model_to_megatron_args(const ModelSpec& m, const Registry& registry) {
  if (m.layers.empty() || static_cast<std::int64_t>(m.layers.size()) != m.num_layers)
    not_expressible(m, "a model without its decoder layers");
  if (!(m.lm_blocks == LanguageModelBlocks{}))
    not_expressible(m, "embedding, output head or MTP blocks other than the language model's");
  auto block = [&](const std::string& kind) { return megatron_block_of(registry, kind); };
  // A hybrid model (a Mamba mixer or a one-block layer anywhere) is its --hybrid-layer-pattern.
  const bool hybrid = std::any_of(m.layers.begin(), m.layers.end(), [&](const LayerSpec& l) {
    return block(l.attention.kind) == MegatronBlock::kMambaMixer ||
           block(l.attention.kind) == MegatronBlock::kIdentity || block(l.mlp.kind) == MegatronBlock::kIdentity;
  });
  if (hybrid) return hybrid_to_megatron_args(m, registry);
  const LayerSpec& first = m.layers.front();
  // Layers may differ in their sliding window alone (--window-size with --window-attn-skip-freq):
  // one window size, on the layers that have one.
  AttentionSpec attn = first.attention;
  attn.window = 0;
  std::int64_t window = 0;
  std::vector<int> windowed;
  for (const LayerSpec& l : m.layers) {
    if (l.attention.window > 0 && window > 0 && l.attention.window != window)
      not_expressible(m, "sliding windows of different sizes");
    if (l.attention.window > 0) window = l.attention.window;
    windowed.push_back(l.attention.window > 0 ? 1 : 0);
  }
  const MegatronBlock attn_block = block(attn.kind);
  const MlpSpec* dense = nullptr;
  const MlpSpec* moe = nullptr;
  std::vector<int> pattern;
  for (const LayerSpec& l : m.layers) {
    // One attention for every layer, one dense MLP and one MoE kind at most (--moe-layer-freq).
    AttentionSpec unwindowed = l.attention;
    unwindowed.window = 0;
    if (!(unwindowed == attn)) not_expressible(m, "decoder layers with different attention blocks");
    if (l.post_attention_norm || l.post_mlp_norm) not_expressible(m, "post-attention / post-MLP norms");
    const MegatronBlock mlp_block = block(l.mlp.kind);
    if (mlp_block != MegatronBlock::kMlp && mlp_block != MegatronBlock::kMoeLayer)
      not_expressible(m, fmt::format("MLP kind '{}'", l.mlp.kind));
    const bool routed = mlp_block == MegatronBlock::kMoeLayer;
    const MlpSpec*& slot = routed ? moe : dense;
    if (slot && !(*slot == l.mlp)) not_expressible(m, "decoder layers with different MLP widths or experts");
    slot = &l.mlp;
    pattern.push_back(routed ? 1 : 0);
  }
  if (attn_block != MegatronBlock::kSelfAttention && attn_block != MegatronBlock::kMlaSelfAttention)
    not_expressible(m, fmt::format("attention kind '{}'", attn.kind));

  return model_flags_of(m, attn, attn_block, window, windowed, dense, moe, pattern);
}

namespace {

// The flags of a model whose blocks are known: its attention (attn, of Megatron-LM class
// attn_block), its sliding windows, its dense and MoE MLPs (either may be absent) and which
// layers are MoE (a list written as --moe-layer-freq when both kinds are there; empty: none).
std::vector<std::string> model_flags_of(const ModelSpec& m, const AttentionSpec& attn, MegatronBlock attn_block,
                                        std::int64_t window, const std::vector<int>& windowed, const MlpSpec* dense,
                                        const MlpSpec* moe, const std::vector<int>& pattern) {
  std::vector<std::string> a;
  auto flag = [&](MF f) { a.push_back(std::string("--") + flag_name(f)); };
  auto value = [&](MF f, const std::string& v) {
    flag(f);
    a.push_back(v);
  };
  auto integer = [&](MF f, std::int64_t v) { value(f, std::to_string(v)); };

  integer(MF::kNumLayers, m.num_layers);
  integer(MF::kHiddenSize, m.hidden_size);
  integer(MF::kNumAttentionHeads, attn.num_heads);
  if (attn_block == MegatronBlock::kSelfAttention) {
    if (attn.num_query_groups != attn.num_heads) {
      flag(MF::kGroupQueryAttention);
      integer(MF::kNumQueryGroups, attn.num_query_groups);
    }
    integer(MF::kKvChannels, attn.kv_channels);
    if (attn.qkv_bias) flag(MF::kAddQkvBias);
  } else {
    flag(MF::kMultiLatentAttention);
    if (attn.q_lora_rank) integer(MF::kQLoraRank, *attn.q_lora_rank);
    integer(MF::kKvLoraRank, attn.kv_lora_rank);
    integer(MF::kQkHeadDim, attn.qk_head_dim);
    integer(MF::kQkPosEmbHeadDim, attn.qk_pos_emb_head_dim);
    integer(MF::kVHeadDim, attn.v_head_dim);
    if (attn.qkv_bias) not_expressible(m, "QKV biases in multi-latent attention");
  }
  if (attn.qk_norm) flag(MF::kQkLayernorm);
  if (attn.softmax_type != SoftmaxType::kVanilla)
    value(MF::kSoftmaxType, attn.softmax_type == SoftmaxType::kLearnable ? "learnable" : "off-by-one");
  if (window > 0) {
    value(MF::kWindowSize, fmt::format("{},0", window));
    // An integer N when every N-th layer (1-based) has the whole sequence (transformer/utils.py
    // is_layer_window_attention), else a Python list (1: the window, 0: the whole sequence).
    std::int64_t every = 0;
    for (std::int64_t n = 2; n <= m.num_layers && every == 0; ++n) {
      bool same = true;
      for (std::int64_t i = 0; i < m.num_layers && same; ++i)
        same = windowed[static_cast<std::size_t>(i)] == ((i + 1) % n != 0 ? 1 : 0);
      if (same) every = n;
    }
    if (every > 0) {
      integer(MF::kWindowAttnSkipFreq, every);
    } else if (std::find(windowed.begin(), windowed.end(), 0) != windowed.end()) {
      std::string list = "[";
      for (std::size_t i = 0; i < windowed.size(); ++i) list += (i ? "," : "") + std::to_string(windowed[i]);
      value(MF::kWindowAttnSkipFreq, list + "]");
    }
  }

  // The adapter reads --ffn-hidden-size as the dense MLP's width and as the MoE blocks' nominal
  // one, which sizes nothing; an all-MoE model without one gets its experts' width (Megatron-LM
  // needs a value).
  if (dense || moe)
    integer(MF::kFfnHiddenSize, dense                      ? dense->ffn_hidden_size
                                : moe->ffn_hidden_size > 0 ? moe->ffn_hidden_size
                                                           : moe->expert_ffn_hidden_size);
  if (m.gated_linear_unit) {
    if (m.activation == "silu")
      flag(MF::kSwiglu);
    else if (m.activation == "quick_gelu")
      flag(MF::kQuickGeglu);
    else
      not_expressible(m, fmt::format("a gated MLP with activation '{}'", m.activation));
    if (m.glu_linear_offset != 0) value(MF::kGluLinearOffset, number(m.glu_linear_offset));
    if (m.activation_clamp_value > 0) value(MF::kActivationFuncClampValue, number(m.activation_clamp_value));
  } else if (m.activation == "squared_relu") {
    flag(MF::kSquaredRelu);
  } else if (m.activation != "gelu") {
    not_expressible(m, fmt::format("activation '{}'", m.activation));
  }
  value(MF::kNormalization, m.normalization == Normalization::kRMSNorm ? "RMSNorm" : "LayerNorm");
  if (!m.add_bias_linear) flag(MF::kDisableBiasLinear);
  const bool yarn = m.position_embedding == PositionEmbedding::kRope && m.rope_yarn_factor > 1;
  value(MF::kPositionEmbeddingType, yarn                                                          ? "yarn"
                                    : m.position_embedding == PositionEmbedding::kRope            ? "rope"
                                    : m.position_embedding == PositionEmbedding::kLearnedAbsolute ? "learned_absolute"
                                                                                                  : "none");
  if (yarn) value(MF::kRotaryScalingFactor, number(m.rope_yarn_factor));
  integer(MF::kMaxPositionEmbeddings, m.max_position_embeddings);
  if (!m.tie_embeddings) flag(MF::kUntieEmbeddingsAndOutputWeights);
  value(MF::kHiddenDropout, number(m.hidden_dropout));
  value(MF::kAttentionDropout, number(m.attention_dropout));
  // The embedding's rows as NullTokenizer gives them: --vocab-size plus its end-of-document token
  // (megatron/training/tokenizer); the user's own tokenizer replaces both flags.
  value(MF::kTokenizerType, "NullTokenizer");
  integer(MF::kVocabSize, m.vocab_size - 1);

  if (moe) {
    integer(MF::kNumExperts, moe->num_experts);
    integer(MF::kMoeRouterTopk, moe->top_k);
    integer(MF::kMoeFfnHiddenSize, moe->expert_ffn_hidden_size);
    if (moe->shared_expert_ffn_hidden_size > 0)
      integer(MF::kMoeSharedExpertIntermediateSize, moe->shared_expert_ffn_hidden_size);
    if (moe->shared_expert_gate) flag(MF::kMoeSharedExpertGate);
    if (moe->router_expert_bias) {
      flag(MF::kMoeRouterEnableExpertBias);
      // transformer_config.py takes the expert bias only with sigmoid (or sqrtsoftplus) scores; the
      // models that have one (DeepSeek-V3, Kimi-K2, Moonlight: scoring_func "sigmoid") score with
      // sigmoid. The score function is memory-neutral, so the model keeps no field for it.
      a.insert(a.end(), {"--moe-router-score-function", "sigmoid"});
    }
    if (moe->router_fp32) value(MF::kMoeRouterDtype, "fp32");
    if (dense && !pattern.empty()) {
      // A Python list, as Megatron-LM's --moe-layer-freq takes it (one 0/1 per layer).
      std::string list = "[";
      for (std::size_t i = 0; i < pattern.size(); ++i) list += (i ? "," : "") + std::to_string(pattern[i]);
      value(MF::kMoeLayerFreq, list + "]");
    }
  }
  if (m.mtp_num_layers > 0) integer(MF::kMtpNumLayers, m.mtp_num_layers);
  return a;
}

// A hybrid model's flags (hybrid_block.py HybridStack): its layers as --hybrid-layer-pattern, one
// symbol each ('M' a Mamba layer, '*' attention, '-' an MLP, 'E' MoE), the Mamba mixer's sizes and
// the attention's and MLPs' flags as a GPT model's. Layers of a kind must agree, as the flags hold
// one of each.
std::vector<std::string> hybrid_to_megatron_args(const ModelSpec& m, const Registry& registry) {
  auto block = [&](const std::string& kind) { return megatron_block_of(registry, kind); };
  std::string symbols;
  const AttentionSpec* mixer = nullptr;
  const AttentionSpec* attention = nullptr;
  const MlpSpec* dense = nullptr;
  const MlpSpec* moe = nullptr;
  auto same = [&](const auto*& slot, const auto& spec, const char* what) {
    if (slot && !(*slot == spec)) not_expressible(m, fmt::format("hybrid layers with different {}", what));
    slot = &spec;
  };
  for (const LayerSpec& l : m.layers) {
    if (l.post_attention_norm || l.post_mlp_norm) not_expressible(m, "post-attention / post-MLP norms");
    const MegatronBlock a = block(l.attention.kind), f = block(l.mlp.kind);
    if (a == MegatronBlock::kMambaMixer && f == MegatronBlock::kIdentity) {
      symbols += 'M';
      same(mixer, l.attention, "Mamba mixers");
    } else if (a == MegatronBlock::kSelfAttention && f == MegatronBlock::kIdentity) {
      symbols += '*';
      same(attention, l.attention, "attention blocks");
    } else if (a == MegatronBlock::kIdentity && f == MegatronBlock::kMlp) {
      symbols += '-';
      same(dense, l.mlp, "MLPs");
    } else if (a == MegatronBlock::kIdentity && f == MegatronBlock::kMoeLayer) {
      symbols += 'E';
      same(moe, l.mlp, "MoE blocks");
    } else {
      not_expressible(m, fmt::format("a hybrid model's layer of attention kind '{}' and MLP kind '{}' (a pattern "
                                     "layer has one block: M, *, - or E)",
                                     l.attention.kind, l.mlp.kind));
    }
  }
  // The attention flags: the attention layers', else the heads every layer carries (Megatron-LM
  // needs them whether or not a layer attends).
  AttentionSpec attn = attention ? *attention : m.layers.front().attention;
  if (attn.window > 0) not_expressible(m, "sliding windows in a hybrid model");
  attn.kind = "gqa";
  std::vector<std::string> a = model_flags_of(m, attn, MegatronBlock::kSelfAttention, 0, {}, dense, moe, {});
  auto value = [&](MF f, const std::string& v) { a.insert(a.end(), {std::string("--") + flag_name(f), v}); };
  value(MF::kHybridLayerPattern, symbols);
  if (mixer) {
    value(MF::kMambaNumHeads, std::to_string(mixer->mamba_num_heads));
    value(MF::kMambaHeadDim, std::to_string(mixer->mamba_head_dim));
    value(MF::kMambaStateDim, std::to_string(mixer->mamba_state_dim));
    value(MF::kMambaNumGroups, std::to_string(mixer->mamba_num_groups));
  }
  return a;
}

// Megatron-LM's own GPU counts: torchrun's processes per node x nodes (8 per node where the
// count allows it).
std::vector<std::string> launcher_words(std::int64_t world_size, bool hybrid) {
  const std::int64_t per_node = world_size % 8 == 0 ? 8 : world_size;
  return {"torchrun",
          "--nproc_per_node",
          std::to_string(per_node),
          "--nnodes",
          std::to_string(world_size / per_node),
          hybrid ? "pretrain_hybrid.py" : "pretrain_gpt.py"};
}

// A hybrid model's pipeline chunks are '|' separators in its pattern, never a layout, a VPP flag
// or the --account-for-* splits (arguments.py refuses those beside --hybrid-layer-pattern): any of
// them becomes separators at the chunks the engine builds (partition_pipeline, chunk vp x PP +
// pp_rank in pattern order, as select_pipeline_segment reads them), and the setup is written
// without them. First/last-stage counts without VPP stay flags (Megatron-LM takes them beside a
// pattern without separators).
void place_hybrid_pipes(const ModelSpec& m, std::string& pattern, TrainingSetup& s) {
  if (s.pipeline.layout.empty() && s.parallel.vpp <= 1 && s.pipeline.accounted_blocks() == 0) return;
  const PipelinePartition part = partition_pipeline(m.num_layers, m.mtp_num_layers, s.parallel, s.pipeline);
  std::string piped;
  for (std::int64_t vp = 0; vp < part.vpp; ++vp)
    for (std::int64_t rank = 0; rank < part.pp; ++rank) {
      const ChunkLayout& c = part.at(rank, vp);
      if (vp > 0 || rank > 0) piped += '|';
      piped += pattern.substr(static_cast<std::size_t>(c.first_layer), static_cast<std::size_t>(c.num_layers));
    }
  pattern = piped;
  const std::optional<std::int64_t> group = s.pipeline.microbatch_group_size;
  s.pipeline = PipelineSplit{};
  s.pipeline.microbatch_group_size = group;
  s.parallel.vpp = 1;
}

// What no flag expresses is refused: the knobs Megatron-LM has no flag for must hold the value
// a launch line gives them (its default).
void check_expressible(const TrainingSetup& setup, const std::string& model_name) {
  // arguments.py: a2a+p2p needs --hierarchical-context-parallel-sizes, the split of CP between
  // its two levels, which the setup does not keep (the a2a level is not modelled).
  if (setup.cp_comm_type == CpCommType::kA2AP2P)
    throw UsageError(fmt::format(
        "{}: --cp-comm-type a2a+p2p: Megatron-LM also needs --hierarchical-context-parallel-sizes, which mme does "
        "not keep (its a2a level is not modelled); print with --cp-comm-type p2p and add both by hand",
        model_name));
  TrainingSetup back = setup_from_megatron_args(MegatronArgs{}, TrainingSetup{});
  for (const SetupKnob& k : setup_knobs()) {
    if (!k.megatron.empty() || !k.megatron_off.empty() || k.megatron_read || !k.get) continue;
    if (k.get(setup) == k.get(back)) continue;
    const std::string shown = k.get(setup).is_null() ? "unset" : knob_text(k, k.get(setup));
    throw UsageError(fmt::format("{}: {} {}: Megatron-LM has no launch flag for it{}", model_name, k.id, shown,
                                 *k.why_not ? fmt::format(" ({})", k.why_not) : ""));
  }
}

}  // namespace

std::vector<std::string> megatron_launch_args(const ModelSpec& model, const TrainingSetup& setup,
                                              const Registry& registry) {
  check_expressible(setup, model.name);
  // What the model decides of an unset setting is written out: a launch line means Megatron-LM's
  // default (training_setup.hpp bias_dropout_fusion_on).
  TrainingSetup written = setup;
  written.bias_dropout_fusion = bias_dropout_fusion_on(model, setup);
  // arguments.py asserts max_position_embeddings >= seq_length whatever the position embedding. A
  // rotary model trained past its config's context (mme warns) needs the larger value on the line;
  // RoPE keeps no table of that size, so the memory is the same.
  ModelSpec launched = model;
  if (launched.position_embedding != PositionEmbedding::kLearnedAbsolute &&
      launched.max_position_embeddings < setup.seq_length)
    launched.max_position_embeddings = setup.seq_length;
  std::vector<std::string> model_flags = model_to_megatron_args(launched, registry);
  const auto pattern =
      std::find(model_flags.begin(), model_flags.end(), std::string("--") + flag_name(MF::kHybridLayerPattern));
  const bool hybrid = pattern != model_flags.end();
  if (hybrid) place_hybrid_pipes(launched, *(pattern + 1), written);
  const std::vector<std::string> rest = setup_to_megatron_args(written, true);
  std::vector<std::string> out, flags;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == "export" && i + 1 < rest.size()) {
      out.insert(out.end(), {"export", rest[++i]});
      continue;
    }
    flags.push_back(rest[i]);
  }
  const auto launcher = launcher_words(setup.parallel.world_size, hybrid);
  out.insert(out.end(), launcher.begin(), launcher.end());
  out.insert(out.end(), model_flags.begin(), model_flags.end());
  out.insert(out.end(), flags.begin(), flags.end());
  return out;
}

std::string megatron_args_file_text(const std::vector<std::string>& args) {
  auto quoted = [](const std::string& v) { return shell_quote(v); };
  // `export NAME=VALUE` lines, the launcher up to the entry script on one line, then one flag
  // with its values per line.
  std::string exports, head, flags;
  bool in_head = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a.size() > 3 && a.compare(a.size() - 3, 3, ".py") == 0;
  });
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "export" && i + 1 < args.size()) {
      exports += "export " + quoted(args[++i]) + "\n";
      continue;
    }
    if (in_head) {
      head += (head.empty() ? "" : " ") + quoted(a);
      in_head = !(a.size() > 3 && a.compare(a.size() - 3, 3, ".py") == 0);
      continue;
    }
    if (a.rfind("--", 0) == 0) {
      if (!head.empty() || !flags.empty()) flags += " \\\n";
      flags += (head.empty() ? "" : "    ") + a;
    } else {
      flags += " " + quoted(a);
    }
  }
  return exports + head + flags + "\n";
}

}  // namespace mme
