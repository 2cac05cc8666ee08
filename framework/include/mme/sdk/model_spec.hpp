// ModelSpec: everything the memory models need to know about a decoder-only transformer, in
// Megatron-LM's terms (TransformerConfig / GPTModel). A plain value type: config adapters
// produce it, layer-memory models and the engine read it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mme {

enum class Normalization { kRMSNorm, kLayerNorm };
enum class PositionEmbedding { kRope, kLearnedAbsolute, kNone };
// How the attention softmax normalises (TransformerConfig.softmax_type; Transformer Engine's
// DotProductAttention): vanilla; off-by-one (a fixed 1 added to the denominator); learnable (a
// per-head offset in the denominator, GPT-OSS's attention sinks: a parameter of num_heads / TP
// elements per layer, DotProductAttention.softmax_offset). Neither of the last two runs on
// FlashAttention (dot_product_attention/utils.py get_attention_backend).
enum class SoftmaxType { kVanilla, kOffByOne, kLearnable };

// The attention block of one decoder layer: its sequence mixer. `kind` names the layer-memory
// model that handles it ("gqa" for MHA/GQA/MQA, "mla" for multi-latent attention, "mamba" for a
// Mamba-2 mixer, "no_attention" for a hybrid model's layer without one, or a plugin's own).
//
// A hybrid model (megatron/core/models/hybrid: --hybrid-layer-pattern) is a list of one-block
// layers: each pattern character is a layer of its own (hybrid_block.py HybridStack), a Mamba layer
// ('M': the mixer, no MLP), an attention layer ('*': no MLP), an MLP layer ('-') or a MoE layer
// ('E', both without attention). Here each is a LayerSpec whose other block is the identity.
struct AttentionSpec {
  std::string kind = "gqa";
  std::int64_t num_heads = 0;         // num_attention_heads
  std::int64_t num_query_groups = 0;  // num_query_groups (KV heads); == num_heads for MHA
  std::int64_t kv_channels = 0;       // head dim of Q/K/V for gqa
  bool qkv_bias = false;              // add_qkv_bias (Qwen2)
  bool qk_norm = false;               // qk_layernorm (Qwen3; for MLA: the q/kv latent norms)
  // Multi-latent attention (DeepSeek-V2/V3). q_lora_rank absent = single q projection.
  std::optional<std::int64_t> q_lora_rank;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_head_dim = 0;          // qk_nope_head_dim
  std::int64_t qk_pos_emb_head_dim = 0;  // qk_rope_head_dim
  std::int64_t v_head_dim = 0;
  // Sliding-window attention (TransformerConfig.window_size = (window, 0)): each query attends to
  // itself and the `window` tokens before it; 0 = full causal attention. The flash/fused kernels
  // keep the same tensors either way; the window cuts their work.
  std::int64_t window = 0;
  SoftmaxType softmax_type = SoftmaxType::kVanilla;
  // A Mamba-2 mixer in the attention's place (kind "mamba": megatron/core/ssm/mamba_mixer.py
  // MambaMixer, the sequence mixer of a hybrid model's Mamba layer, TransformerConfig.mamba_*):
  // mamba_num_heads heads of mamba_head_dim channels (d_inner = heads x head_dim), B and C in
  // mamba_num_groups groups of mamba_state_dim. 0 outside Mamba layers. The heads and query groups
  // above stay the model's (what its attention layers use).
  std::int64_t mamba_num_heads = 0;
  std::int64_t mamba_head_dim = 0;
  std::int64_t mamba_state_dim = 0;
  std::int64_t mamba_num_groups = 0;

  bool operator==(const AttentionSpec&) const = default;
};

// The MLP block of one decoder layer. `kind` names the layer-memory model ("dense", "moe"; "no_mlp"
// for a hybrid model's layer without one).
struct MlpSpec {
  std::string kind = "dense";
  std::int64_t ffn_hidden_size = 0;  // dense MLP width (ffn_hidden_size)
  // Mixture of experts.
  std::int64_t num_experts = 0;                    // num_moe_experts
  std::int64_t top_k = 0;                          // moe_router_topk
  std::int64_t expert_ffn_hidden_size = 0;         // moe_ffn_hidden_size
  std::int64_t shared_expert_ffn_hidden_size = 0;  // moe_shared_expert_intermediate_size (all shared experts)
  bool shared_expert_gate = false;                 // moe_shared_expert_gate (Qwen2-MoE)
  bool router_expert_bias = false;                 // moe_router_enable_expert_bias (DeepSeek-V3 noaux_tc)
  bool router_fp32 = false;                        // moe_router_dtype fp32 (DeepSeek-style configs)

  bool operator==(const MlpSpec&) const = default;
};

struct LayerSpec {
  AttentionSpec attention;
  MlpSpec mlp;
  // Gemma-2 style "sandwich" norms after attention and after the MLP (extra RMSNorms).
  bool post_attention_norm = false;
  bool post_mlp_norm = false;

