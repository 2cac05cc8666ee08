#include "megatron_args_adapter.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/megatron_flags.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/config_reader.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/hybrid_layers.hpp>
#include <mme/sdk/number_text.hpp>
#include <mme/sdk/text.hpp>

namespace mme::plugins {

namespace {

using MF = ModelFlag;

// Reads one integer flag with ConfigError naming the flag.
std::int64_t size_flag(const MegatronArgs& a, const std::string& source, const char* flag, std::int64_t fallback,
                       std::int64_t min = 1, std::int64_t max = ConfigReader::kMaxDimension) {
  const auto v = a.value(flag);
  if (!v) return fallback;
  bool too_large = false;
  const auto n = parse_integer(*v, &too_large);
  if (!n && !too_large) throw ConfigError(fmt::format("{}: --{}: expected an integer, got '{}'", source, flag, *v));
  if (max == ConfigReader::kMaxLayers && (too_large ? v->front() != '-' : *n > max))
    throw ConfigError(fmt::format("{}: --{}: {}", source, flag, too_many_layers(*v)));
  if (too_large || *n < min || *n > max)
    throw ConfigError(fmt::format("{}: --{}: {} is out of range [{}, {}]", source, flag, *v, min, max));
  return *n;
}

std::int64_t size_flag(const MegatronArgs& a, const std::string& source, MF flag, std::int64_t fallback,
                       std::int64_t min = 1, std::int64_t max = ConfigReader::kMaxDimension) {
  return size_flag(a, source, flag_name(flag), fallback, min, max);
}

// A rate in [0, 1): NaN is none (it once passed `d < 0 || d >= 1` and was estimated as no dropout).
double rate_flag(const MegatronArgs& a, const std::string& source, MF f, double fallback) {
  const char* flag = flag_name(f);
  const auto v = a.value(flag);
  if (!v) return fallback;
  const auto d = parse_decimal(*v);  // the same under every locale (number_text.hpp)
  if (!d || !(*d >= 0 && *d < 1))
    throw ConfigError(fmt::format("{}: --{}: expected a rate in [0, 1), got '{}'", source, flag, *v));
  return *d;
}

// A finite decimal (--glu-linear-offset, --activation-func-clamp-value); `fallback` when absent.
double number_flag(const MegatronArgs& a, const std::string& source, const char* flag, double fallback) {
  const auto v = a.value(flag);
  if (!v) return fallback;
  const auto d = parse_decimal(*v);  // the same under every locale (number_text.hpp)
  if (!d || !std::isfinite(*d))
    throw ConfigError(fmt::format("{}: --{}: expected a number, got '{}'", source, flag, *v));
  return *d;
}

double number_flag(const MegatronArgs& a, const std::string& source, MF f, double fallback) {
  return number_flag(a, source, flag_name(f), fallback);
}

// The gated unit's activation (argument_utils.py): --swiglu (SiLU) or --quick-geglu (quick_gelu,
// which asserts not --swiglu), clamped (--activation-func-clamp-value) and offset
// (--glu-linear-offset) as transformer_config.py __post_init__ allows.
void read_activation(const MegatronArgs& a, const std::string& src, bool moe, ModelSpec& m) {
  const bool swiglu = a.enabled(MF::kSwiglu), quick = a.enabled(MF::kQuickGeglu);
  if (swiglu && quick)
    throw ConfigError(fmt::format("{}: --{} with --{}: Megatron-LM asserts not both (argument_utils.py)", src,
                                  flag_name(MF::kQuickGeglu), flag_name(MF::kSwiglu)));
  m.gated_linear_unit = swiglu || quick;
  m.activation = swiglu ? "silu" : quick ? "quick_gelu" : (a.enabled(MF::kSquaredRelu) ? "squared_relu" : "gelu");
  m.glu_linear_offset = number_flag(a, src, MF::kGluLinearOffset, 0);
  m.activation_clamp_value = number_flag(a, src, MF::kActivationFuncClampValue, 0);
  auto refuse = [&](const std::string& why) {
    throw ConfigError(fmt::format("{}: {}: Megatron-LM refuses it (transformer_config.py)", src, why));
  };
  if (a.has(MF::kActivationFuncClampValue) && !(m.activation_clamp_value > 0))
    refuse(fmt::format("--{} {} must be greater than zero", flag_name(MF::kActivationFuncClampValue),
                       m.activation_clamp_value));
  // bias_activation_fusion (--bias-swiglu-fusion with SwiGLU, else --bias-gelu-fusion, off without
  // biases in arguments.py) takes an offset only with quick_gelu.
  const bool biases = !a.enabled(MF::kDisableBiasLinear);
  const bool fusion = swiglu ? !a.enabled("no-bias-swiglu-fusion") : biases && !a.enabled("no-bias-gelu-fusion");
  if (fusion && m.glu_linear_offset != 0 && !quick)
    refuse("a non-zero --glu-linear-offset with the bias-activation fusion needs --quick-geglu");
  if (swiglu && m.activation_clamp_value > 0) {
    if (!moe) refuse("--activation-func-clamp-value with --swiglu is supported with MoE only");
    if (m.glu_linear_offset != 0)
      refuse("--glu-linear-offset must be zero with --activation-func-clamp-value and --swiglu");
  }
  if ((m.glu_linear_offset != 0 || m.activation_clamp_value > 0) && !m.gated_linear_unit)
    throw ConfigError(fmt::format("{}: --{} and --{} act on a gated unit (--swiglu or --quick-geglu)", src,
                                  flag_name(MF::kGluLinearOffset), flag_name(MF::kActivationFuncClampValue)));
}

// --window-size (left, right) and --window-attn-skip-freq (transformer/utils.py
// is_layer_window_attention): the earlier tokens each layer's queries attend to, 0 for the full
// causal sequence. A window that also reaches later tokens is not modelled.
std::vector<std::int64_t> read_windows(const MegatronArgs& a, const std::string& src, std::int64_t num_layers) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(num_layers), 0);
  const auto text = a.value(MF::kWindowSize);
  if (!text) return out;
  // arguments.py tuple_type: "a,b" or "(a,b)".
  std::string t = *text;
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == '(' || c == ')' || c == ' '; }), t.end());
  const std::vector<std::string> parts = split(t, ',', EmptyItems::kKeep);
  std::optional<std::int64_t> left, right;
  if (parts.size() == 2) left = parse_integer(parts[0]), right = parse_integer(parts[1]);
  if (!left || !right || *left < -1 || *left > ConfigReader::kMaxDimension || *right < -1)
    throw ConfigError(fmt::format("{}: --{}: expected two integers 'left,right' (-1: unbounded), got '{}'", src,
                                  flag_name(MF::kWindowSize), *text));
  if (*right > 0)
    throw ConfigError(fmt::format("{}: --{} {}: a window that reaches later tokens is not modelled", src,
                                  flag_name(MF::kWindowSize), *text));
  if (*left < 0) return out;  // (-1, 0): the whole causal sequence
  // The layers that attend through it: an integer N skips every N-th (1-based) layer, a list says 1
  // (window) or 0 per layer, in --moe-layer-freq's grammar.
  std::vector<int> windowed(static_cast<std::size_t>(num_layers), 1);
  if (const auto freq = a.value(MF::kWindowAttnSkipFreq)) {
    if (const auto n = parse_integer(*freq)) {
      if (*n <= 0)
        throw ConfigError(fmt::format("{}: --{}: expected a positive integer or a list, got '{}'", src,
                                      flag_name(MF::kWindowAttnSkipFreq), *freq));
      for (std::int64_t i = 0; i < num_layers; ++i) windowed[static_cast<std::size_t>(i)] = (i + 1) % *n != 0;
    } else {
      try {
        windowed = parse_moe_layer_freq(*freq, num_layers);
      } catch (const ConfigError& e) {
        throw ConfigError(fmt::format("{}: --{}: {}", src, flag_name(MF::kWindowAttnSkipFreq), e.what()));
      }
    }
  }
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = windowed[i] ? *left : 0;
  return out;
}

