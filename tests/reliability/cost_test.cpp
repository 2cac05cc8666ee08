// Issue 20 item 15, the cost of one command at the accepted limits: the layer count is bounded
// at ConfigReader::kMaxLayers (512) with a message naming the limit, and a pipeline has no more
// chunks than the model has things to put in them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/core.h>

#include <mme/config_reader.hpp>
#include <mme/error.hpp>
#include <mme/model_spec.hpp>
#include <mme/pipeline.hpp>
#include <mme/training_setup.hpp>

namespace mme {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "'" << (haystack) << "' lacks '" << (needle) << "'"

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
  for (const auto& [text, shown] : std::vector<std::pair<std::string, std::string>>{
           {"513", "513"}, {"1048576", "1048576"}, {"1e30", "1e+30"}, {"18446744073709551615", "18446744073709551615"}}) {
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
// leave at least two empty. With first/last-stage counts the middle stages may hold 0 layers,
// so VPP was bounded only by PP x VPP <= 2^20: a million chunks, 2.4 GB and 290 MB of JSON.
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
  // 3 x 2 = 6 chunks for 4 layers is the most, and fine (first rank empty, 2 layers on each other).
  par.pp = 3;
  split.first_stage_layers = 0;
  split.last_stage_layers = 2;
  const PipelinePartition ok = partition_pipeline(4, 0, par, split);
  EXPECT_EQ(ok.chunks.size(), 6u);
  // A layout with empty stages beyond the count.
  PipelineSplit layout;
  layout.layout = "Et|t||||mL";
  par.pp = 1;
  par.vpp = 1;
  try {
    (void)partition_pipeline(2, 1, par, layout);
    FAIL() << "a 6-stage layout accepted for 2 layers + 1 MTP layer";
  } catch (const LayoutError& e) {
    EXPECT_CONTAINS(e.what(), "--pipeline-layout has 6 stages, which is more than the model's 2 layers and 1 MTP "
                              "layers plus the embedding and the loss");
  }
  layout.layout = "Et|t|||mL";  // 5 stages = 2 layers + 1 MTP layer + 2
  EXPECT_EQ(partition_pipeline(2, 1, par, layout).chunks.size(), 5u);
}

}  // namespace
}  // namespace mme