  bool operator==(const LayerSpec&) const = default;
};

// The blocks around the decoder layers, by the layer-memory model that handles each (as
// AttentionSpec::kind and MlpSpec::kind name a decoder block's): the built-in ones are
// plugins/layers/language_model's. A model family with, say, a scaled or multimodal embedding
// names its own plugin's kind here.
struct LanguageModelBlocks {
  std::string embedding = "embedding";            // BlockRole::kEmbedding
  std::string output_head = "output_head";        // BlockRole::kOutputHead
  std::string mtp_projection = "mtp_projection";  // BlockRole::kMtpProjection (with MTP only)

  bool operator==(const LanguageModelBlocks&) const = default;
};

struct ModelSpec {
  // Provenance.
  std::string name;        // e.g. "deepseek-ai/DeepSeek-V3" or the file it came from
  std::string family;      // e.g. "deepseek_v3"
  std::string model_type;  // HF model_type, or "megatron-args"
  std::string adapter;     // the config adapter that produced this spec
  std::string source;      // where the config was read from (path or URL)

  std::int64_t num_layers = 0;  // decoder layers (== layers.size())
  std::int64_t hidden_size = 0;
  std::int64_t vocab_size = 0;  // unpadded (the engine pads like Megatron-LM)
  std::int64_t max_position_embeddings = 0;
  bool tie_embeddings = false;  // share_embeddings_and_output_weights
  PositionEmbedding position_embedding = PositionEmbedding::kRope;
  // YaRN's scaling factor (Megatron-LM's --position-embedding-type yarn --rotary-scaling-factor,
  // HF rope_scaling {rope_type: yarn, factor}), with Megatron-LM's default mscale 1 and
  // mscale_all_dim 0: above 1, attention.py scales RoPE's cos and sin by 0.1 ln(factor) + 1,
  // which TE's fused RoPE cannot, so rope_utils.py runs the unfused one. 1 = plain RoPE. Read by
  // the gqa block (multi-latent attention applies its own YaRN).
  double rope_yarn_factor = 1.0;
  Normalization normalization = Normalization::kRMSNorm;
  bool add_bias_linear = false;     // biases on every linear layer (Megatron default: on)
  bool gated_linear_unit = true;    // SwiGLU / GeGLU
  std::string activation = "silu";  // silu, gelu, quick_gelu (x sigmoid(1.702 x)), squared_relu, ...
  // The gated unit's variants (TransformerConfig.glu_linear_offset, activation_func_clamp_value):
  // glu(x) = act(min(x_glu, c)) * (clamp(x_linear, -c, c) + offset); GPT-OSS's clamped quick-GEGLU
  // has c = 7 and offset 1. 0 = no clamp, no offset.
  double glu_linear_offset = 0.0;
  double activation_clamp_value = 0.0;
  double hidden_dropout = 0.0;
  double attention_dropout = 0.0;

  std::vector<LayerSpec> layers;  // one per decoder layer
  LanguageModelBlocks lm_blocks;  // the embedding, output head and MTP projection blocks

  // Multi-token prediction (DeepSeek-V3): depth, each an extra transformer layer of the
  // last decoder layer's kind plus enorm/hnorm/eh_proj, placed on the last pipeline stage.
  std::int64_t mtp_num_layers = 0;

  // The keys of the source config the adapter read, and what it could not honour.
  std::vector<std::string> keys_read;
  std::vector<std::string> warnings;

  // The decoder layer spec an MTP layer uses (Megatron: the last decoder layer's kind).
  const LayerSpec& mtp_layer_spec() const { return layers.back(); }
};

// The distinct layer specs of a model (in order of first appearance) and, for each decoder
// layer, the index of its kind. Engines evaluate a kind once and multiply.
struct LayerKinds {
  std::vector<const LayerSpec*> kinds;
  std::vector<std::size_t> kind_of_layer;
};
LayerKinds group_layer_kinds(const ModelSpec& spec);

// Whether any layer has shared experts (moe_shared_expert_intermediate_size): the rules about
// shared experts (their overlap, their recompute) apply only then.
inline bool any_shared_experts(const ModelSpec& m) {
  return std::any_of(m.layers.begin(), m.layers.end(),
                     [](const LayerSpec& l) { return l.mlp.shared_expert_ffn_hidden_size > 0; });
}

// Checks a spec for internal consistency (sizes positive, layer count matches, kinds
// named, heads divide): what every block kind shares. A block's own fields are checked by its
// layer-memory model (LayerMemoryModel::validate_spec). Throws ConfigError naming the field.
void validate_model_spec(const ModelSpec& spec);

// For LayerMemoryModel::validate_spec: `value` of layer `index`'s `field` must be in [1, max].
// Throws ConfigError "<model>: layer <index> <field> must be positive, got <value>" (or "is larger
// than <max>, which no real model has").
void require_layer_field(const ModelSpec& model, std::size_t index, std::string_view field, std::int64_t value,
                         std::int64_t max);

}  // namespace mme
