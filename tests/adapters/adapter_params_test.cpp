// Every bundled model's exact total and active parameter counts, against
// tests/data/expected_params.csv (unique HF checkpoint weights: tied embeddings once, MTP
// excluded, DeepSeek-V3 expert bias included).
#include <set>

#include <gtest/gtest.h>

#include <mme/engine/estimator.hpp>

#include "expected_params.hpp"
#include "test_registry.hpp"
#include "test_support.hpp"

namespace mme::test {
namespace {

Estimator::ParamCount count(const nlohmann::json& config, const Registry& registry = full_registry()) {
  const ModelSpec spec = adapt(config, "config.json", registry);
  return Estimator(spec, registry).count_parameters();
}

std::int64_t sum(const std::vector<std::pair<std::string, std::int64_t>>& groups) {
  std::int64_t s = 0;
  for (const auto& [k, v] : groups) s += v;
  return s;
}

std::int64_t group(const Estimator::ParamCount& pc, const std::string& name) {
  for (const auto& [k, v] : pc.breakdown)
    if (k == name) return v;
  return 0;
}

class adapter_params : public ::testing::TestWithParam<ExpectedParams> {};

TEST_P(adapter_params, TotalAndActiveMatchTheCsvExactly) {
  const ExpectedParams& e = GetParam();
  const auto pc = count(bundled_json(e.model));
  EXPECT_EQ(pc.total, e.total) << e.model;
  EXPECT_EQ(pc.active, e.active) << e.model;
  // The breakdown adds up: groups sum to the total plus MTP, active groups to the active count.
  EXPECT_EQ(sum(pc.breakdown), pc.total + pc.mtp) << e.model;
  EXPECT_EQ(sum(pc.active_breakdown), pc.active) << e.model;
  EXPECT_LE(pc.active, pc.total);
}

INSTANTIATE_TEST_SUITE_P(bundled, adapter_params, ::testing::ValuesIn(expected_params()),
                         [](const auto& p) { return test_name(p.param.model); });

TEST(adapter_params_csv, CoversEveryBundledModelAndNothingElse) {
  std::set<std::string> bundled, listed;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() / "models")) {
    if (!std::filesystem::exists(entry.path() / "config.json")) continue;
    const std::string folder = entry.path().filename().string();
    const auto sep = folder.find("--");
    ASSERT_NE(sep, std::string::npos) << folder;
    bundled.insert(folder.substr(0, sep) + "/" + folder.substr(sep + 2));
  }
  for (const auto& e : expected_params()) EXPECT_TRUE(listed.insert(e.model).second) << "duplicate row " << e.model;
  EXPECT_EQ(bundled, listed);
  EXPECT_FALSE(bundled.empty());
}

TEST(adapter_params_mtp, DeepSeekV3MtpIsOneMoeLayerPlusItsProjectionAndNorms) {
  // Worked out from the V3 config, independently of the layer plugins: one MLA + MoE layer
  // (model.layers.61) plus enorm, hnorm, shared_head.norm (3h) and eh_proj (2h x h).
  const std::int64_t h = 7168, n = 128, q_r = 1536, kv_r = 512, dn = 128, dr = 64, dv = 128;
  const std::int64_t E = 256, F = 2048, S = 2048;
  const std::int64_t attention =
      h + h * q_r + q_r + q_r * n * (dn + dr) + h * (kv_r + dr) + kv_r + kv_r * n * (dn + dv) + n * dv * h;
  const std::int64_t moe = h + E * h + E + E * 3 * h * F + 3 * h * S;
  const std::int64_t mtp = attention + moe + 3 * h + 2 * h * h;
  EXPECT_EQ(mtp, 11610068224);  // "the MTP layer adds 11.61B" (expected_params.csv notes)
  for (const char* model : {"deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1"}) {
    const auto pc = count(bundled_json(model));
    EXPECT_EQ(pc.mtp, mtp) << model;
    EXPECT_EQ(group(pc, "mtp"), mtp) << model;
  }
  EXPECT_EQ(count(bundled_json("moonshotai/Kimi-K2-Instruct")).mtp, 0);  // num_nextn_predict_layers 0
  EXPECT_EQ(count(bundled_json("deepseek-ai/DeepSeek-V2")).mtp, 0);      // no key
}

TEST(adapter_params_tying, TiedEmbeddingsAreCountedOnce) {
  auto config = bundled_json("Qwen/Qwen3-0.6B");
  ASSERT_TRUE(config.at("tie_word_embeddings").get<bool>());
  const auto tied = count(config);
  EXPECT_EQ(group(tied, "output_layer"), 0);
  config["tie_word_embeddings"] = false;
  const auto untied = count(config);
  const std::int64_t head = 151936 * 1024;  // lm_head [vocab, hidden]
  EXPECT_EQ(untied.total - tied.total, head);
  EXPECT_EQ(untied.active - tied.active, head);
  EXPECT_EQ(group(untied, "output_layer"), head);
  // 751,632,384: what the HF checkpoint stores, lm_head included (models/README.md).
  EXPECT_EQ(untied.total, 751632384);
}

TEST(adapter_params_tying, GemmaIsTiedWhenTheKeyIsAbsent) {
  auto config = bundled_json("google/gemma-2-9b-it");
  ASSERT_FALSE(config.contains("tie_word_embeddings"));
  const auto tied = count(config);
  config["tie_word_embeddings"] = false;
  EXPECT_EQ(count(config).total - tied.total, 256000 * 3584);
}

TEST(adapter_params_qkv_bias, Qwen2BiasIsWhatTheGenericFallbackWouldMiss) {
  // Without the qwen adapter, Qwen2.5-7B falls to generic_hf, which has no reason to add
  // the q/k/v biases HF Qwen2 hard-codes: the difference is exactly those biases.
  const auto generic_only = make_registry({"generic_hf"});
  const auto config = bundled_json("Qwen/Qwen2.5-7B");
  const std::int64_t layers = 28, q = 28 * 128, kv = 4 * 128;
  EXPECT_EQ(count(config).total - count(config, *generic_only).total, layers * (q + 2 * kv));
}

TEST(adapter_params_generic, GenericFallbackReproducesTheDeepSeekStyleModels) {
  // The generic adapter honours MLA (kv_lora_rank), n_routed_experts, n_shared_experts,
  // first_k_dense_replace and noaux_tc, so it gets the DeepSeek-architecture models exactly.
  const auto generic_only = make_registry({"generic_hf"});
  for (const auto& e : expected_params()) {
    const auto config = bundled_json(e.model);
    if (!config.contains("kv_lora_rank")) continue;
    const ModelSpec spec = adapt(config, "config.json", *generic_only);
    EXPECT_EQ(spec.adapter, "generic_hf");
    const auto pc = Estimator(spec, *generic_only).count_parameters();
    EXPECT_EQ(pc.total, e.total) << e.model;
    EXPECT_EQ(pc.active, e.active) << e.model;
  }
}

}  // namespace
}  // namespace mme::test