// YaRN outside MLA (argument_utils.py _apply_yarn_config_from_args): attention.py multiplies cos
// and sin by the concentration factor (yarn_rotary_pos_embedding.py
// _yarn_get_concentration_factor: 0.1 ln(factor) + 1 at the default --mscale 1 and
// --mscale-all-dim 0), which TE's fused RoPE cannot take (ModelSpec::rope_yarn_factor). Other
// --mscale values change the factor, not whether it is 1 or the memory: the model keeps the
// default-mscale factor where it is not 1, else 1.
double read_yarn_factor(const MegatronArgs& a, const std::string& src) {
  const double factor = number_flag(a, src, MF::kRotaryScalingFactor, 1.0);
  if (!(factor > 0))
    throw ConfigError(
        fmt::format("{}: --{} must be positive, got {}", src, flag_name(MF::kRotaryScalingFactor), factor));
  auto mscale = [&](double k) { return factor <= 1 ? 1.0 : 0.1 * k * std::log(factor) + 1.0; };
  const double concentration =
      mscale(number_flag(a, src, "mscale", 1.0)) / mscale(number_flag(a, src, "mscale-all-dim", 0.0));
  return concentration != 1.0 ? std::max(factor, 1.0) : 1.0;
}

// --moe-layer-freq's 0/1 per layer (parse_moe_layer_freq), its errors naming the launch line.
std::vector<int> moe_layer_pattern(const std::string& freq, const std::string& src, std::int64_t num_layers) {
  try {
    return parse_moe_layer_freq(freq, num_layers);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", src, e.what()));
  }
}

