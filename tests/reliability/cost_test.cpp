// Issue 20 item 15, the cost of one command at the accepted limits: the layer count is bounded
// at ConfigReader::kMaxLayers (512) with a message naming the limit, a pipeline has no more
// chunks than the model has things to put in them, and the Megatron-flag parser is linear in
// the number of flags. Speed is never asserted here (docs/reliability.md has the timings, from
// bench/engine_bench.cpp); the tests check results at sizes where the old quadratic parser could
// not finish (500 000 flags: about 25 s per 100 000 squared, over ten minutes).
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/engine/pipeline.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/sdk/config_reader.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/model_spec.hpp>
#include <mme/sdk/training_setup.hpp>

namespace mme {
namespace {

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' lacks '" << (needle) << "'"

ModelSpec dense_model(std::int64_t layers) {
  ModelSpec m;
  m.name = "deep";
  m.num_layers = layers;
  m.hidden_size = 1024;
  m.vocab_size = 32000;
  m.max_position_embeddings = 4096;
  LayerSpec l;
  l.attention.num_heads = 16;
  l.attention.num_query_groups = 8;
  l.attention.kv_channels = 64;
  l.mlp.ffn_hidden_size = 4096;
  m.layers.assign(static_cast<std::size_t>(layers), l);
  return m;
}

TEST(CostLimits, TheLayerLimitIs512AndItsMessageNamesIt) {
  EXPECT_EQ(ConfigReader::kMaxLayers, 512);
  EXPECT_NO_THROW(validate_model_spec(dense_model(512)));
  try {
    validate_model_spec(dense_model(513));
    FAIL() << "513 layers accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "deep: num_layers: 513 layers is more than mme accepts (at most 512; the deepest real models have "
              "about 130, and the planner's cost grows with the square of the layer count)");
  }
  ModelSpec mtp = dense_model(4);
  mtp.mtp_num_layers = 513;
  try {
    validate_model_spec(mtp);
    FAIL() << "513 MTP layers accepted";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), "mtp_num_layers must be between 0 and 512, got 513");
  }
}

TEST(CostLimits, ConfigReaderLayersNameTheLimitForHugeValuesToo) {
  for (const auto& [text, shown] :
       std::vector<std::pair<std::string, std::string>>{{"513", "513"},
                                                        {"1048576", "1048576"},
                                                        {"1e30", "1e+30"},
                                                        {"18446744073709551615", "18446744073709551615"}}) {
    const auto config = nlohmann::json::parse(R"({"n": )" + text + "}");
    ConfigReader r(config, "c.json");
    try {
      (void)r.require_layers("n");
      ADD_FAILURE() << text << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_CONTAINS(e.what(), "c.json: n: " + shown + " layers is more than mme accepts (at most 512;");
    }
  }
  const auto ok = nlohmann::json::parse(R"({"n": 512, "f": 64.0, "zero": 0, "s": "8"})");
  ConfigReader r(ok, "c.json");
  EXPECT_EQ(r.require_layers("n"), 512);
  EXPECT_EQ(r.require_layers("f"), 64);
  EXPECT_THROW(r.require_layers("zero"), ConfigError);
  EXPECT_THROW(r.require_layers("s"), ConfigError);
  EXPECT_THROW(r.require_layers("missing"), ConfigError);
}

// 4 layers have 6 things to place (4 decoder layers, the embedding, the loss): 8 chunks would
// leave at least two empty. VPP was once bounded only by PP x VPP <= 2^20 (first/last-stage counts
// then allowed empty stages, which Megatron-LM refuses and so does mme now): a million chunks,
// 2.4 GB and 290 MB of JSON. The chunk count is checked first.
TEST(CostLimits, NoMoreChunksThanThingsToPutInThem) {
  ParallelLayout par;
  par.pp = 4;
  par.vpp = 2;
  PipelineSplit split;
  split.first_stage_layers = 0;
  split.last_stage_layers = 4;
  try {
    (void)partition_pipeline(4, 0, par, split);
    FAIL() << "8 chunks for 4 layers accepted";
  } catch (const LayoutError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--pp 4 x --vpp 2 = 8 pipeline chunks is more than the model's 4 layers plus the embedding and the "
              "loss: at least one pipeline chunk would hold nothing");
  }
  // 3 x 2 = 6 chunks for 4 layers is the most, and fine: with the embedding and the loss counted
  // in the split, the first chunk holds only the embedding, the last only the loss.
  par.pp = 3;
  PipelineSplit counted;
  counted.account_for_embedding = counted.account_for_loss = true;
  const PipelinePartition ok = partition_pipeline(4, 0, par, counted);
  ASSERT_EQ(ok.chunks.size(), 6u);
  std::int64_t layers = 0;
  for (const auto& c : ok.chunks) layers += c.num_layers;
  EXPECT_EQ(layers, 4);
  // A layout with empty stages beyond the count.
  PipelineSplit layout;
  layout.layout = "Et|t||||mL";
  par.pp = 1;
  par.vpp = 1;
  try {
    (void)partition_pipeline(2, 1, par, layout);
    FAIL() << "a 6-stage layout accepted for 2 layers + 1 MTP layer";
  } catch (const LayoutError& e) {
    EXPECT_CONTAINS(e.what(),
                    "--pipeline-layout has 6 stages, which is more than the model's 2 layers and 1 MTP "
                    "layers plus the embedding and the loss");
  }
  layout.layout = "Et|t|||mL";  // 5 stages = 2 layers + 1 MTP layer + 2
  EXPECT_EQ(partition_pipeline(2, 1, par, layout).chunks.size(), 5u);
}

