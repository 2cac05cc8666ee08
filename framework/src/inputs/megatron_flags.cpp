#include "mme/inputs/megatron_flags.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include <fmt/core.h>

#include "mme/inputs/megatron_args.hpp"

namespace mme {

namespace {

#define MME_MEGATRON_LM_FLAG(name, lo, hi) MegatronLmFlag{name, lo, hi},
constexpr MegatronLmFlag kFlags[] = {
#include "megatron_lm_flags.inc"
};
#undef MME_MEGATRON_LM_FLAG

// Edit distance of two flag names, '_' and '-' alike; stops counting past `limit`.
std::size_t distance(std::string_view a, std::string_view b, std::size_t limit) {
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit) return limit + 1;
  auto same = [](char x, char y) { return x == y || ((x == '_' || x == '-') && (y == '_' || y == '-')); };
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0], best = ++row[0];
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      diag = up;
      best = std::min(best, row[j]);
    }
    if (best > limit) return limit + 1;
  }
  return row[b.size()];
}

bool hugging_face_vocabulary(const MegatronArgs& a) {
  // with_tokenizer_vocabulary (cli): the tokenizer's config.json stands in for --vocab-size.
  return a.value(flag_name(ModelFlag::kTokenizerType)) == "HuggingFaceTokenizer" &&
         !a.has(flag_name(ModelFlag::kVocabSize)) && !a.has(flag_name(ModelFlag::kPaddedVocabSize));
}

