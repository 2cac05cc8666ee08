// The megatron_args adapter and its inverse, model_to_megatron_args: flags -> ModelSpec -> flags
// gives the model's flags back, and the inverse picks each block's flags by the Megatron-LM module
// class the block's layer model names (LayerMemoryModel::megatron_block()), never by its kind.
// The expected flags are the input flags themselves, written out in the order the export writes
// them (megatron_export.cpp), with its defaults made explicit.
#include "megatron_args_adapter.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/engine/registry.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/layer_model.hpp>

#include "layer_plugins.hpp"

namespace mme::plugins {
namespace {

using ::testing::HasSubstr;

// A block that stands in for another: every call goes to `inner`, only the kind differs and,
// where `block` says so, the Megatron-LM module class it names.
class Renamed final : public LayerMemoryModel {
 public:
  Renamed(const LayerMemoryModel& inner, std::string_view kind, MegatronBlock block)
      : inner_(inner), kind_(kind), block_(block) {}
  std::string_view kind() const override { return kind_; }
  BlockRole role() const override { return inner_.role(); }
  std::string_view description() const override { return "test block"; }
  void validate_spec(const ModelSpec& m, const LayerSpec& l, std::size_t i) const override {
    inner_.validate_spec(m, l, i);
  }
  void validate(const BlockContext& ctx) const override { inner_.validate(ctx); }
  void parameters(const BlockContext& ctx, BlockParams& out) const override { inner_.parameters(ctx, out); }
  void activations(const BlockContext& ctx, BlockActivations& out) const override { inner_.activations(ctx, out); }
  void costs(const BlockContext& ctx, BlockCosts& out) const override { inner_.costs(ctx, out); }
  MegatronBlock megatron_block() const override { return block_; }