// 500 000 flags, each given twice (the second value wins, in the first one's place), 1 000 with
// '_' spellings of earlier '-' flags, a few environment variables repeated, and a flag whose last
// value is a shell variable the script does not set (kept, its value marked unknown): one
// argument list of a million lines joined by backslash-newline, through the launch-script reader.
TEST(CostLimits, MegatronFlagParserOnHalfAMillionFlags) {
  constexpr int kFlags = 500000;
  std::string text;
  text.reserve(static_cast<std::size_t>(kFlags) * 40);
  for (int i = 0; i < 100; ++i) text += fmt::format("export VAR_{}=a\nexport VAR_{}=b{}\n", i, i, i);
  text += "torchrun pretrain_gpt.py \\\n";
  for (int i = 0; i < kFlags; ++i) text += fmt::format("--flag-{} {} \\\n", i, i);
  for (int i = 0; i < kFlags; ++i) text += fmt::format("--flag-{}={} \\\n", i, 2 * i);
  for (int i = 0; i < 1000; ++i) text += fmt::format("--flag_{} u{} \\\n", i, i);
  text += "--flag-7 $UNSET\n";
  const MegatronArgs a = parse_megatron_args(text, "args.sh");
  ASSERT_EQ(a.flags().size(), static_cast<std::size_t>(kFlags));
  EXPECT_EQ(a.flags()[0].name, "flag-0");
  EXPECT_EQ(a.flags()[0].values, std::vector<std::string>{"u0"});
  // The order of first appearance; --flag-7's value is not known (check_launch_script refuses it
  // where mme reads it).
  EXPECT_EQ(a.flags()[7].name, "flag-7");
  EXPECT_EQ(a.flags()[7].values, std::vector<std::string>{"$UNSET"});
  EXPECT_THAT(a.flags()[7].unknown, ::testing::HasSubstr("UNSET is not set in the script"));
  EXPECT_EQ(a.flags()[998].values, std::vector<std::string>{"u998"});
  EXPECT_EQ(a.flags()[1000].values, std::vector<std::string>{"2000"});  // flag-1000
  EXPECT_EQ(a.flags().back().name, fmt::format("flag-{}", kFlags - 1));
  EXPECT_EQ(a.flags().back().values, std::vector<std::string>{std::to_string(2 * (kFlags - 1))});
  EXPECT_EQ(a.value("flag_123456"), "246912");
  ASSERT_EQ(a.env().size(), 100u);
  EXPECT_NE(std::find(a.env().begin(), a.env().end(), std::pair<std::string, std::string>{"VAR_42", "b42"}),
            a.env().end());

  // The config document and back (the megatron_args adapter's path), linear as well.
  const MegatronArgs back = MegatronArgs::from_config(a.to_config());
  ASSERT_EQ(back.flags().size(), a.flags().size());
  EXPECT_EQ(back.value("flag-499998"), "999996");
  EXPECT_EQ(back.value("flag-0"), "u0");
}

TEST(CostLimits, FromConfigMergesSpellingsOfOneFlag) {
  // "num_layers" and "num-layers" name one flag; the key sorted last (nlohmann sorts) wins.
  const auto config = nlohmann::json::parse(
      R"({"mme_source": "megatron-args", "args": {"num-layers": "4", "num_layers": "8", "bf16": true, "fp16": false}})");
  const MegatronArgs a = MegatronArgs::from_config(config);
  ASSERT_EQ(a.flags().size(), 3u);
  EXPECT_EQ(a.value("num-layers"), "8");
  EXPECT_EQ(a.value("bf16"), "");
  EXPECT_EQ(a.value("fp16"), "false");
}

}  // namespace
}  // namespace mme