// Whether --moe-layer-freq describes a mixed dense/MoE model as transformer_config.py tells one:
// an integer above 1, or a list with a 0 in it.
bool mixed_dense_moe_pattern(const MegatronArgs& a, const std::string& src, std::int64_t num_layers) {
  const auto freq = a.value(MF::kMoeLayerFreq);
  if (!freq) return false;
  if (const auto n = parse_integer(*freq)) return *n > 1;
  const std::vector<int> pattern = moe_layer_pattern(*freq, src, num_layers);
  return std::find(pattern.begin(), pattern.end(), 0) != pattern.end();
}

// The router settings transformer_config.py __post_init__ refuses (they are memory-neutral, so
// the setup does not keep them: checked here, where the launch line is read). Its defaults:
// softmax scores, aux_loss balancing.
void check_router_rules(const MegatronArgs& a, const std::string& src, const MlpSpec& moe) {
  auto refuse = [&](const std::string& why) {
    throw ConfigError(fmt::format("{}: {}: Megatron-LM refuses it (transformer_config.py)", src, why));
  };
  if (a.has(MF::kMoeSharedExpertIntermediateSize) && moe.shared_expert_ffn_hidden_size <= 0)
    refuse(
        "--moe-shared-expert-intermediate-size must be larger than 0 (num_shared_experts x "
        "ffn_size_of_each_shared_expert)");
  const std::string score = a.value("moe-router-score-function").value_or("softmax");
  const std::vector<std::string> balancing =
      split(a.value("moe-router-load-balancing-type").value_or("aux_loss"), ' ', EmptyItems::kSkip);
  const bool sinkhorn = std::find(balancing.begin(), balancing.end(), "sinkhorn") != balancing.end();
  // arguments.py keeps a list of one as its value; a longer list of balancing types needs one
  // --moe-aux-loss-coeff per type.
  const std::size_t coeffs = split(a.value("moe-aux-loss-coeff").value_or(""), ' ', EmptyItems::kSkip).size();
  if (balancing.size() > 1 && coeffs != balancing.size())
    refuse(fmt::format("{} --moe-router-load-balancing-type values need as many --moe-aux-loss-coeff values, not {}",
                       balancing.size(), coeffs));
  if (moe.top_k == 1 && score == "softmax" && !a.enabled("moe-router-pre-softmax") && !sinkhorn)
    refuse("--moe-router-topk 1 with softmax scores needs --moe-router-pre-softmax");
  if (moe.router_expert_bias && score != "sigmoid" && score != "sqrtsoftplus")
    refuse(
        fmt::format("--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid or sqrtsoftplus, "
                    "not {}",
                    score));
  if (a.has("moe-expert-capacity-factor"))
    for (const auto& t : balancing)
      if (t != "aux_loss" && t != "seq_aux_loss" && t != "global_aux_loss" && t != "none")
        refuse(
            fmt::format("--moe-expert-capacity-factor works with the aux_loss, seq_aux_loss, global_aux_loss or "
                        "none load balancing, not {}",
                        t));
  const std::int64_t group_topk = size_flag(a, src, "moe-router-group-topk", 0, 0);
  if (group_topk > 0) {
    const std::int64_t groups = size_flag(a, src, "moe-router-num-groups", 0, 0);
    if (groups == 0) refuse("group-limited routing (--moe-router-group-topk) needs --moe-router-num-groups");
    if (moe.num_experts % groups != 0)
      refuse(fmt::format("{} experts are not divisible by --moe-router-num-groups {}", moe.num_experts, groups));
    if (group_topk > groups)
      refuse(fmt::format("--moe-router-group-topk {} is more than --moe-router-num-groups {}", group_topk, groups));
  }
}

