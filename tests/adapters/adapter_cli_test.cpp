// `mme params` and `mme models` end to end with the real executable and plugins: exact
// counts for every bundled model, the JSON shape, and errors (non-zero exit, one line on
// stderr, nothing on stdout).
#include <filesystem>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "expected_params.hpp"
#include "test_support.hpp"

namespace mme::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

const std::map<std::string, std::string> kOffline = {{"HF_HUB_OFFLINE", "1"}, {"MME_MODELS_PATH", ""}};

class adapter_cli_params : public ::testing::TestWithParam<ExpectedParams> {};

TEST_P(adapter_cli_params, JsonCountsMatchTheCsv) {
  const ExpectedParams& e = GetParam();
  const RunResult r = run_mme({"params", e.model, "--json"}, kOffline);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);  // exactly one JSON document on stdout
  ASSERT_TRUE(j.at("total_params").is_number_integer());
  ASSERT_TRUE(j.at("active_params").is_number_integer());
  ASSERT_TRUE(j.at("mtp_params").is_number_integer());
  EXPECT_EQ(j["total_params"].get<std::int64_t>(), e.total);
  EXPECT_EQ(j["active_params"].get<std::int64_t>(), e.active);
  EXPECT_EQ(j["model"], e.model);
  // The breakdown names every group and adds up to the total plus MTP.
  std::int64_t sum = 0;
  for (const char* g : {"embedding", "output_layer", "attention", "dense_mlp", "routed_experts", "shared_experts",
                        "router", "norms", "mtp"}) {
    ASSERT_TRUE(j["breakdown"].contains(g)) << g;
    ASSERT_TRUE(j["breakdown"][g].is_number_integer()) << g;
  }
  for (const auto& [k, v] : j["breakdown"].items()) sum += v.get<std::int64_t>();
  EXPECT_EQ(sum, e.total + j["mtp_params"].get<std::int64_t>());
  EXPECT_EQ(j["breakdown"]["mtp"], j["mtp_params"]);
  EXPECT_FALSE(j["adapter"].get<std::string>().empty());
}

INSTANTIATE_TEST_SUITE_P(bundled, adapter_cli_params, ::testing::ValuesIn(expected_params()),
                         [](const auto& p) { return test_name(p.param.model); });

TEST(adapter_cli_params_text, ShowsExactCountsAndMtp) {
  const RunResult r = run_mme({"params", "deepseek-ai/DeepSeek-V3"}, kOffline);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("671026419200"));
  EXPECT_THAT(r.out, HasSubstr("37552297472"));
  EXPECT_THAT(r.out, HasSubstr("MTP parameters"));
  EXPECT_THAT(r.out, HasSubstr("adapter deepseek"));
}

TEST(adapter_cli_models, JsonListsEveryBundledModelWithItsCounts) {
  const RunResult r = run_mme({"models", "--json"}, kOffline);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  std::map<std::string, json> by_name;
  for (const auto& m : j.at("models")) by_name[m.at("name").get<std::string>()] = m;
  const auto expected = expected_params();
  EXPECT_EQ(by_name.size(), expected.size());
  for (const auto& e : expected) {
    ASSERT_TRUE(by_name.count(e.model)) << e.model;
    const json& m = by_name[e.model];
    EXPECT_EQ(m.at("total_params").get<std::int64_t>(), e.total) << e.model;
    EXPECT_EQ(m.at("active_params").get<std::int64_t>(), e.active) << e.model;
    EXPECT_FALSE(m.at("family").get<std::string>().empty()) << e.model;
    EXPECT_FALSE(m.at("adapter").get<std::string>().empty()) << e.model;
  }
}

TEST(adapter_cli_models, TextListsFamiliesAndAdapters) {
  const RunResult r = run_mme({"models"}, kOffline);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* text : {"moonshotai/Moonlight-16B-A3B", "moonlight_kimi", "generic_hf", "deepseek_v3", "qwen3_moe"})
    EXPECT_THAT(r.out, HasSubstr(text));
}

// The bundled Gemma-2 sets three things mme does not model. A listing of the zoo does not warn
// about them on every run: --verbose lists them under the model, the plain listing says where
// to look, and the estimate of that model warns (once each).
TEST(adapter_cli_models, NotModelledSettingsAreListedOnceNotOnEveryRun) {
  const RunResult plain = run_mme({"models"}, kOffline);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err, "");
  EXPECT_THAT(plain.out, HasSubstr("\nSome settings of google/gemma-2-9b-it are not modelled: `mme models --verbose` "
                                   "lists them.\n"));
  EXPECT_THAT(plain.out, Not(HasSubstr("sliding_window")));

  const RunResult verbose = run_mme({"models", "--verbose"}, kOffline);
  ASSERT_EQ(verbose.exit_code, 0) << verbose.err;
  EXPECT_EQ(verbose.err, "");
  // The notes follow the model's own row, before the next model's.
  const auto row = verbose.out.find("google/gemma-2-9b-it ");
  const auto next = verbose.out.find("meta-llama/Meta-Llama-3-70B ");
  ASSERT_NE(row, std::string::npos);
  ASSERT_NE(next, std::string::npos);
  const std::string notes = verbose.out.substr(row, next - row);
  for (const char* key : {"sliding_window", "attn_logit_softcapping", "final_logit_softcapping"})
    EXPECT_THAT(notes, HasSubstr(std::string("\n    note: ") + key + " is set: ")) << key;
  EXPECT_THAT(verbose.out, Not(HasSubstr("Some settings of")));

  const RunResult estimate = run_mme({"estimate", "google/gemma-2-9b-it"}, kOffline);
  ASSERT_EQ(estimate.exit_code, 0) << estimate.err;
  for (const char* key : {"sliding_window is set", "attn_logit_softcapping is set", "final_logit_softcapping is set"}) {
    const auto first = estimate.err.find(key);
    EXPECT_NE(first, std::string::npos) << key << "\n" << estimate.err;
    EXPECT_EQ(estimate.err.find(key, first + 1), std::string::npos) << key << " twice\n" << estimate.err;
  }
}

