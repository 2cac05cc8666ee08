// Which adapter claims which config (that the choice for Moonlight / Kimi-K2 does not change the
// numbers is tested in plugins/adapters/moonlight_kimi/tests).
#include <map>

#include <gtest/gtest.h>

#include <mme/engine/estimator.hpp>

#include "expected_params.hpp"
#include "test_registry.hpp"

namespace mme::test {
namespace {

struct Claim {
  std::string adapter, family;
};

// The adapter and family each bundled model gets. Every CSV row must be listed here.
const std::map<std::string, Claim>& expected_claims() {
  static const std::map<std::string, Claim> claims = {
      {"Qwen/Qwen2.5-0.5B", {"qwen", "qwen2"}},
      {"Qwen/Qwen2.5-7B", {"qwen", "qwen2"}},
      {"Qwen/Qwen2.5-14B", {"qwen", "qwen2"}},
      {"Qwen/Qwen2.5-32B", {"qwen", "qwen2"}},
      {"Qwen/Qwen2.5-72B", {"qwen", "qwen2"}},
      {"Qwen/Qwen3-0.6B", {"qwen", "qwen3"}},
      {"Qwen/Qwen3-8B", {"qwen", "qwen3"}},
      {"Qwen/Qwen3-32B", {"qwen", "qwen3"}},
      {"Qwen/Qwen3-30B-A3B", {"qwen", "qwen3_moe"}},
      {"Qwen/Qwen3-235B-A22B", {"qwen", "qwen3_moe"}},
      {"Qwen/Qwen2-57B-A14B", {"qwen", "qwen2_moe"}},
      {"deepseek-ai/DeepSeek-V2-Lite", {"deepseek", "deepseek_v2"}},
      {"deepseek-ai/DeepSeek-V2", {"deepseek", "deepseek_v2"}},
      {"deepseek-ai/DeepSeek-V3", {"deepseek", "deepseek_v3"}},
      {"deepseek-ai/DeepSeek-R1", {"deepseek", "deepseek_v3"}},
      {"moonshotai/Moonlight-16B-A3B", {"moonlight_kimi", "moonlight"}},
      {"moonshotai/Kimi-K2-Instruct", {"moonlight_kimi", "kimi_k2"}},
      {"meta-llama/Meta-Llama-3-8B", {"generic_hf", "llama"}},
      {"meta-llama/Meta-Llama-3-70B", {"generic_hf", "llama"}},
      {"mistralai/Mixtral-8x7B-v0.1", {"generic_hf", "mixtral"}},
      {"google/gemma-2-9b-it", {"generic_hf", "gemma2"}},
      {"openai/gpt-oss-120b", {"gpt_oss", "gpt_oss"}},
      {"nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", {"nemotron_h", "nemotron_h"}},
  };
  return claims;
}

int score(const Registry& r, std::string_view adapter, const nlohmann::json& config) {
  const ConfigAdapter* a = r.find_adapter(adapter);
  if (!a) throw std::runtime_error("adapter not registered");
  return a->match(config);
}

TEST(adapter_selection, EveryBundledModelGoesToItsFamilyAdapter) {
  for (const auto& e : expected_params()) {
    auto it = expected_claims().find(e.model);
    ASSERT_NE(it, expected_claims().end()) << e.model << " has no expected adapter in this test";
    const auto config = bundled_json(e.model);
    const ConfigAdapter* best = full_registry().best_adapter(config);
    ASSERT_NE(best, nullptr) << e.model;
    EXPECT_EQ(best->name(), it->second.adapter) << e.model;
    const ModelSpec spec = adapt(config);
    EXPECT_EQ(spec.adapter, it->second.adapter) << e.model;
    EXPECT_EQ(spec.family, it->second.family) << e.model;
    EXPECT_EQ(spec.model_type, config.at("model_type").get<std::string>()) << e.model;
    EXPECT_FALSE(spec.keys_read.empty()) << e.model;
  }
}

TEST(adapter_selection, ScoresFollowTheConvention) {
  const Registry& r = full_registry();
  const auto moonlight = bundled_json("moonshotai/Moonlight-16B-A3B");
  EXPECT_EQ(score(r, "moonlight_kimi", moonlight), 200);  // beats the family adapter on purpose
  EXPECT_EQ(score(r, "deepseek", moonlight), 100);
  EXPECT_EQ(score(r, "generic_hf", moonlight), 10);
  EXPECT_EQ(score(r, "qwen", moonlight), 0);

  const auto kimi = bundled_json("moonshotai/Kimi-K2-Instruct");
  EXPECT_EQ(score(r, "moonlight_kimi", kimi), 100);
  EXPECT_EQ(score(r, "deepseek", kimi), 50);  // DeepseekV3ForCausalLM under another model_type

  const auto v3 = bundled_json("deepseek-ai/DeepSeek-V3");
  EXPECT_EQ(score(r, "deepseek", v3), 100);
  EXPECT_EQ(score(r, "moonlight_kimi", v3), 0);  // DeepSeek's own vocabulary (129280)

  const auto llama = bundled_json("meta-llama/Meta-Llama-3-8B");
  EXPECT_EQ(score(r, "generic_hf", llama), 10);
  for (const char* a : {"deepseek", "moonlight_kimi", "qwen"}) EXPECT_EQ(score(r, a, llama), 0) << a;
}

TEST(adapter_selection, MatchNeverThrowsOnOddValues) {
  const nlohmann::json odd = {{"model_type", 5}, {"architectures", "DeepseekV3ForCausalLM"}, {"vocab_size", "x"}};
  for (const auto& name : all_adapter_names()) EXPECT_NO_THROW((void)score(full_registry(), name, odd)) << name;
  EXPECT_EQ(score(full_registry(), "generic_hf", odd), 10);  // has a common key: adapt() names the problems
  EXPECT_EQ(score(full_registry(), "generic_hf", nlohmann::json::array()), 0);
  EXPECT_EQ(full_registry().best_adapter(nlohmann::json{{"foo", 1}}), nullptr);
}

TEST(adapter_selection, UnknownModelTypeWithCommonKeysFallsBackToGeneric) {
  auto config = bundled_json("meta-llama/Meta-Llama-3-8B");
  config["model_type"] = "my_new_llama";
  config.erase("architectures");
  const ModelSpec spec = adapt(config);
  EXPECT_EQ(spec.adapter, "generic_hf");
  EXPECT_EQ(spec.family, "my_new_llama");
  EXPECT_EQ(Estimator(spec, full_registry()).count_parameters().total, 8030261248);
}

}  // namespace
}  // namespace mme::test