using MF = ModelFlag;
// plugins/adapters/megatron_args reads each, megatron_export.cpp writes each.
constexpr ModelFlagInfo kModelFlags[] = {
    {MF::kNumLayers, "num-layers", "decoder layers"},
    {MF::kHiddenSize, "hidden-size", "hidden size"},
    {MF::kNumAttentionHeads, "num-attention-heads", "attention heads"},
    {MF::kGroupQueryAttention, "group-query-attention", "grouped-query attention (with --num-query-groups)"},
    {MF::kNumQueryGroups, "num-query-groups", "key/value head groups"},
    {MF::kKvChannels, "kv-channels", "the width of a head (default hidden size / heads)"},
    {MF::kSwiglu, "swiglu", "a gated SiLU MLP"},
    {MF::kFfnHiddenSize, "ffn-hidden-size", "the MLP's width (default 4h, or 8h/3 rounded with SwiGLU)"},
    {MF::kNormalization, "normalization", "LayerNorm or RMSNorm"},
    {MF::kSquaredRelu, "squared-relu", "a squared-ReLU MLP"},
    {MF::kQuickGeglu, "quick-geglu", "a gated quick-GELU MLP (GPT-OSS)"},
    {MF::kGluLinearOffset, "glu-linear-offset", "an offset on the gated unit's linear half"},
    {MF::kActivationFuncClampValue, "activation-func-clamp-value", "the gated unit's inputs clamped"},
    {MF::kDisableBiasLinear, "disable-bias-linear", "linear layers without biases"},
    {MF::kPositionEmbeddingType, "position-embedding-type", "learned_absolute, rope, yarn, mrope, relative, none"},
    {MF::kUseRotaryPositionEmbeddings, "use-rotary-position-embeddings", "rotary embeddings (deprecated spelling)"},
    {MF::kRotaryScalingFactor, "rotary-scaling-factor", "YaRN's scaling factor (with --position-embedding-type yarn)"},
    {MF::kMaxPositionEmbeddings, "max-position-embeddings", "rows of a learned position table"},
    {MF::kUntieEmbeddingsAndOutputWeights, "untie-embeddings-and-output-weights", "an output head of its own"},
    {MF::kHiddenDropout, "hidden-dropout", "dropout after attention and MLP (its masks are kept)"},
    {MF::kAttentionDropout, "attention-dropout", "dropout of the attention scores"},
    {MF::kTokenizerType, "tokenizer-type", "the tokenizer, which sizes the vocabulary"},
    {MF::kVocabSize, "vocab-size", "the vocabulary (before padding)"},
    {MF::kPaddedVocabSize, "padded-vocab-size", "the embedding's rows as given, without padding"},
    {MF::kTokenizerModel, "tokenizer-model", "HuggingFaceTokenizer's model, whose config gives the vocabulary",
     hugging_face_vocabulary},
    {MF::kAddQkvBias, "add-qkv-bias", "biases on Q, K and V"},
    {MF::kQkLayernorm, "qk-layernorm", "norms on queries and keys"},
    {MF::kSoftmaxType, "softmax-type", "vanilla, off-by-one or learnable (attention sinks) softmax"},
    {MF::kWindowSize, "window-size", "sliding-window attention (earlier tokens, later tokens)"},
    {MF::kWindowAttnSkipFreq, "window-attn-skip-freq", "which layers attend through the window"},
    {MF::kMultiLatentAttention, "multi-latent-attention", "multi-latent attention (MLA)"},
    {MF::kQLoraRank, "q-lora-rank", "MLA: the query's low rank"},
    {MF::kKvLoraRank, "kv-lora-rank", "MLA: the key/value low rank"},
    {MF::kQkHeadDim, "qk-head-dim", "MLA: the query/key head width"},
    {MF::kQkPosEmbHeadDim, "qk-pos-emb-head-dim", "MLA: the rotary part of the query/key head"},
    {MF::kVHeadDim, "v-head-dim", "MLA: the value head width"},
    {MF::kNumExperts, "num-experts", "routed experts of the MoE layers"},
    {MF::kMoeRouterTopk, "moe-router-topk", "experts per token"},
    {MF::kMoeFfnHiddenSize, "moe-ffn-hidden-size", "an expert's width"},
    {MF::kMoeSharedExpertIntermediateSize, "moe-shared-expert-intermediate-size", "the shared experts' width"},
    {MF::kMoeSharedExpertGate, "moe-shared-expert-gate", "a gate on the shared experts"},
    {MF::kMoeRouterEnableExpertBias, "moe-router-enable-expert-bias", "the router's expert bias"},
    {MF::kMoeRouterDtype, "moe-router-dtype", "the router's dtype (fp32, fp64)"},
    {MF::kMoeLayerFreq, "moe-layer-freq", "which layers are MoE layers"},
    {MF::kMtpNumLayers, "mtp-num-layers", "multi-token prediction layers"},
    {MF::kHybridLayerPattern, "hybrid-layer-pattern",
     "a hybrid model's layers, one symbol each (M Mamba, * attention, - MLP, E MoE; | pipeline stages)"},
    {MF::kHybridOverridePattern, "hybrid-override-pattern", "the deprecated spelling of --hybrid-layer-pattern"},
    {MF::kMambaNumHeads, "mamba-num-heads", "Mamba heads (default: 2 x hidden / head dim)"},
    {MF::kMambaHeadDim, "mamba-head-dim", "a Mamba head's width"},
    {MF::kMambaStateDim, "mamba-state-dim", "the Mamba state's width per group"},
    {MF::kMambaNumGroups, "mamba-num-groups", "the Mamba mixer's B and C groups"},
};
static_assert(std::size(kModelFlags) == static_cast<std::size_t>(MF::kCount), "one row per ModelFlag");

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < std::size(kModelFlags); ++i)
    if (static_cast<std::size_t>(kModelFlags[i].id) != i) return false;
  return true;
}
static_assert(in_enum_order(), "the rows follow ModelFlag's order");

}  // namespace

std::span<const MegatronLmFlag> megatron_lm_flags() { return kFlags; }

const MegatronLmFlag* find_megatron_lm_flag(std::string_view name) {
  const auto it = std::lower_bound(std::begin(kFlags), std::end(kFlags), name,
                                   [](const MegatronLmFlag& f, std::string_view n) { return f.name < n; });
  return it != std::end(kFlags) && it->name == name ? &*it : nullptr;
}

std::string megatron_lm_commit() { return fmt::format("{} ({})", MME_MEGATRON_LM_COMMIT, MME_MEGATRON_LM_DATE); }

std::string closest_megatron_lm_flag(std::string_view name) {
  // A typo of a few letters, or a word or two of a long name.
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 4);
  std::string_view best;
  std::size_t best_distance = limit + 1;
  for (const auto& f : kFlags) {
    const std::size_t d = distance(name, f.name, std::min(limit, best_distance));
    if (d < best_distance) {
      best_distance = d;
      best = f.name;
    }
  }
  return std::string(best);
}

std::span<const ModelFlagInfo> model_flags() { return kModelFlags; }

const ModelFlagInfo& model_flag(ModelFlag f) { return kModelFlags[static_cast<std::size_t>(f)]; }

}  // namespace mme