// --hybrid-layer-pattern, or its deprecated spelling --hybrid-override-pattern (arguments.py, which
// refuses both): the main pattern, its pipe separators kept; nullopt for a GPT model.
std::optional<std::string> read_hybrid_pattern(const MegatronArgs& a, const std::string& src) {
  const auto layer = a.value(MF::kHybridLayerPattern), override_ = a.value(MF::kHybridOverridePattern);
  if (layer && override_)
    throw ConfigError(fmt::format("{}: --{} and --{} cannot both be specified (arguments.py)", src,
                                  flag_name(MF::kHybridOverridePattern), flag_name(MF::kHybridLayerPattern)));
  if (!layer && !override_) return std::nullopt;
  const std::string& text = layer ? *layer : *override_;
  const char* flag = flag_name(layer ? MF::kHybridLayerPattern : MF::kHybridOverridePattern);
  // hybrid_layer_allocation.py parse_hybrid_pattern: '/' opens the MTP depths' patterns.
  const std::string main = text.substr(0, text.find('/'));
  if (main.size() != text.size() && text.find_first_not_of('/', main.size()) != std::string::npos)
    throw ConfigError(
        fmt::format("{}: --{} {}: multi-token prediction layers of a hybrid model (after '/') are "
                    "not modelled",
                    src, flag, text));
  std::int64_t layers = 0;
  for (const char c : main) {
    switch (c) {
      case 'M':
      case '*':
      case '-':
      case 'E': ++layers; break;
      case '|': break;
      case 'G':
      case 'D':
      case '+':
        throw ConfigError(fmt::format("{}: --{}: '{}' layers ({}) are not modelled", src, flag, c,
                                      c == 'G'   ? "gated delta net"
                                      : c == 'D' ? "DeepSeek sparse attention"
                                                 : "multi-latent attention"));
      default:
        throw ConfigError(
            fmt::format("{}: --{}: '{}' is not a layer symbol (M, *, -, E, and | between pipeline "
                        "stages: hybrid_layer_allocation.py)",
                        src, flag, c));
    }
    if (layers > ConfigReader::kMaxLayers)
      throw ConfigError(fmt::format("{}: --{}: {}", src, flag, too_many_layers(std::to_string(layers))));
  }
  if (layers == 0) throw ConfigError(fmt::format("{}: --{} '{}' has no layers", src, flag, text));
  return main;
}

// A Mamba layer's mixer (TransformerConfig.mamba_*, MambaMixer.__init__): without --mamba-num-heads,
// d_inner is twice the hidden size (expand 2) in heads of --mamba-head-dim.
AttentionSpec read_mamba_mixer(const MegatronArgs& a, const std::string& src, const AttentionSpec& attn,
                               std::int64_t hidden) {
  AttentionSpec mixer = attn;
  mixer.kind = "mamba";
  mixer.window = 0;
  mixer.mamba_head_dim = size_flag(a, src, MF::kMambaHeadDim, 64);
  mixer.mamba_state_dim = size_flag(a, src, MF::kMambaStateDim, 128);
  mixer.mamba_num_groups = size_flag(a, src, MF::kMambaNumGroups, 8);
  if (a.has(MF::kMambaNumHeads)) {
    mixer.mamba_num_heads = size_flag(a, src, MF::kMambaNumHeads, 0);
  } else {
    if ((2 * hidden) % mixer.mamba_head_dim != 0)
      throw ConfigError(fmt::format("{}: d_inner = 2 x --{} = {} is not divisible by --{} {} (MambaMixer asserts it)",
                                    src, flag_name(MF::kHiddenSize), 2 * hidden, flag_name(MF::kMambaHeadDim),
                                    mixer.mamba_head_dim));
    mixer.mamba_num_heads = 2 * hidden / mixer.mamba_head_dim;
  }
  return mixer;
}