 private:
  const LayerMemoryModel& inner_;
  std::string_view kind_;
  MegatronBlock block_;
};

const Registry& registry() {
  static const Registry* r = [] {
    auto* out = new Registry;
    test::register_layer_plugins(*out);
    out->register_plugin("adapter_megatron_args", "test", "", register_megatron_args);
    const LayerMemoryModel& gqa = *out->find_layer_model("gqa");
    const LayerMemoryModel& moe = *out->find_layer_model("moe");
    out->register_plugin("test_blocks", "test", "", [&](Registrar& reg) {
      reg.add_layer_model(std::make_shared<Renamed>(gqa, "my_attention", MegatronBlock::kSelfAttention));
      reg.add_layer_model(std::make_shared<Renamed>(moe, "my_experts", MegatronBlock::kMoeLayer));
      reg.add_layer_model(std::make_shared<Renamed>(gqa, "opaque_attention", MegatronBlock::kNone));
    });
    return out;
  }();
  return *r;
}

// 4 layers, GQA 16 heads in 4 groups, MoE on layers 1 and 3 (8 experts, top-2).
const std::vector<std::string> kFlags = {"--num-layers",
                                         "4",
                                         "--hidden-size",
                                         "1024",
                                         "--num-attention-heads",
                                         "16",
                                         "--group-query-attention",
                                         "--num-query-groups",
                                         "4",
                                         "--kv-channels",
                                         "64",
                                         "--ffn-hidden-size",
                                         "4096",
                                         "--swiglu",
                                         "--normalization",
                                         "RMSNorm",
                                         "--disable-bias-linear",
                                         "--position-embedding-type",
                                         "rope",
                                         "--max-position-embeddings",
                                         "4096",
                                         "--untie-embeddings-and-output-weights",
                                         "--hidden-dropout",
                                         "0",
                                         "--attention-dropout",
                                         "0",
                                         "--tokenizer-type",
                                         "NullTokenizer",
                                         "--vocab-size",
                                         "32000",
                                         "--num-experts",
                                         "8",
                                         "--moe-router-topk",
                                         "2",
                                         "--moe-ffn-hidden-size",
                                         "512",
                                         "--moe-layer-freq",
                                         "[0,1,0,1]"};

ModelSpec model_of(const std::vector<std::string>& flags) {
  std::string line;
  for (const auto& f : flags) line += (line.empty() ? "" : " ") + f;
  const nlohmann::json config = parse_megatron_args(line, "test flags").to_config();
  const auto* adapter = registry().find_adapter("megatron_args");
  EXPECT_NE(adapter, nullptr);
  return adapter->adapt({config, "test-model", "test flags"});
}

TEST(MegatronArgsAdapter, FlagsReadBackAsTheSameFlags) {
  const ModelSpec m = model_of(kFlags);
  ASSERT_EQ(m.layers.size(), 4u);
  EXPECT_EQ(m.layers[0].attention.kind, "gqa");
  EXPECT_EQ(m.layers[1].mlp.kind, "moe");
  EXPECT_EQ(model_to_megatron_args(m, registry()), kFlags);
}

// GPT-OSS's flags: a clamped, offset quick-GEGLU, learnable softmax offsets and a sliding window on
// every other layer. They read back as the same flags; the window follows
// transformer/utils.py is_layer_window_attention.
std::vector<std::string> gpt_oss_flags(const std::vector<std::string>& window_flags) {
  // kFlags with biases, every layer MoE, the softmax and windows after the heads and the
  // quick-GEGLU in SwiGLU's place: the order the export writes.
  std::vector<std::string> f;
  for (std::size_t i = 0; i < kFlags.size(); ++i) {
    const std::string& flag = kFlags[i];
    if (flag == "--disable-bias-linear") continue;
    if (flag == "--moe-layer-freq") {
      ++i;
      continue;
    }
    if (flag == "--swiglu") {
      f.insert(f.end(), {"--quick-geglu", "--glu-linear-offset", "1", "--activation-func-clamp-value", "7"});
      continue;
    }
    f.push_back(flag);
    if (flag == "--kv-channels") {
      f.push_back(kFlags[++i]);
      f.insert(f.end(), {"--add-qkv-bias", "--softmax-type", "learnable"});
      f.insert(f.end(), window_flags.begin(), window_flags.end());
    }
  }
  return f;
}

TEST(MegatronArgsAdapter, GptOssFlagsReadBackAsTheSameFlags) {
  const auto flags = gpt_oss_flags({"--window-size", "127,0", "--window-attn-skip-freq", "2"});
  const ModelSpec m = model_of(flags);
  EXPECT_EQ(m.activation, "quick_gelu");
  EXPECT_TRUE(m.gated_linear_unit);
  EXPECT_DOUBLE_EQ(m.glu_linear_offset, 1);
  EXPECT_DOUBLE_EQ(m.activation_clamp_value, 7);
  // Layer numbers 1 and 3 (1-based) are not multiples of 2: the window; 2 and 4 the whole sequence.
  EXPECT_EQ(m.layers[0].attention.window, 127);
  EXPECT_EQ(m.layers[1].attention.window, 0);
  EXPECT_EQ(m.layers[2].attention.window, 127);
  EXPECT_EQ(m.layers[3].attention.window, 0);
  EXPECT_EQ(m.layers[0].attention.softmax_type, SoftmaxType::kLearnable);
  EXPECT_EQ(model_to_megatron_args(m, registry()), flags);
  // A list says it layer by layer; every layer windowed needs no skip list.
  const ModelSpec listed =
      model_of(gpt_oss_flags({"--window-size", "'(64, 0)'", "--window-attn-skip-freq", "[0,0,1,1]"}));
  EXPECT_EQ(listed.layers[1].attention.window, 0);
  EXPECT_EQ(listed.layers[2].attention.window, 64);
  EXPECT_EQ(model_to_megatron_args(listed, registry()),
            gpt_oss_flags({"--window-size", "64,0", "--window-attn-skip-freq", "[0,0,1,1]"}));
  const ModelSpec all = model_of(gpt_oss_flags({"--window-size", "64,0"}));
  for (const auto& l : all.layers) EXPECT_EQ(l.attention.window, 64);
  // (-1, 0) is the whole causal sequence.
  for (const auto& l : model_of(gpt_oss_flags({"--window-size", "-1,0"})).layers) EXPECT_EQ(l.attention.window, 0);
}

TEST(MegatronArgsAdapter, YarnOutsideMlaKeepsItsFactor) {
  auto yarn = [](const std::vector<std::string>& extra) {
    std::vector<std::string> f = kFlags;
    const auto at = std::find(f.begin(), f.end(), "rope");
    *at = "yarn";
    f.insert(at + 1, extra.begin(), extra.end());
    return f;
  };
  // --rotary-scaling-factor 32: a concentration factor of 0.1 ln 32 + 1 (the unfused RoPE); it
  // reads back as the same flags.
  const auto flags = yarn({"--rotary-scaling-factor", "32"});
  const ModelSpec m = model_of(flags);
  EXPECT_DOUBLE_EQ(m.rope_yarn_factor, 32);
  EXPECT_EQ(model_to_megatron_args(m, registry()), flags);
  EXPECT_DOUBLE_EQ(model_of(yarn({})).rope_yarn_factor, 1);  // factor 1: plain RoPE
  // mscale equal to mscale_all_dim: a concentration factor of 1, the fused RoPE.
  EXPECT_DOUBLE_EQ(model_of(yarn({"--rotary-scaling-factor", "32", "--mscale-all-dim", "1"})).rope_yarn_factor, 1);
}

TEST(MegatronArgsAdapter, GptOssFlagsMegatronRefusesAreRefused) {
  auto error = [](const std::vector<std::string>& extra) -> std::string {
    try {
      model_of(gpt_oss_flags(extra));
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_THAT(error({"--swiglu"}), HasSubstr("--quick-geglu with --swiglu"));
  EXPECT_THAT(error({"--window-size", "64,8"}), HasSubstr("reaches later tokens is not modelled"));
  EXPECT_THAT(error({"--window-size", "64"}), HasSubstr("expected two integers"));
  EXPECT_THAT(error({"--softmax-type", "sparse"}), HasSubstr("unknown value 'sparse'"));
  EXPECT_THAT(error({"--window-size", "64,0", "--window-attn-skip-freq", "[1,2"}),
              HasSubstr("--window-attn-skip-freq"));
}

TEST(MegatronArgsAdapter, TheExportAsksTheBlockNotItsKind) {
  // Blocks of other kinds that model the same Megatron-LM classes give the same flags.
  ModelSpec m = model_of(kFlags);
  for (LayerSpec& l : m.layers) {
    l.attention.kind = "my_attention";
    if (l.mlp.kind == "moe") l.mlp.kind = "my_experts";
  }
  EXPECT_EQ(model_to_megatron_args(m, registry()), kFlags);
}

TEST(MegatronArgsAdapter, ABlockOfNoMegatronClassIsRefused) {
  ModelSpec m = model_of(kFlags);
  for (LayerSpec& l : m.layers) l.attention.kind = "opaque_attention";
  try {
    model_to_megatron_args(m, registry());
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("attention kind 'opaque_attention'"));
    EXPECT_THAT(e.what(), HasSubstr("Megatron-LM has no launch flag for it"));
  }
  // A kind no plugin provides is refused the same way.
  m = model_of(kFlags);
  m.layers[2].mlp.kind = "no_such_mlp";
  EXPECT_THROW(model_to_megatron_args(m, registry()), UsageError);
}

// The model rules Megatron-LM's validate_args and TransformerConfig.__post_init__ refuse, each
// with the flags that break it added to the model above (arguments.py, transformer_config.py).
TEST(MegatronArgsAdapter, ModelsMegatronRefusesAreRefused) {
  auto with = [](std::vector<std::string> extra) {
    std::vector<std::string> flags = kFlags;
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  };
  auto refused = [&](const std::vector<std::string>& flags, const std::string& why) {
    SCOPED_TRACE(why);
    try {
      (void)model_of(flags);
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(why));
      EXPECT_THAT(e.what(), HasSubstr("Megatron-LM refuses it"));
    }
  };
  refused(with({"--multi-latent-attention"}), "--multi-latent-attention with --group-query-attention");
  refused(with({"--seq-length", "8192"}), "--max-position-embeddings 4096 is less than --seq-length 8192");
  // MTP takes the position types that use position_ids (learned_absolute, rope, mrope, none).
  refused(with({"--mtp-num-layers", "1", "--position-embedding-type", "yarn"}),
          "--mtp-num-layers 1 with --position-embedding-type yarn");
  EXPECT_EQ(model_of(with({"--mtp-num-layers", "1", "--position-embedding-type", "learned_absolute"})).mtp_num_layers,
            1);
  refused(with({"--moe-shared-expert-intermediate-size", "0"}), "--moe-shared-expert-intermediate-size must be");
  refused(with({"--moe-router-topk", "1"}), "--moe-router-topk 1 with softmax scores needs --moe-router-pre-softmax");
  refused(with({"--moe-router-enable-expert-bias"}), "needs --moe-router-score-function sigmoid or sqrtsoftplus");
  refused(with({"--moe-expert-capacity-factor", "1.0", "--moe-router-load-balancing-type", "sinkhorn"}),
          "not sinkhorn");
  refused(with({"--moe-router-group-topk", "2"}), "needs --moe-router-num-groups");
  refused(with({"--moe-router-group-topk", "1", "--moe-router-num-groups", "3"}),
          "8 experts are not divisible by --moe-router-num-groups 3");
  refused(with({"--moe-router-group-topk", "4", "--moe-router-num-groups", "2"}),
          "--moe-router-group-topk 4 is more than --moe-router-num-groups 2");
  // transformer_config.py: a list of balancing types needs a list of coefficients as long.
  refused(with({"--moe-router-load-balancing-type", "aux_loss", "seq_aux_loss", "--moe-aux-loss-coeff", "1e-2"}),
          "2 --moe-router-load-balancing-type values need as many --moe-aux-loss-coeff values, not 1");
  (void)model_of(
      with({"--moe-router-load-balancing-type", "aux_loss", "seq_aux_loss", "--moe-aux-loss-coeff", "1e-2", "1e-3"}));
  (void)model_of(with({"--moe-router-load-balancing-type", "seq_aux_loss"}));
  // And what it accepts: top-1 with pre-softmax, the bias with sigmoid scores, group-limited routing.
  EXPECT_NO_THROW(model_of(with({"--moe-router-topk", "1", "--moe-router-pre-softmax"})));
  EXPECT_NO_THROW(model_of(with({"--moe-router-enable-expert-bias", "--moe-router-score-function", "sigmoid",
                                 "--moe-router-group-topk", "2", "--moe-router-num-groups", "4"})));
  // moe_ffn_hidden_size without experts.
  std::vector<std::string> dense(kFlags.begin(), kFlags.end() - 8);  // without the MoE flags
  ASSERT_EQ(dense.back(), "32000");
  dense.insert(dense.end(), {"--moe-ffn-hidden-size", "512"});
  refused(dense, "--moe-ffn-hidden-size without --num-experts");
  // ... unless --moe-layer-freq leaves dense layers: Megatron-LM ignores it with a warning, and so
  // does mme, saying so.
  for (const char* freq : {"2", "[0,1,1,1]"}) {
    SCOPED_TRACE(freq);
    std::vector<std::string> mixed = dense;
    mixed.insert(mixed.end(), {"--moe-layer-freq", freq});
    const ModelSpec m = model_of(mixed);
    for (const LayerSpec& l : m.layers) EXPECT_EQ(l.mlp.kind, "dense");
    ASSERT_EQ(m.warnings.size(), 1u);
    EXPECT_THAT(m.warnings[0], HasSubstr("--moe-ffn-hidden-size without --num-experts is ignored"));
  }
  std::vector<std::string> all_moe = dense;
  all_moe.insert(all_moe.end(), {"--moe-layer-freq", "1"});
  refused(all_moe, "--moe-ffn-hidden-size without --num-experts");
}

}  // namespace
}  // namespace mme::plugins

