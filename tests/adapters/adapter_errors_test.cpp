// Bad configs: every error is a ConfigError that names the file and the JSON key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/inputs/model_source.hpp>
#include <mme/sdk/error.hpp>

#include "test_registry.hpp"
#include "test_support.hpp"

namespace mme::test {
namespace {

using ::testing::HasSubstr;

constexpr const char* kSource = "models/broken/config.json";

// The message of the ConfigError adapting `config` throws (a failure if none is thrown).
std::string adapt_error(const nlohmann::json& config) {
  try {
    (void)adapt(config, kSource);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for " << config.dump().substr(0, 200);
  return {};
}

nlohmann::json with(const std::string& model, const std::string& key, const nlohmann::json& value) {
  auto c = bundled_json(model);
  c[key] = value;
  return c;
}

nlohmann::json without(const std::string& model, const std::string& key) {
  auto c = bundled_json(model);
  c.erase(key);
  return c;
}

// "<source>: <key>: ..." as ConfigReader writes it.
std::string names(const std::string& key) { return std::string(kSource) + ": " + key + ": "; }

const char* const kFamilies[] = {"Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct",
                                 "meta-llama/Meta-Llama-3-8B"};

TEST(adapter_errors, StringWhereAnIntegerBelongs) {
  for (const char* model : kFamilies) {
    EXPECT_THAT(adapt_error(with(model, "hidden_size", "big")),
                HasSubstr(names("hidden_size") + "expected a positive integer, got \"big\""))
        << model;
    EXPECT_THAT(adapt_error(with(model, "num_hidden_layers", "61")), HasSubstr(names("num_hidden_layers"))) << model;
  }
}

TEST(adapter_errors, WrongTypes) {
  EXPECT_THAT(adapt_error(with("Qwen/Qwen3-8B", "tie_word_embeddings", "yes")),
              HasSubstr(names("tie_word_embeddings") + "expected true or false"));
  EXPECT_THAT(adapt_error(with("Qwen/Qwen3-8B", "hidden_size", 4096.5)), HasSubstr(names("hidden_size")));
  EXPECT_THAT(adapt_error(with("Qwen/Qwen2-57B-A14B", "mlp_only_layers", "none")), HasSubstr(names("mlp_only_layers")));
  EXPECT_THAT(adapt_error(with("deepseek-ai/DeepSeek-V3", "q_lora_rank", true)), HasSubstr(names("q_lora_rank")));
  EXPECT_THAT(adapt_error(with("meta-llama/Meta-Llama-3-8B", "hidden_act", 3)), HasSubstr(names("hidden_act")));
  EXPECT_THAT(adapt_error(with("deepseek-ai/DeepSeek-V3", "rms_norm_eps", "small")), HasSubstr(names("rms_norm_eps")));
}

TEST(adapter_errors, MissingKeys) {
  EXPECT_THAT(adapt_error(without("Qwen/Qwen3-8B", "num_attention_heads")),
              HasSubstr(names("num_attention_heads") + "required key is missing"));
  EXPECT_THAT(adapt_error(without("Qwen/Qwen3-8B", "head_dim")), HasSubstr(names("head_dim")));
  EXPECT_THAT(adapt_error(without("Qwen/Qwen2.5-7B", "intermediate_size")), HasSubstr(names("intermediate_size")));
  EXPECT_THAT(adapt_error(without("Qwen/Qwen2-57B-A14B", "shared_expert_intermediate_size")),
              HasSubstr(names("shared_expert_intermediate_size")));
  EXPECT_THAT(adapt_error(without("deepseek-ai/DeepSeek-V3", "kv_lora_rank")), HasSubstr(names("kv_lora_rank")));
  EXPECT_THAT(adapt_error(without("deepseek-ai/DeepSeek-V2-Lite", "q_lora_rank")), HasSubstr(names("q_lora_rank")));
  EXPECT_THAT(adapt_error(without("deepseek-ai/DeepSeek-V3", "moe_intermediate_size")),
              HasSubstr(names("moe_intermediate_size")));
  EXPECT_THAT(adapt_error(without("moonshotai/Kimi-K2-Instruct", "num_experts_per_tok")),
              HasSubstr(names("num_experts_per_tok")));
  EXPECT_THAT(adapt_error(without("mistralai/Mixtral-8x7B-v0.1", "num_experts_per_tok")),
              HasSubstr(names("num_experts_per_tok")));
}

TEST(adapter_errors, GenericNamesEveryMissingEssentialKey) {
  const std::string msg = adapt_error({{"model_type", "foo"}, {"hidden_size", 1024}});
  EXPECT_THAT(msg, HasSubstr(std::string(kSource) + ": num_hidden_layers, num_attention_heads, vocab_size: "));
  EXPECT_THAT(msg, HasSubstr("model_type 'foo'"));
  EXPECT_THAT(adapt_error(without("meta-llama/Meta-Llama-3-8B", "vocab_size")),
              HasSubstr(std::string(kSource) + ": vocab_size: required key is missing"));
  EXPECT_THAT(adapt_error(without("meta-llama/Meta-Llama-3-8B", "intermediate_size")),
              HasSubstr(names("intermediate_size")));
}

// T5 and BART configs have no num_hidden_layers (num_layers / encoder_layers): they are named
// for what they are, not for the decoder-only keys they lack.
TEST(adapter_errors, EncoderDecoderModelsAreNamedAsSuch) {
  // google-t5/t5-small's config.json, as the hub serves it (the keys that matter).
  const nlohmann::json t5 = {{"architectures", {"T5ForConditionalGeneration"}},
                             {"d_ff", 2048},
                             {"d_kv", 64},
                             {"d_model", 512},
                             {"is_encoder_decoder", true},
                             {"model_type", "t5"},
                             {"num_decoder_layers", 6},
                             {"num_heads", 8},
                             {"num_layers", 6},
                             {"vocab_size", 32128}};
  EXPECT_EQ(adapt_error(t5), std::string(kSource) +
                                 ": T5-style encoder-decoder models are not modelled (model_type 't5': "
                                 "is_encoder_decoder is true); mme estimates decoder-only models as Megatron-LM's GPT "
                                 "model trains them");
  // Without the flag, the decoder layer count gives it away.
  nlohmann::json t5_bare = t5;
  t5_bare.erase("is_encoder_decoder");
  EXPECT_THAT(adapt_error(t5_bare), HasSubstr("T5-style encoder-decoder models are not modelled (model_type 't5': "
                                              "it has num_decoder_layers)"));
  const nlohmann::json bart = {{"model_type", "bart"},
                               {"d_model", 768},
                               {"encoder_layers", 6},
                               {"decoder_layers", 6},
                               {"encoder_attention_heads", 12},
                               {"decoder_attention_heads", 12},
                               {"vocab_size", 50265}};
  EXPECT_THAT(adapt_error(bart), HasSubstr("(model_type 'bart': it has decoder_layers)"));
  // A decoder-only config that says is_encoder_decoder: true is refused the same way.
  EXPECT_THAT(adapt_error(with("meta-llama/Meta-Llama-3-8B", "is_encoder_decoder", true)),
              HasSubstr("T5-style encoder-decoder models are not modelled (model_type 'llama'"));
  EXPECT_NO_THROW((void)adapt(with("meta-llama/Meta-Llama-3-8B", "is_encoder_decoder", false)));
}

TEST(adapter_errors, AbsurdValues) {
  EXPECT_THAT(adapt_error(with("Qwen/Qwen3-8B", "hidden_size", 1e30)),
              HasSubstr(names("hidden_size") + "1e+30 is larger than"));
  EXPECT_THAT(adapt_error(with("meta-llama/Meta-Llama-3-8B", "vocab_size", 99999999999LL)),
              HasSubstr(names("vocab_size")));
  EXPECT_THAT(adapt_error(with("deepseek-ai/DeepSeek-V3", "num_hidden_layers", 10000000)),
              HasSubstr(names("num_hidden_layers") + "10000000 layers is more than mme accepts (at most 512;"));
  EXPECT_THAT(adapt_error(with("deepseek-ai/DeepSeek-V3", "n_routed_experts", 5000000)),
              HasSubstr(names("n_routed_experts")));
  EXPECT_THAT(adapt_error(with("Qwen/Qwen3-8B", "num_attention_heads", 0)), HasSubstr(names("num_attention_heads")));
  EXPECT_THAT(adapt_error(with("Qwen/Qwen3-8B", "num_attention_heads", -32)), HasSubstr(names("num_attention_heads")));
  EXPECT_THAT(adapt_error(with("deepseek-ai/DeepSeek-V3", "first_k_dense_replace", -1)),
              HasSubstr(names("first_k_dense_replace")));
  EXPECT_THAT(adapt_error(with("deepseek-ai/DeepSeek-V3", "num_nextn_predict_layers", 2000000)),
              HasSubstr(names("num_nextn_predict_layers")));
  EXPECT_THAT(adapt_error(with("Qwen/Qwen3-8B", "attention_dropout", 1.5)), HasSubstr(names("attention_dropout")));
  EXPECT_THAT(adapt_error(with("Qwen/Qwen3-8B", "rms_norm_eps", -1)), HasSubstr(names("rms_norm_eps")));
}

TEST(adapter_errors, InconsistentValues) {
  EXPECT_THAT(adapt_error(with("Qwen/Qwen3-8B", "num_key_value_heads", 5)),
              HasSubstr(names("num_key_value_heads") + "5 does not divide num_attention_heads = 32"));
  EXPECT_THAT(adapt_error(with("deepseek-ai/DeepSeek-V3", "num_experts_per_tok", 300)),
              HasSubstr(names("num_experts_per_tok") + "300 is more than the 256 experts"));
  EXPECT_THAT(adapt_error(with("Qwen/Qwen3-30B-A3B", "mlp_only_layers", nlohmann::json::array({48}))),
              HasSubstr(names("mlp_only_layers") + "layer 48 does not exist"));
  EXPECT_THAT(adapt_error(with("Qwen/Qwen3-30B-A3B", "decoder_sparse_step", 0)),
              HasSubstr(names("decoder_sparse_step")));
  auto no_head_dim = without("meta-llama/Meta-Llama-3-8B", "num_key_value_heads");
  no_head_dim["num_attention_heads"] = 30;  // 4096 / 30 is not whole
  EXPECT_THAT(adapt_error(no_head_dim), HasSubstr(names("num_attention_heads")));
}

TEST(adapter_errors, SizesNoRealModelComesNear) {
  // Every value is within its own bound, but the product is ~1e18 parameters.
  auto c = bundled_json("meta-llama/Meta-Llama-3-8B");
  c["hidden_size"] = 1 << 24;
  c["intermediate_size"] = 1 << 24;
  c["num_attention_heads"] = 1 << 10;
  c["num_key_value_heads"] = 1 << 10;
  c["num_hidden_layers"] = 512;
  const std::string msg = adapt_error(c);
  EXPECT_THAT(msg, HasSubstr(std::string(kSource) + ": the config describes about"));
  EXPECT_THAT(msg, HasSubstr("hidden_size"));
}

TEST(adapter_errors, BrokenJsonNamesTheFile) {
  TempDir dir;
  const auto path = dir.path() / "config.json";
  write_file(path, "{\"hidden_size\": 4096, \"num_hidden_layers\": ");
  try {
    (void)read_config_file(path);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string() + ": invalid JSON"));
  }
}

TEST(adapter_errors, NotAnObjectAndNoAdapter) {
  EXPECT_THROW((void)adapt(nlohmann::json::array({1, 2}), kSource), ConfigError);
  EXPECT_THAT(adapt_error({{"foo", 1}}), HasSubstr(kSource));
}

}  // namespace
}  // namespace mme::test