// A hybrid model's layers (hybrid_block.py HybridStack): one per pattern symbol, each a single block
// beside the identity.
void build_hybrid_layers(const MegatronArgs& a, const std::string& src, const std::string& pattern,
                         const AttentionSpec& attn, const MlpSpec& dense, const MlpSpec& moe, ModelSpec& m) {
  if (attn.kind != "gqa")
    throw ConfigError(
        fmt::format("{}: --{} with a hybrid model: its attention layers are not modelled (the '+' "
                    "layers of a pattern are MLA's)",
                    src, flag_name(MF::kMultiLatentAttention)));
  if (a.has(MF::kWindowSize))
    throw ConfigError(fmt::format("{}: --{} with a hybrid model is not modelled", src, flag_name(MF::kWindowSize)));
  if (size_flag(a, src, MF::kMtpNumLayers, 0, 0, ConfigReader::kMaxLayers) > 0)
    throw ConfigError(fmt::format("{}: --{} with a hybrid model: its multi-token prediction layers are not modelled",
                                  src, flag_name(MF::kMtpNumLayers)));
  const bool mamba = pattern.find('M') != std::string::npos;
  const AttentionSpec mixer = mamba ? read_mamba_mixer(a, src, attn, m.hidden_size) : attn;
  for (const char c : pattern) {
    if (c == '|') continue;
    if (c == 'E' && moe.kind != "moe")
      throw ConfigError(fmt::format("{}: --{}: 'E' (MoE) layers need --{}", src, flag_name(MF::kHybridLayerPattern),
                                    flag_name(MF::kNumExperts)));
    m.layers.push_back(*hybrid_layer(c, mixer, attn, dense, moe));  // read_hybrid_pattern checked the symbols
  }
  const auto given = static_cast<std::int64_t>(m.layers.size());
  if (a.has(MF::kNumLayers) && size_flag(a, src, MF::kNumLayers, 0, 1, ConfigReader::kMaxLayers) != given)
    m.warnings.push_back(fmt::format("--{} is ignored: the hybrid pattern has {} layers, which Megatron-LM takes",
                                     flag_name(MF::kNumLayers), given));
  if (a.has(MF::kMoeLayerFreq))
    m.warnings.push_back(fmt::format("--{} is ignored: a hybrid model's MoE layers are its pattern's 'E' layers",
                                     flag_name(MF::kMoeLayerFreq)));
  m.num_layers = given;
  m.family = "megatron-hybrid";
}

// A GPT model has no Mamba layers: Megatron-LM keeps the Mamba sizes in its config and uses none of
// them. Said where they differ from its defaults.
void warn_unused_mamba_flags(const MegatronArgs& a, const std::string& src, ModelSpec& m) {
  for (const auto& [flag, neutral] :
       {std::pair{MF::kMambaHeadDim, std::int64_t{64}}, std::pair{MF::kMambaStateDim, std::int64_t{128}},
        std::pair{MF::kMambaNumGroups, std::int64_t{8}}, std::pair{MF::kMambaNumHeads, std::int64_t{0}}})
    if (a.has(flag) && size_flag(a, src, flag, neutral, 0) != neutral)
      m.warnings.push_back(fmt::format("--{} is ignored: without --{} the model has no Mamba layers", flag_name(flag),
                                       flag_name(MF::kHybridLayerPattern)));
}

}  // namespace

int MegatronArgsAdapter::match(const nlohmann::json& config) const {
  return is_megatron_args_config(config) ? 1000 : 0;
}

