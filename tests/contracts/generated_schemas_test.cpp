// The generated schemas (mme/inputs/json_schema.hpp) against the tables they come from: every
// spec field and every setup knob's JSON key has its property, the required ones are required,
// and what the build staged is what the functions give (contracts.py checks real documents).
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mme/inputs/json_schema.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/training_setup.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

using OJ = nlohmann::ordered_json;

TEST(GeneratedSchemas, EverySpecFieldHasItsProperty) {
  const OJ s = spec_file_json_schema();
  std::set<std::string> sections;
  for (const auto& f : spec_fields()) {
    SCOPED_TRACE(f.section + "." + f.name);
    sections.insert(f.section);
    const OJ& def = s.at("$defs").at(f.section);
    ASSERT_TRUE(def.at("properties").contains(f.name));
    EXPECT_EQ(def.at("additionalProperties"), false);
    // "required" in the table's default column: required in the schema (the model's unless hf).
    const OJ& clause = f.section == "model" ? def.at("else") : def;  // setup sections: their own required
    const bool required = clause.contains("required") && std::find(clause["required"].begin(), clause["required"].end(),
                                                                   f.name) != clause["required"].end();
    EXPECT_EQ(required, f.default_text == "required");
  }
  EXPECT_EQ(sections.size(), spec_sections().size());
  std::size_t fields = 0;
  for (const auto& [name, def] : s.at("$defs").items()) fields += def.at("properties").size();
  EXPECT_EQ(fields, spec_fields().size());  // nothing beyond the table
  EXPECT_EQ(s.at("$id"), schema_id("spec-file.schema.json"));
  EXPECT_EQ(s.at("schema_version"), kSchemaVersion);
}

// The pattern branch of a generated choice: any accepted spelling, in any letter case.
std::regex choice_pattern(const OJ& property) {
  for (const auto& branch : property.at("anyOf"))
    for (const auto& inner : branch.value("anyOf", OJ::array()))
      if (inner.contains("pattern")) return std::regex(inner["pattern"].get<std::string>(), std::regex::ECMAScript);
  throw std::runtime_error("no pattern in " + property.dump());
}

TEST(GeneratedSchemas, ChoicesTakeTheReadersSpellingsInAnyCase) {
  const OJ s = spec_file_json_schema();
  const OJ& dispatcher = s.at("$defs").at("training").at("properties").at("moe_token_dispatcher_type");
  const std::regex d = choice_pattern(dispatcher);
  // alltoall_seq is an alias the reader takes (enum_names.cpp: Megatron-LM's older spelling).
  for (const char* ok : {"alltoall", "AllGather", "FLEX", "alltoall_seq"}) EXPECT_TRUE(std::regex_match(ok, d)) << ok;
  for (const char* bad : {"all2all", "alltoall ", ""}) EXPECT_FALSE(std::regex_match(bad, d)) << bad;
  // cp_comm_type refuses Megatron-LM's help-text spelling allgather (TE takes all_gather).
  const std::regex cp = choice_pattern(s.at("$defs").at("parallelism").at("properties").at("cp_comm_type"));
  for (const char* ok : {"p2p", "ALL_GATHER", "a2a+p2p"}) EXPECT_TRUE(std::regex_match(ok, cp)) << ok;
  EXPECT_FALSE(std::regex_match("allgather", cp));
  // The canonical values are listed, for editors to offer.
  EXPECT_EQ(dispatcher.at("anyOf")[0].at("anyOf")[0].at("enum"), OJ::parse(R"(["alltoall", "allgather", "flex"])"));
}

TEST(GeneratedSchemas, EverySetupKnobHasItsJsonKey) {
  const OJ s = setup_block_json_schema();
  std::set<std::string> keys;
  for (const auto& k : setup_knobs()) {
    if (!k.json_key) continue;
    SCOPED_TRACE(k.json_key);
    keys.insert(k.json_key);
    ASSERT_TRUE(s.at("properties").contains(k.json_key));
    const bool required = std::find(s["required"].begin(), s["required"].end(), k.json_key) != s["required"].end();
    EXPECT_EQ(required, k.json_when == nullptr);  // Megatron-FSDP's and FSDP2's keys only with them
  }
  for (const char* derived : {"dp", "expert_dp", "num_micro_batches"}) keys.insert(derived);
  EXPECT_EQ(s.at("properties").size(), keys.size());
  // The block of the defaults has every required key (setup_to_json_block writes them all).
  TrainingSetup setup;
  const auto block = setup_to_json_block(setup);
  for (const auto& r : s.at("required")) EXPECT_TRUE(block.contains(r.get<std::string>())) << r;
  // The two FSDP switches share one key, whose values are the kinds' names.
  EXPECT_EQ(s.at("properties").at("sharded_data_parallel").at("enum"),
            OJ::parse(R"(["none", "megatron_fsdp", "torch_fsdp2"])"));
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(GeneratedSchemas, TheStagedFilesAreTheGeneratedOnes) {
  const auto dir = test::stage_dir() / "share" / "mme" / "schema";
  EXPECT_EQ(OJ::parse(read(dir / "spec-file.schema.json")), spec_file_json_schema());
  EXPECT_EQ(OJ::parse(read(dir / "setup.schema.json")), setup_block_json_schema());
  // The estimate's setup block is the generated one, bundled.
  OJ setup = setup_block_json_schema();
  for (const char* k : {"$schema", "$id", "schema_version"}) setup.erase(k);
  EXPECT_EQ(OJ::parse(read(dir / "estimate.schema.json")).at("$defs").at("setup"), setup);
  EXPECT_EQ(OJ::parse(read(dir / "plan.schema.json")).at("$defs").at("setup"), setup);
}

}  // namespace
}  // namespace mme
