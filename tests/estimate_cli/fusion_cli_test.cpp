// Megatron-LM's "fusion off" switches through `mme estimate --megatron-args`: read as settings
// (not named "not modelled" any more) and, where the unfused torch code keeps more, in the peak.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

using test::run_mme;

// 4 SwiGLU layers of h 256, ffn 1024, seq 1024, micro-batch 1, no TP/PP/CP: T = 1024 tokens.
const std::string kSwigluLaunch =
    "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 --ffn-hidden-size 1024 "
    "--num-attention-heads 8 --swiglu "
    "--disable-bias-linear --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 "
    "--vocab-size 1000 --tokenizer-type NullTokenizer --bf16 --position-embedding-type rope ";

nlohmann::json estimate(const std::string& launch) {
  const auto r = run_mme({"estimate", "--megatron-args", launch, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no "unknown flag" warning
  return nlohmann::json::parse(r.out);
}

std::int64_t component(const nlohmann::json& stage, const std::string& name) {
  const auto& c = stage["components"];
  return c.contains(name) ? c[name].get<std::int64_t>() : 0;
}

bool names_not_modelled(const nlohmann::json& j, const std::string& flag) {
  for (const auto& a : j["assumptions"])
    if (a.get<std::string>().find(flag + " is not modelled") != std::string::npos) return true;
  return false;
}

TEST(FusionCli, NoBiasSwigluFusionRaisesThePeakByTheGateActivations) {
  const auto fused = estimate(kSwigluLaunch);
  const auto unfused = estimate(kSwigluLaunch + "--no-bias-swiglu-fusion");
  EXPECT_FALSE(names_not_modelled(unfused, "--no-bias-swiglu-fusion")) << unfused["assumptions"].dump();
  EXPECT_EQ(unfused["setup"]["bias_swiglu_fusion"], false);
  EXPECT_EQ(fused["setup"]["bias_swiglu_fusion"], true);
  // glu() keeps silu(x_glu) [1024 tokens, 1024] bf16 = 2,097,152 B per layer, 4 layers, one
  // micro-batch in flight (PP 1): 8,388,608 B more kept.
  const auto& f = fused["stages"][0];
  const auto& u = unfused["stages"][0];
  EXPECT_EQ(component(f, "activations/mlp/activation_glu_act"), 0);
  EXPECT_EQ(component(u, "activations/mlp/activation_glu_act"), 8'388'608);
  // The busiest moment of a layer is an MLP backward: fused, the gradients of fc1's output
  // [1024, 2048] and of the activation output [1024, 1024] and the block input's [1024, 256],
  // 2 B x 1024 x 3328 = 6,815,744 B; unfused glu()'s backward holds one more [1024, 1024] (the
  // halves' gradients beside their concatenation): 8,912,896 B. When a layer runs its backward the
  // output head has freed what it kept for that micro-batch: the fp32 softmax [1024, 1024 padded
  // vocabulary] 4,194,304 B and the final norm's and output layer's inputs 2 x [1024, 256] bf16
  // 1,048,576 B, 5,242,880 B in all. Fused that leaves 1,572,864 B, below the head's own working
  // set (the bf16 gradient of the logits [1024, 1024], 2,097,152 B); unfused 3,670,016 B.
  EXPECT_EQ(component(f, "activations/transient_peak"), 2'097'152);
  EXPECT_EQ(component(u, "activations/transient_peak"), 3'670'016);
  // The peak: 8,388,608 + (3,670,016 - 2,097,152).
  EXPECT_EQ(unfused["peak"]["total_bytes"].get<std::int64_t>() - fused["peak"]["total_bytes"].get<std::int64_t>(),
            9'961'472);
}

TEST(FusionCli, TheOtherSwitchesAreSettingsToo) {
  const auto j = estimate(kSwigluLaunch + "--no-rope-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion");
  for (const char* flag : {"--no-rope-fusion", "--no-bias-gelu-fusion", "--no-bias-dropout-fusion"})
    EXPECT_FALSE(names_not_modelled(j, flag)) << flag;
  EXPECT_EQ(j["setup"]["apply_rope_fusion"], false);
  EXPECT_EQ(j["setup"]["bias_gelu_fusion"], false);
  EXPECT_EQ(j["setup"]["bias_dropout_fusion"], false);
  // Unfused RoPE: cos and sin [1024, 1, 1, 32] bf16 for Q and for K: 4 x 2 B x 1024 x 32 =
  // 262,144 B per layer, 4 layers.
  EXPECT_EQ(component(j["stages"][0], "activations/attention/rope_cos_sin"), 1'048'576);
  bool stated = false;
  for (const auto& a : j["assumptions"])
    stated = stated || a.get<std::string>().rfind("no bias-dropout-add fusion", 0) == 0;
  EXPECT_TRUE(stated) << j["assumptions"].dump();
}

}  // namespace
}  // namespace mme
