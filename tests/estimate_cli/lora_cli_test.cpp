// LoRA end to end through the built `mme` (docs/memory-model.md, "LoRA"): the --lora-* flags of
// `mme estimate` and `mme params`, Megatron-Bridge's `peft` section of spec files, and the errors.
// Expected values for Meta-Llama-3-8B (the bundled config) are worked out by hand: adapters of
// rank 16 per layer, r x (in + out): linear_qkv 16 x (4096 + 6144) = 163,840, linear_proj
// 16 x 8192 = 131,072, linear_fc1 16 x (4096 + 28672) = 524,288, linear_fc2 16 x (14336 + 4096)
// = 294,912; 1,114,112 per layer, 35,651,584 for 32 layers, half of it per rank at TP 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

using test::run_mme;
using ::testing::HasSubstr;

const std::vector<std::string> kLlama = {"estimate", "meta-llama/Meta-Llama-3-8B", "--tp", "2", "--num-gpus", "8"};

std::vector<std::string> with(std::vector<std::string> args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

nlohmann::json json_of(const test::RunResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return nlohmann::json::object();
  return nlohmann::json::parse(r.out);
}

TEST(LoraCli, EstimateFreezesTheBaseAndTrainsTheAdapters) {
  const auto base = json_of(run_mme(with(kLlama, {"--json"})));
  const auto lora = json_of(run_mme(with(kLlama, {"--lora-rank", "16", "--json"})));
  ASSERT_FALSE(base.empty());
  ASSERT_FALSE(lora.empty());
  const auto& st = lora["stages"][0];
  EXPECT_EQ(st["trainable_parameters"], 17'825'792);
  EXPECT_EQ(st["parameters"].get<std::int64_t>() - base["stages"][0]["parameters"].get<std::int64_t>(), 17'825'792);
  EXPECT_EQ(base["stages"][0]["trainable_parameters"], base["stages"][0]["parameters"]);
  // fp32 gradients of the adapters: 4 x 17,825,792; the distributed optimizer over DP 4:
  // 12 x 17,825,792 / 4.
  EXPECT_EQ(st["gradient_bytes"], 71'303'168);
  EXPECT_EQ(st["optimizer_bytes"], 53'477'376);
  EXPECT_EQ(lora["setup"]["lora_rank"], 16);
  EXPECT_EQ(lora["setup"]["lora_target_modules"], "linear_qkv,linear_proj,linear_fc1,linear_fc2");
  EXPECT_FALSE(base["setup"].contains("lora_rank"));

  const auto text = run_mme(with(kLlama, {"--lora-rank", "16"}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("trainable 17.83M (LoRA adapters; the rest frozen)"));
  EXPECT_THAT(text.out, HasSubstr("LoRA: rank 16 on linear_qkv,linear_proj,linear_fc1,linear_fc2"));
}

TEST(LoraCli, ParamsCountsTheAdapters) {
  const auto j = json_of(run_mme({"params", "meta-llama/Meta-Llama-3-8B", "--lora-rank", "16", "--lora-target-modules",
                                  "linear_qkv,linear_fc2", "--json"}));
  ASSERT_FALSE(j.empty());
  // 32 x (163,840 + 294,912) = 14,680,064.
  EXPECT_EQ(j["lora"]["trainable_params"], 14'680'064);
  EXPECT_EQ(j["lora"]["rank"], 16);
  EXPECT_EQ(j["lora"]["target_modules"], nlohmann::json::array({"linear_qkv", "linear_fc2"}));
  EXPECT_EQ(j["lora"]["frozen_params"], j["total_params"]);
  const auto plain = json_of(run_mme({"params", "meta-llama/Meta-Llama-3-8B", "--json"}));
  EXPECT_FALSE(plain.contains("lora"));
  const auto text = run_mme({"params", "meta-llama/Meta-Llama-3-8B", "--lora-rank", "16"});
  EXPECT_THAT(text.out, HasSubstr("LoRA adapters:"));
  EXPECT_THAT(text.out, HasSubstr("35651584"));
}

TEST(LoraCli, BridgesPeftSectionEqualsTheFlags) {
  const test::TempDir dir;
  const auto path = dir.path() / "lora.yaml";
  test::write_file(path,
                   "parallelism:\n  tensor_model_parallel_size: 2\n  pipeline_model_parallel_size: 1\n"
                   "training:\n  micro_batch_size: 1\n  seq_length: 4096\n  sequence_parallel: true\ninfrastructure:\n "
                   " world_size: 8\n"
                   "peft:\n  dim: 16\n  alpha: 32\n  target_modules: [linear_qkv, linear_proj]\n"
                   "  dropout: 0.1\n  dropout_position: pre\n  lora_A_init_method: xavier\n"
                   "  lora_B_init_method: zero\n");
  const auto spec = json_of(run_mme(with(kLlama, {"--pp", "1", "--config", path.string(), "--json"})));
  const auto flags = json_of(run_mme(with(kLlama, {"--lora-rank", "16", "--lora-target-modules",
                                                   "linear_qkv,linear_proj", "--lora-dropout", "0.1", "--json"})));
  ASSERT_FALSE(spec.empty());
  EXPECT_EQ(spec["stages"], flags["stages"]);
  // 32 x (163,840 + 131,072) / 2 = 4,718,592.
  EXPECT_EQ(spec["stages"][0]["trainable_parameters"], 4'718'592);

  // --dump-config writes the section back.
  const auto dumped = run_mme(with(kLlama, {"--pp", "1", "--config", path.string(), "--dump-config"}));
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  EXPECT_THAT(dumped.out, HasSubstr("peft:"));
  EXPECT_THAT(dumped.out, HasSubstr("dim: 16"));
}

TEST(LoraCli, ErrorsNameWhatIsWrong) {
  auto r = run_mme(with(kLlama, {"--lora-alpha", "16"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("need --lora-rank"));
  r = run_mme(with(kLlama, {"--lora-rank", "16", "--lora-target-modules", "linear_q_proj"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("LoRA target module 'linear_q_proj' is not one mme models"));
  r = run_mme(with(kLlama, {"--lora-rank", "0"}));
  EXPECT_EQ(r.exit_code, 2);
  r = run_mme(with(kLlama, {"--lora-rank", "15"}));
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr("LoRA rank 15 is not divisible by --tp 2"));
  r = run_mme({"estimate", "deepseek-ai/DeepSeek-V3", "--lora-rank", "16", "--num-gpus", "8"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr("multi-latent attention is not modelled"));
  r = run_mme({"params", "deepseek-ai/DeepSeek-V3", "--lora-rank", "16"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr("multi-latent attention is not modelled"));
  r = run_mme({"params", "meta-llama/Meta-Llama-3-8B", "--lora-target-modules", "linear_qkv"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--lora-target-modules needs --lora-rank"));

  const test::TempDir dir;
  const auto path = dir.path() / "alpha.yaml";
  test::write_file(path, "peft:\n  alpha: 16\n");
  r = run_mme(with(kLlama, {"--pp", "1", "--config", path.string()}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("peft.alpha"));
  EXPECT_THAT(r.err, HasSubstr("needs peft.dim"));
  test::write_file(path, "training:\n  lora_rank: 16\n");
  r = run_mme(with(kLlama, {"--pp", "1", "--config", path.string()}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("did you mean 'dim' in the peft section?"));
}

}  // namespace
}  // namespace mme