// A failed `mme params` prints nothing on stdout and exactly one line on stderr.
void expect_one_line_error(const RunResult& r, const std::string& must_contain) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(r.out.empty()) << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.back(), '\n') << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(must_contain));
}

class adapter_cli_errors : public ::testing::Test {
 protected:
  RunResult params_of(const std::string& text) {
    const auto path = dir_.path() / "config.json";
    write_file(path, text);
    path_ = path.string();
    return run_mme({"params", path_, "--json"}, kOffline);
  }
  TempDir dir_;
  std::string path_;
};

json llama() { return json::parse(read_file(bundled_config("meta-llama/Meta-Llama-3-8B"))); }

TEST_F(adapter_cli_errors, BrokenJson) {
  const RunResult r = params_of("{\"model_type\": \"llama\", \"hidden_size\": 4096,");
  expect_one_line_error(r, path_);
  EXPECT_THAT(r.err, HasSubstr("invalid JSON"));
  EXPECT_EQ(r.exit_code, 3);
}

TEST_F(adapter_cli_errors, StringWhereAnIntegerBelongs) {
  auto c = llama();
  c["hidden_size"] = "big";
  const RunResult r = params_of(c.dump());
  expect_one_line_error(r, path_ + ": hidden_size: expected a positive integer, got \"big\"");
  EXPECT_EQ(r.exit_code, 3);
}

TEST_F(adapter_cli_errors, MissingKey) {
  auto c = json::parse(read_file(bundled_config("deepseek-ai/DeepSeek-V3")));
  c.erase("kv_lora_rank");
  const RunResult r = params_of(c.dump());
  expect_one_line_error(r, path_ + ": kv_lora_rank: required key is missing");
  EXPECT_EQ(r.exit_code, 3);
}

TEST_F(adapter_cli_errors, AbsurdValue) {
  auto c = json::parse(read_file(bundled_config("Qwen/Qwen3-8B")));
  c["num_hidden_layers"] = 1e30;
  const RunResult r = params_of(c.dump());
  expect_one_line_error(r, path_ + ": num_hidden_layers: ");
  EXPECT_EQ(r.exit_code, 3);
}

TEST_F(adapter_cli_errors, NotAModelConfig) {
  const RunResult r = params_of("{\"foo\": 1}");
  expect_one_line_error(r, path_);
}

// A multimodal config is estimated for its language model, and says so: a vision_config next to
// the text_config (LLaVA, Gemma-3, Llama-4), or at the top next to the text model's keys
// (Qwen2-VL). The language model's numbers are Llama-3-8B's either way.
TEST(adapter_cli_models, MultimodalConfigsSayTheVisionTowerIsLeftOut) {
  TempDir dir;
  const json vision = {{"hidden_size", 1280}, {"depth", 32}, {"num_heads", 16}, {"patch_size", 14}};
  json nested = {{"model_type", "llava"}, {"text_config", llama()}, {"vision_config", vision}};
  json flat = llama();
  flat["vision_config"] = vision;
  const std::string note = "vision tower not modelled; the estimate covers the language model";
  const RunResult plain = run_mme({"estimate", "meta-llama/Meta-Llama-3-8B", "--json"}, kOffline);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const auto& [name, config] : std::vector<std::pair<std::string, json>>{{"nested", nested}, {"flat", flat}}) {
    SCOPED_TRACE(name);
    const auto path = dir.path() / name / "config.json";
    std::filesystem::create_directories(path.parent_path());
    write_file(path, config.dump());
    const RunResult r = run_mme({"estimate", path.string(), "--json"}, kOffline);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "mme: warning: " + path.string() + ": " + note + "\n");
    const json j = json::parse(r.out);
    EXPECT_EQ(j.at("warnings"), json::array({note}));
    EXPECT_EQ(j.at("peak"), json::parse(plain.out).at("peak"));
    const RunResult text = run_mme({"estimate", path.string()}, kOffline);
    EXPECT_THAT(text.out, HasSubstr("\nNotes:\n  - " + note + "\n"));
  }
  EXPECT_EQ(json::parse(plain.out).at("warnings"), json::array());
}

}  // namespace
}  // namespace mme::test