namespace mme::plugins {
namespace {

// kFlags as a hybrid model: a Mamba layer, an attention layer, an MLP layer and a MoE layer
// (--hybrid-layer-pattern M*-E), the Mamba sizes after the pattern, as the export writes them.
std::vector<std::string> hybrid_flags(const std::string& pattern) {
  std::vector<std::string> f(kFlags.begin(), kFlags.end() - 2);  // without --moe-layer-freq
  f.insert(f.end(), {"--hybrid-layer-pattern", pattern, "--mamba-num-heads", "32", "--mamba-head-dim", "64",
                     "--mamba-state-dim", "128", "--mamba-num-groups", "8"});
  return f;
}

TEST(MegatronArgsAdapter, HybridPatternsReadBackAsTheSameFlags) {
  const ModelSpec m = model_of(hybrid_flags("M*-E"));
  ASSERT_EQ(m.layers.size(), 4u);
  EXPECT_EQ(m.num_layers, 4);
  EXPECT_EQ(m.layers[0].attention.kind, "mamba");
  EXPECT_EQ(m.layers[0].mlp.kind, "no_mlp");
  EXPECT_EQ(m.layers[1].attention.kind, "gqa");
  EXPECT_EQ(m.layers[1].mlp.kind, "no_mlp");
  EXPECT_EQ(m.layers[2].attention.kind, "no_attention");
  EXPECT_EQ(m.layers[2].mlp.kind, "dense");
  EXPECT_EQ(m.layers[3].attention.kind, "no_attention");
  EXPECT_EQ(m.layers[3].mlp.kind, "moe");
  // MambaMixer without --mamba-num-heads: d_inner = 2 x 1024 in heads of 64.
  EXPECT_EQ(m.layers[0].attention.mamba_num_heads, 32);
  EXPECT_EQ(model_to_megatron_args(m, registry()), hybrid_flags("M*-E"));
  // The deprecated spelling, and no --num-layers: the pattern counts the layers.
  std::vector<std::string> old = hybrid_flags("MM**");
  old[0] = "--hybrid-override-pattern", old[1] = "MM**";
  old.erase(std::find(old.begin(), old.end(), "--hybrid-layer-pattern"),
            std::find(old.begin(), old.end(), "--hybrid-layer-pattern") + 2);
  EXPECT_EQ(model_of(old).layers.size(), 4u);
  // A --num-layers the pattern disagrees with is ignored, as arguments.py ignores it, and said.
  std::vector<std::string> more = hybrid_flags("'M*-E|M*-E'");  // quoted: the line is read as shell words
  EXPECT_EQ(model_of(more).layers.size(), 8u);
  ASSERT_FALSE(model_of(more).warnings.empty());
  EXPECT_THAT(model_of(more).warnings.front(), HasSubstr("--num-layers is ignored: the hybrid pattern has 8 layers"));
}

TEST(MegatronArgsAdapter, HybridPatternsMegatronRefusesAreRefused) {
  auto error_of = [](std::vector<std::string> f) {
    try {
      model_of(f);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::vector<std::string> both = hybrid_flags("M*-E");
  both.insert(both.end(), {"--hybrid-override-pattern", "M*-E"});
  EXPECT_THAT(error_of(both), HasSubstr("cannot both be specified"));
  EXPECT_THAT(error_of(hybrid_flags("M*GE")), HasSubstr("'G' layers (gated delta net) are not modelled"));
  EXPECT_THAT(error_of(hybrid_flags("M*xE")), HasSubstr("'x' is not a layer symbol"));
  EXPECT_THAT(error_of(hybrid_flags("M*-E/MM")), HasSubstr("multi-token prediction layers of a hybrid model"));
  EXPECT_EQ(error_of(hybrid_flags("M*-E/")), "(no error)");  // no MTP depth after the separator
  std::vector<std::string> dense_only = hybrid_flags("M*-E");
  dense_only.erase(std::find(dense_only.begin(), dense_only.end(), "--num-experts"),
                   std::find(dense_only.begin(), dense_only.end(), "--moe-ffn-hidden-size") + 2);
  EXPECT_THAT(error_of(dense_only), HasSubstr("'E' (MoE) layers need --num-experts"));
  std::vector<std::string> windowed = hybrid_flags("M*-E");
  windowed.insert(windowed.end(), {"--window-size", "128,0"});
  EXPECT_THAT(error_of(windowed), HasSubstr("--window-size with a hybrid model is not modelled"));
  std::vector<std::string> odd = hybrid_flags("M*-E");
  odd.insert(odd.end(), {"--mamba-head-dim", "48"});  // the later value replaces 64: 2048 / 48
  odd.erase(std::find(odd.begin(), odd.end(), "--mamba-num-heads"),
            std::find(odd.begin(), odd.end(), "--mamba-num-heads") + 2);
  EXPECT_THAT(error_of(odd), HasSubstr("is not divisible by --mamba-head-dim 48"));
}

// The pattern's '|' separators are the pipeline's chunks (select_pipeline_segment): a layout of
// the embedding, one 't' per layer and the loss; arguments.py refuses the other splits beside it.
TEST(MegatronArgsAdapter, HybridPipesAreThePipelineLayout) {
  auto setup_of = [](const std::string& line) {
    return setup_from_megatron_args(parse_megatron_args(line, "test flags"), TrainingSetup{});
  };
  EXPECT_EQ(setup_of("--hybrid-layer-pattern 'M-M*|-M-|M*-|M-'").pipeline.layout, "Etttt|ttt|ttt|ttL");
  EXPECT_EQ(setup_of("--hybrid-layer-pattern M-M*").pipeline.layout, "");
  EXPECT_EQ(setup_of("--pipeline-model-parallel-layout 'Et|tL'").pipeline.layout, "Et|tL");
  for (const char* refused : {"--num-virtual-stages-per-pipeline-rank 2", "--pipeline-model-parallel-layout Ett|ttL",
                              "--account-for-loss-in-pipeline-split"})
    EXPECT_THROW(setup_of(std::string("--hybrid-layer-pattern M-M* ") + refused), UsageError) << refused;
  EXPECT_THROW(setup_of("--hybrid-layer-pattern 'M-|M*' --decoder-first-pipeline-num-layers 1"), UsageError);
  EXPECT_NO_THROW(setup_of("--hybrid-layer-pattern 'M-M*' --decoder-first-pipeline-num-layers 1"));
}

}  // namespace
}  // namespace mme::plugins
