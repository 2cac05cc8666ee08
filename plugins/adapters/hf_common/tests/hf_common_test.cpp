// The readers every Hugging Face adapter shares (hf_common.hpp), on hand-written configs: each
// rule is the one the comment beside it states (HF's defaults, Megatron-Bridge's mapping).
#include "hf_common.hpp"

#include <string>

#include <gtest/gtest.h>

#include <mme/sdk/config_reader.hpp>
#include <mme/sdk/error.hpp>

namespace mme::plugins::hf {
namespace {

using nlohmann::json;

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HfCommon, ActivationIsTheFirstKeyGivenInLowerCase) {
  const json config = {{"hidden_act", "SiLU"}, {"hidden_activation", "gelu"}};
  ConfigReader r(config, "config.json");
  EXPECT_EQ(read_activation(r, {"hidden_activation", "hidden_act"}, "silu"), "gelu");
  EXPECT_EQ(read_activation(r, {"hidden_act"}, "gelu"), "silu");
  EXPECT_EQ(read_activation(r, {"activation_function"}, "gelu_new"), "gelu_new");  // the fallback
  EXPECT_TRUE(is_swiglu_activation("swish"));
  EXPECT_FALSE(is_swiglu_activation("gelu"));
  const json empty = {{"hidden_act", ""}};
  ConfigReader e(empty, "config.json");
  EXPECT_EQ(error_of([&] { read_activation(e, {"hidden_act"}, "silu"); }),
            "config.json: hidden_act: expected an activation name, got an empty string");
}

TEST(HfCommon, GqaHeadsDefaultAsHuggingFaceDoes) {
  // No num_key_value_heads: MHA; no head_dim: hidden_size / num_attention_heads (4096 / 32).
  const json mha = {{"num_attention_heads", 32}};
  ConfigReader r(mha, "config.json");
  const GqaHeads g = read_gqa_heads(r, 4096, false);
  EXPECT_EQ(g.heads, 32);
  EXPECT_EQ(g.groups, 32);
  EXPECT_EQ(g.kv_channels, 128);
  // head_dim wins over the quotient (Qwen3-8B: 32 heads of 128 on hidden 4096, 8 KV heads).
  const json gqa = {{"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"head_dim", 128}};
  ConfigReader q(gqa, "config.json");
  const GqaHeads h = read_gqa_heads(q, 4096, true);
  EXPECT_EQ(h.groups, 8);
  EXPECT_EQ(h.kv_channels, 128);
  const json bad = {{"num_attention_heads", 32}, {"num_key_value_heads", 5}};
  ConfigReader b(bad, "config.json");
  EXPECT_EQ(error_of([&] { read_gqa_heads(b, 4096, false); }),
            "config.json: num_key_value_heads: 5 does not divide num_attention_heads = 32");
  ConfigReader odd(mha, "config.json");
  EXPECT_EQ(error_of([&] { read_gqa_heads(odd, 4100, false); }),
            "config.json: num_attention_heads: 32 heads do not divide hidden_size = 4100 and there is no head_dim key");
}

TEST(HfCommon, MlaNeedsItsQueryRankKey) {
  // DeepSeek-V2-Lite: q_lora_rank null (one query projection), kv rank 512, 128 + 64 / 128.
  const json lite = {{"num_attention_heads", 16}, {"q_lora_rank", nullptr}, {"kv_lora_rank", 512},
                     {"qk_nope_head_dim", 128},   {"qk_rope_head_dim", 64}, {"v_head_dim", 128}};
  ConfigReader r(lite, "config.json");
  const AttentionSpec a = read_mla_attention(r, lite);
  EXPECT_EQ(a.kind, "mla");
  EXPECT_FALSE(a.q_lora_rank.has_value());
  EXPECT_EQ(a.num_query_groups, 16);  // no KV heads
  EXPECT_EQ(a.kv_channels, 192);      // qk_nope_head_dim + qk_rope_head_dim
  json missing = lite;
  missing.erase("q_lora_rank");
  ConfigReader m(missing, "config.json");
  EXPECT_EQ(error_of([&] { read_mla_attention(m, missing); }),
            "config.json: q_lora_rank: required key is missing (null means a single query projection)");
}

TEST(HfCommon, ExpertCounts) {
  // Megatron-Bridge: shared experts' width = n_shared_experts x moe_intermediate_size.
  const json config = {{"num_experts_per_tok", 6}, {"n_shared_experts", 2}};
  ConfigReader r(config, "config.json");
  EXPECT_EQ(read_top_k(r, "num_experts_per_tok", 64, "n_routed_experts"), 6);
  EXPECT_EQ(read_shared_experts_width(r, 1408), 2816);
  ConfigReader few(config, "config.json");
  EXPECT_EQ(error_of([&] { read_top_k(few, "num_experts_per_tok", 4, "n_routed_experts"); }),
            "config.json: num_experts_per_tok: 6 is more than the 4 experts of n_routed_experts");
}

}  // namespace
}  // namespace mme::plugins::hf
