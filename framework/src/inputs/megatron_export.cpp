// A model as Megatron-LM launch flags: the inverse of the megatron_args adapter
// (plugins/adapters/megatron_args), flag by flag, for `mme estimate --print-megatron-args` and the
// browser page's export. What Megatron-LM has no flag for is refused, never dropped. Which flags
// describe a block is the Megatron-LM module class the block says it models (megatron_block()).
#include <fmt/core.h>

#include "mme/engine/registry.hpp"
#include "mme/inputs/megatron_args.hpp"
#include "mme/inputs/setup_schema.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/layer_model.hpp"
#include "mme/sdk/model_spec.hpp"

namespace mme {

namespace {

std::string number(double v) { return fmt::format("{}", v); }

[[noreturn]] void not_expressible(const ModelSpec& m, const std::string& what) {
  throw UsageError(fmt::format("{}: {}: Megatron-LM has no launch flag for it", m.name, what));
}

}  // namespace

std::vector<std::string> model_to_megatron_args(const ModelSpec& m, const Registry& registry) {
  if (m.layers.empty() || static_cast<std::int64_t>(m.layers.size()) != m.num_layers)
    not_expressible(m, "a model without its decoder layers");
  if (!(m.lm_blocks == LanguageModelBlocks{}))
    not_expressible(m, "embedding, output head or MTP blocks other than the language model's");
  // The Megatron-LM module class a block kind models, as its layer-memory model says.
  auto block = [&](const std::string& kind) {
    const LayerMemoryModel* model = registry.find_layer_model(kind);
    return model ? model->megatron_block() : MegatronBlock::kNone;
  };
  const LayerSpec& first = m.layers.front();
  const AttentionSpec& attn = first.attention;
  const MegatronBlock attn_block = block(attn.kind);
  const MlpSpec* dense = nullptr;
  const MlpSpec* moe = nullptr;
  std::vector<int> pattern;
  for (const LayerSpec& l : m.layers) {
    // One attention for every layer, one dense MLP and one MoE kind at most (--moe-layer-freq).
    if (!(l.attention == attn)) not_expressible(m, "decoder layers with different attention blocks");
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

  std::vector<std::string> a;
  auto flag = [&](const char* name) { a.push_back(std::string("--") + name); };
  auto value = [&](const char* name, const std::string& v) {
    flag(name);
    a.push_back(v);
  };
  auto integer = [&](const char* name, std::int64_t v) { value(name, std::to_string(v)); };

  integer("num-layers", m.num_layers);
  integer("hidden-size", m.hidden_size);
  integer("num-attention-heads", attn.num_heads);
  if (attn_block == MegatronBlock::kSelfAttention) {
    if (attn.num_query_groups != attn.num_heads) {
      flag("group-query-attention");
      integer("num-query-groups", attn.num_query_groups);
    }
    integer("kv-channels", attn.kv_channels);
    if (attn.qkv_bias) flag("add-qkv-bias");
  } else {
    flag("multi-latent-attention");
    if (attn.q_lora_rank) integer("q-lora-rank", *attn.q_lora_rank);
    integer("kv-lora-rank", attn.kv_lora_rank);
    integer("qk-head-dim", attn.qk_head_dim);
    integer("qk-pos-emb-head-dim", attn.qk_pos_emb_head_dim);
    integer("v-head-dim", attn.v_head_dim);
    if (attn.qkv_bias) not_expressible(m, "QKV biases in multi-latent attention");
  }
  if (attn.qk_norm) flag("qk-layernorm");

  // The adapter reads --ffn-hidden-size as the dense MLP's width and as the MoE blocks' nominal
  // one, which sizes nothing; an all-MoE model without one gets its experts' width (Megatron-LM
  // needs a value).
  integer("ffn-hidden-size", dense                      ? dense->ffn_hidden_size
                             : moe->ffn_hidden_size > 0 ? moe->ffn_hidden_size
                                                        : moe->expert_ffn_hidden_size);
  if (m.gated_linear_unit) {
    if (m.activation != "silu") not_expressible(m, fmt::format("a gated MLP with activation '{}'", m.activation));
    flag("swiglu");
  } else if (m.activation == "squared_relu") {
    flag("squared-relu");
  } else if (m.activation != "gelu") {
    not_expressible(m, fmt::format("activation '{}'", m.activation));
  }
  value("normalization", m.normalization == Normalization::kRMSNorm ? "RMSNorm" : "LayerNorm");
  if (!m.add_bias_linear) flag("disable-bias-linear");
  value("position-embedding-type", m.position_embedding == PositionEmbedding::kRope              ? "rope"
                                   : m.position_embedding == PositionEmbedding::kLearnedAbsolute ? "learned_absolute"
                                                                                                 : "none");
  integer("max-position-embeddings", m.max_position_embeddings);
  if (!m.tie_embeddings) flag("untie-embeddings-and-output-weights");
  value("hidden-dropout", number(m.hidden_dropout));
  value("attention-dropout", number(m.attention_dropout));
  // The embedding's rows as NullTokenizer gives them: --vocab-size plus its end-of-document token
  // (megatron/training/tokenizer); the user's own tokenizer replaces both flags.
  value("tokenizer-type", "NullTokenizer");
  integer("vocab-size", m.vocab_size - 1);

  if (moe) {
    integer("num-experts", moe->num_experts);
    integer("moe-router-topk", moe->top_k);
    integer("moe-ffn-hidden-size", moe->expert_ffn_hidden_size);
    if (moe->shared_expert_ffn_hidden_size > 0)
      integer("moe-shared-expert-intermediate-size", moe->shared_expert_ffn_hidden_size);
    if (moe->shared_expert_gate) flag("moe-shared-expert-gate");
    if (moe->router_expert_bias) flag("moe-router-enable-expert-bias");
    if (moe->router_fp32) value("moe-router-dtype", "fp32");
    if (dense) {
      // A Python list, as Megatron-LM's --moe-layer-freq takes it (one 0/1 per layer).
      std::string list = "[";
      for (std::size_t i = 0; i < pattern.size(); ++i) list += (i ? "," : "") + std::to_string(pattern[i]);
      value("moe-layer-freq", list + "]");
    }
  }
  if (m.mtp_num_layers > 0) integer("mtp-num-layers", m.mtp_num_layers);
  return a;
}

std::vector<std::string> megatron_launch_args(const ModelSpec& model, const TrainingSetup& setup,
                                              const Registry& registry) {
  std::vector<std::string> out = model_to_megatron_args(model, registry);
  const std::vector<std::string> rest = setup_to_megatron_args(setup, true);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::string megatron_args_file_text(const std::vector<std::string>& args) {
  std::string exports, flags;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "export" && i + 1 < args.size()) {
      exports += "export " + shell_quote(args[++i]) + "\n";
      continue;
    }
    if (args[i].rfind("--", 0) == 0) {
      if (!flags.empty()) flags += " \\\n";
      flags += args[i];
    } else {
      flags += " " + shell_quote(args[i]);
    }
  }
  return exports + flags + "\n";
}

}  // namespace mme