ModelSpec MegatronArgsAdapter::adapt(const ConfigInput& input) const {
  const MegatronArgs a = MegatronArgs::from_config(input.config);
  const std::string& src = input.source;
  const std::optional<std::string> hybrid = read_hybrid_pattern(a, src);
  for (const MF required : {MF::kNumLayers, MF::kHiddenSize, MF::kNumAttentionHeads})
    if (!a.has(required) && !(hybrid && required == MF::kNumLayers))
      throw ConfigError(fmt::format("{}: --{} is required to describe the model", src, flag_name(required)));

  ModelSpec m;
  m.name = input.name;
  m.family = "megatron-gpt";
  m.model_type = "megatron-args";
  m.adapter = std::string(name());
  m.source = src;
  // Bounded before the per-layer list below is built.
  m.num_layers =
      hybrid ? static_cast<std::int64_t>(std::count_if(hybrid->begin(), hybrid->end(), [](char c) { return c != '|'; }))
             : size_flag(a, src, MF::kNumLayers, 0, 1, ConfigReader::kMaxLayers);
  m.hidden_size = size_flag(a, src, MF::kHiddenSize, 0);
  const std::int64_t heads = size_flag(a, src, MF::kNumAttentionHeads, 0);
  const std::int64_t groups = a.enabled(MF::kGroupQueryAttention) ? size_flag(a, src, MF::kNumQueryGroups, 1) : heads;
  // arguments.py: without --kv-channels, `assert args.hidden_size % args.num_attention_heads == 0`
  // (the rule HF configs without head_dim and spec files follow too).
  if (!a.has(MF::kKvChannels) && m.hidden_size % heads != 0)
    throw ConfigError(
        fmt::format("{}: --{} {} does not divide --{} {} and there is no --{} (Megatron-LM asserts "
                    "hidden_size % num_attention_heads == 0)",
                    src, flag_name(MF::kNumAttentionHeads), heads, flag_name(MF::kHiddenSize), m.hidden_size,
                    flag_name(MF::kKvChannels)));
  const std::int64_t kv_channels = size_flag(a, src, MF::kKvChannels, m.hidden_size / heads);
  const bool swiglu = a.enabled(MF::kSwiglu);
  // arguments.py: ffn_hidden_size defaults to 4h, or int(4h * 2/3 / 64) * 64 with SwiGLU.
  const std::int64_t default_ffn = swiglu ? (4 * m.hidden_size * 2 / 3) / 64 * 64 : 4 * m.hidden_size;
  const std::int64_t ffn = size_flag(a, src, MF::kFfnHiddenSize, default_ffn);

  const std::string norm = a.value(MF::kNormalization).value_or("LayerNorm");
  if (norm == "RMSNorm")
    m.normalization = Normalization::kRMSNorm;
  else if (norm == "LayerNorm")
    m.normalization = Normalization::kLayerNorm;
  else
    throw ConfigError(
        fmt::format("{}: --{}: unknown value '{}' (LayerNorm, RMSNorm)", src, flag_name(MF::kNormalization), norm));
  read_activation(a, src, a.has(MF::kNumExperts), m);
  m.add_bias_linear = !a.enabled(MF::kDisableBiasLinear);
  const std::string pos = a.value(MF::kPositionEmbeddingType)
                              .value_or(a.enabled(MF::kUseRotaryPositionEmbeddings) ? "rope" : "learned_absolute");
  if (pos == "rope" || pos == "yarn" || pos == "mrope")
    m.position_embedding = PositionEmbedding::kRope;
  else if (pos == "learned_absolute")
    m.position_embedding = PositionEmbedding::kLearnedAbsolute;
  else if (pos == "none" || pos == "relative")
    m.position_embedding = PositionEmbedding::kNone;
  else
    throw ConfigError(fmt::format("{}: --{}: unknown value '{}' (learned_absolute, rope, yarn, mrope, relative, none)",
                                  src, flag_name(MF::kPositionEmbeddingType), pos));
  // --seq-length is the setup's: the default of --max-position-embeddings.
  const std::int64_t seq = size_flag(a, src, find_knob("seq-length")->megatron.front(), 4096);
  m.max_position_embeddings = size_flag(a, src, MF::kMaxPositionEmbeddings, seq);
  // arguments.py validate_args, whatever the position embedding.
  if (m.max_position_embeddings < seq)
    throw ConfigError(
        fmt::format("{}: --{} {} is less than --seq-length {}: Megatron-LM refuses it "
                    "(max_position_embeddings must be greater than or equal to seq_length)",
                    src, flag_name(MF::kMaxPositionEmbeddings), m.max_position_embeddings, seq));
  m.tie_embeddings = !a.enabled(MF::kUntieEmbeddingsAndOutputWeights);
  m.hidden_dropout = rate_flag(a, src, MF::kHiddenDropout, 0.1);
  m.attention_dropout = rate_flag(a, src, MF::kAttentionDropout, 0.1);

  // Vocabulary: the tokenizer decides (megatron/training/tokenizer). NullTokenizer adds an EOD
  // token to --vocab-size; GPT2BPETokenizer has 50257 entries.
  const std::string tokenizer = a.value(MF::kTokenizerType).value_or("GPT2BPETokenizer");
  if (a.has(MF::kPaddedVocabSize)) {
    // TokenizerConfig.padded_vocab_size: build_tokenizer.py _set_padded_vocab_size keeps a given
    // one, and the model is built with exactly that many rows (training/models/gpt.py: no
    // padding); VocabParallelEmbedding divides them over TP (tensor_parallel/utils.py divide).
    m.vocab_size = size_flag(a, src, MF::kPaddedVocabSize, 0);
    const std::int64_t tp = size_flag(a, src, "tensor-model-parallel-size", 1);
    if (m.vocab_size % tp != 0)
      throw ConfigError(
          fmt::format("{}: --{} {} is not divisible by --tensor-model-parallel-size {}: Megatron-LM's "
                      "VocabParallelEmbedding divides the vocabulary over TP",
                      src, flag_name(MF::kPaddedVocabSize), m.vocab_size, tp));
  } else if (a.has(MF::kVocabSize)) {
    m.vocab_size = size_flag(a, src, MF::kVocabSize, 0) + (tokenizer == "NullTokenizer" ? 1 : 0);
  } else if (tokenizer == "GPT2BPETokenizer") {
    m.vocab_size = 50257;
  } else if (tokenizer == "TikTokenizer") {
    m.vocab_size = 131072;  // tiktoken's default vocabulary in Megatron-LM (2^17)
  } else {
    m.vocab_size = 50257;
    const auto model = a.value(MF::kTokenizerModel);
    m.warnings.push_back(
        fmt::format("the vocabulary size of tokenizer {}{} is not known without --{}; assuming 50257", tokenizer,
                    tokenizer == "HuggingFaceTokenizer" && model
                        ? fmt::format(" (--{} {}: no config.json with a vocab_size among the bundled models, "
                                      "the Hugging Face cache and local folders)",
                                      flag_name(MF::kTokenizerModel), *model)
                        : std::string(),
                    flag_name(MF::kVocabSize)));
  }

  AttentionSpec attn;
  attn.num_heads = heads;
  attn.num_query_groups = groups;
  attn.kv_channels = kv_channels;
  attn.qkv_bias = a.enabled(MF::kAddQkvBias);
  attn.qk_norm = a.enabled(MF::kQkLayernorm);
  const std::string softmax = a.value(MF::kSoftmaxType).value_or("vanilla");
  if (softmax == "learnable")
    attn.softmax_type = SoftmaxType::kLearnable;
  else if (softmax == "off-by-one")
    attn.softmax_type = SoftmaxType::kOffByOne;
  else if (softmax != "vanilla")
    throw ConfigError(fmt::format("{}: --{}: unknown value '{}' (vanilla, off-by-one, learnable)", src,
                                  flag_name(MF::kSoftmaxType), softmax));
  if (a.enabled(MF::kMultiLatentAttention)) {
    // arguments.py validate_args.
    if (a.enabled(MF::kGroupQueryAttention))
      throw ConfigError(
          fmt::format("{}: --{} with --{}: Megatron-LM refuses it (group query attention is mutually "
                      "exclusive with multi latent attention)",
                      src, flag_name(MF::kMultiLatentAttention), flag_name(MF::kGroupQueryAttention)));
    attn.kind = "mla";
    if (a.has(MF::kQLoraRank)) attn.q_lora_rank = size_flag(a, src, MF::kQLoraRank, 0);
    attn.kv_lora_rank = size_flag(a, src, MF::kKvLoraRank, 32);
    attn.qk_head_dim = size_flag(a, src, MF::kQkHeadDim, 128);
    attn.qk_pos_emb_head_dim = size_flag(a, src, MF::kQkPosEmbHeadDim, 64);
    attn.v_head_dim = size_flag(a, src, MF::kVHeadDim, 128);
    attn.num_query_groups = heads;
  }

  MlpSpec dense;
  dense.kind = "dense";
  dense.ffn_hidden_size = ffn;
  MlpSpec moe;
  const std::int64_t experts = size_flag(a, src, MF::kNumExperts, 0, 0);
  if (experts > 0) {
    moe.kind = "moe";
    moe.ffn_hidden_size = ffn;  // --ffn-hidden-size stays the model's nominal MLP width
    moe.num_experts = experts;
    moe.top_k = size_flag(a, src, MF::kMoeRouterTopk, 2);
    moe.expert_ffn_hidden_size = size_flag(a, src, MF::kMoeFfnHiddenSize, ffn);
    moe.shared_expert_ffn_hidden_size = size_flag(a, src, MF::kMoeSharedExpertIntermediateSize, 0, 0);
    moe.shared_expert_gate = a.enabled(MF::kMoeSharedExpertGate);
    moe.router_expert_bias = a.enabled(MF::kMoeRouterEnableExpertBias);
    // arguments.py: --moe-router-dtype choices fp32, fp64 (unset: the training dtype).
    const std::string router = a.value(MF::kMoeRouterDtype).value_or("");
    if (!router.empty() && router != "fp32" && router != "fp64")
      throw ConfigError(
          fmt::format("{}: --{}: unknown value '{}' (fp32, fp64)", src, flag_name(MF::kMoeRouterDtype), router));
    moe.router_fp32 = router == "fp32";
    check_router_rules(a, src, moe);
  } else if (a.has(MF::kMoeFfnHiddenSize)) {
    // transformer_config.py __post_init__: without experts the expert width is refused, unless
    // --moe-layer-freq leaves dense layers, where it is ignored with a warning.
    if (mixed_dense_moe_pattern(a, src, m.num_layers))
      m.warnings.push_back(
          fmt::format("--{} without --{} is ignored, as Megatron-LM ignores it with a dense/MoE "
                      "--{}: every layer is dense",
                      flag_name(MF::kMoeFfnHiddenSize), flag_name(MF::kNumExperts), flag_name(MF::kMoeLayerFreq)));
    else
      throw ConfigError(
          fmt::format("{}: --{} without --{}: Megatron-LM refuses it (transformer_config.py: "
                      "moe_ffn_hidden_size is set but num_moe_experts is None)",
                      src, flag_name(MF::kMoeFfnHiddenSize), flag_name(MF::kNumExperts)));
  }
  if (pos == "yarn" && attn.kind == "gqa") m.rope_yarn_factor = read_yarn_factor(a, src);
  if (hybrid) {
    build_hybrid_layers(a, src, *hybrid, attn, dense, moe, m);
    for (const auto& f : a.flags()) m.keys_read.push_back("--" + f.name);
    return m;
  }
  warn_unused_mamba_flags(a, src, m);
  std::vector<int> pattern(static_cast<std::size_t>(m.num_layers), experts > 0 ? 1 : 0);
  if (experts > 0 && a.has(MF::kMoeLayerFreq))
    pattern = moe_layer_pattern(*a.value(MF::kMoeLayerFreq), src, m.num_layers);
  const std::vector<std::int64_t> windows = read_windows(a, src, m.num_layers);
  for (std::int64_t i = 0; i < m.num_layers; ++i) {
    LayerSpec layer;
    layer.attention = attn;
    layer.attention.window = windows[static_cast<std::size_t>(i)];
    layer.mlp = pattern[static_cast<std::size_t>(i)] ? moe : dense;
    m.layers.push_back(layer);
  }
  m.mtp_num_layers = size_flag(a, src, MF::kMtpNumLayers, 0, 0, ConfigReader::kMaxLayers);
  // arguments.py validate_args: MTP with the position types that use position_ids only.
  if (m.mtp_num_layers > 0 && pos != "learned_absolute" && pos != "rope" && pos != "mrope" && pos != "none")
    throw ConfigError(
        fmt::format("{}: --{} {} with --{} {}: Megatron-LM refuses it (Multi-Token Prediction "
                    "supports the learned_absolute, rope, mrope and none position embedding types)",
                    src, flag_name(MF::kMtpNumLayers), m.mtp_num_layers, flag_name(MF::kPositionEmbeddingType), pos));
  for (const auto& f : a.flags()) m.keys_read.push_back("--" + f.name);
  return m;
}

void register_megatron_args(Registrar& registry) { registry.add_adapter(std::make_shared<MegatronArgsAdapter>()); }

}  // namespace mme::plugins
