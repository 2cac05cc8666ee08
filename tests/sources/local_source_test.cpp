// Model sources, step 1 and 2: a local config.json (file or folder) and the bundled zoo; what
// the reader accepts and the clear errors for what it does not.
#include <gtest/gtest.h>

#include <mme/inputs/model_source.hpp>
#include <mme/sdk/error.hpp>

#include "source_test_env.hpp"
#include "test_support.hpp"
#include <sys/stat.h>

namespace fs = std::filesystem;

namespace mme {
namespace {

using test::TempDir;
using test::write_file;

const char* const kTiny = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2})";

// Resolution with an empty zoo and an empty cache, downloads off: only local paths resolve.
class sources_local : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(zoo());
    test::SourceEnv::set("HF_HUB_CACHE", (tmp_.path() / "cache").string());
    test::SourceEnv::set("HF_HUB_OFFLINE", "1");
    options_.zoo_dirs = {zoo()};
    options_.allow_network = false;
  }
  fs::path zoo() const { return tmp_.path() / "zoo"; }
  ResolvedModel resolve(const std::string& arg) { return resolve_model(arg, options_); }
  template <class E>
  std::string error_of(const std::string& arg) {
    try {
      resolve(arg);
    } catch (const E& e) {
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type for " << arg << ": " << e.what();
      return {};
    }
    ADD_FAILURE() << arg << " resolved; an error was expected";
    return {};
  }

  test::SourceEnv env_;
  TempDir tmp_;
  SourceOptions options_;
};

TEST_F(sources_local, FileResolvesAsLocal) {
  const fs::path file = tmp_.path() / "my-config.json";
  write_file(file, kTiny);
  const ResolvedModel m = resolve(file.string());
  EXPECT_EQ(m.origin, "local");
  EXPECT_EQ(m.path, file);
  EXPECT_EQ(m.name, file.string());
  EXPECT_EQ(m.config.at("hidden_size"), 64);
}

TEST_F(sources_local, FolderHoldingConfigJson) {
  const fs::path dir = tmp_.path() / "checkpoint";
  write_file(dir / "config.json", kTiny);
  const ResolvedModel m = resolve(dir.string());
  EXPECT_EQ(m.origin, "local");
  EXPECT_EQ(m.path, dir / "config.json");
  EXPECT_EQ(m.config.at("num_hidden_layers"), 2);
  // A trailing slash names the same folder.
  EXPECT_EQ(resolve(dir.string() + "/").config, m.config);
}

TEST_F(sources_local, FolderWithoutConfigJson) {
  const fs::path dir = tmp_.path() / "empty-checkpoint";
  fs::create_directories(dir);
  write_file(dir / "model.safetensors", "x");
  const std::string what = error_of<NotFoundError>(dir.string());
  EXPECT_NE(what.find("no config.json"), std::string::npos) << what;
  EXPECT_NE(what.find(dir.string()), std::string::npos) << what;
}

TEST_F(sources_local, FolderWhoseConfigJsonIsAFolder) {
  const fs::path dir = tmp_.path() / "odd";
  fs::create_directories(dir / "config.json");
  EXPECT_THROW(resolve(dir.string()), NotFoundError);
}

TEST_F(sources_local, MissingFile) {
  const fs::path file = tmp_.path() / "nowhere" / "config.json";
  const std::string what = error_of<NotFoundError>(file.string());
  EXPECT_NE(what.find("no such file"), std::string::npos) << what;
  EXPECT_NE(what.find(file.string()), std::string::npos) << what;
  EXPECT_THROW(read_config_file(file), NotFoundError);
}

TEST_F(sources_local, EmptyFile) {
  const fs::path file = tmp_.path() / "empty.json";
  write_file(file, "");
  const std::string what = error_of<ConfigError>(file.string());
  EXPECT_NE(what.find("empty"), std::string::npos) << what;
  // Whitespace only is just as empty.
  write_file(file, " \n\t\n");
  EXPECT_THROW(resolve(file.string()), ConfigError);
}

TEST_F(sources_local, NulBytes) {
  const fs::path file = tmp_.path() / "nul.json";
  write_file(file, std::string("{\"a\": 1}\0\0\0", 11));
  const std::string what = error_of<ConfigError>(file.string());
  EXPECT_NE(what.find("NUL"), std::string::npos) << what;
  EXPECT_THROW(parse_config_text(std::string_view("{\"a\":\0 1}", 9), "text"), ConfigError);
}

TEST_F(sources_local, TruncatedJson) {
  const fs::path file = tmp_.path() / "truncated.json";
  write_file(file, R"({"model_type": "llama", "hidden_size": 4096, "num_hidden)");
  const std::string what = error_of<ConfigError>(file.string());
  EXPECT_NE(what.find("invalid JSON"), std::string::npos) << what;
  EXPECT_NE(what.find(file.string()), std::string::npos) << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << "errors are one line: " << what;
}

TEST_F(sources_local, TrailingGarbageAndCommentsAreInvalid) {
  EXPECT_THROW(parse_config_text(R"({"a": 1} {"b": 2})", "two documents"), ConfigError);
  EXPECT_THROW(parse_config_text("{\"a\": 1 // note\n}", "comment"), ConfigError);
  EXPECT_THROW(parse_config_text("{\"a\": \"\xff\xfe\"}", "bad utf-8"), ConfigError);
  EXPECT_EQ(parse_config_text("\xEF\xBB\xBF{\"a\": 1}", "bom").at("a"), 1);
}

TEST_F(sources_local, JsonArrayIsReturnedNotRejected) {
  // Only the config adapters decide what they accept; the resolver hands over any JSON.
  const fs::path file = tmp_.path() / "array.json";
  write_file(file, R"([{"model_type": "llama"}, 2])");
  const ResolvedModel m = resolve(file.string());
  ASSERT_TRUE(m.config.is_array());
  EXPECT_EQ(m.config.size(), 2u);
  write_file(file, "42");
  EXPECT_EQ(resolve(file.string()).config, 42);
}

TEST_F(sources_local, DeeplyNestedJsonIsRefusedWithoutRecursing) {
  // 100000 levels would exhaust the stack of any recursive walk (dump, destruction); the
  // depth is checked before parsing.
  const fs::path file = tmp_.path() / "deep.json";
  const int depth = 100000;
  write_file(file, std::string(depth, '[') + std::string(depth, ']'));
  const std::string what = error_of<ConfigError>(file.string());
  EXPECT_NE(what.find("nested more than 64 levels"), std::string::npos) << what;
  // Brackets inside strings are not nesting.
  write_file(file, R"({"model_type": "llama", "note": ")" + std::string(1000, '[') + R"("})");
  EXPECT_EQ(resolve(file.string()).config.at("model_type"), "llama");
}

TEST_F(sources_local, HugeFileIsRefusedBeforeReading) {
  const fs::path file = tmp_.path() / "huge.json";
  write_file(file, "{}");
  fs::resize_file(file, std::uintmax_t{17} << 20);
  const std::string what = error_of<ConfigError>(file.string());
  EXPECT_NE(what.find("larger"), std::string::npos) << what;
}

TEST_F(sources_local, FifoIsNotReadAndDoesNotBlock) {
  const fs::path fifo = tmp_.path() / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string what = error_of<NotFoundError>(fifo.string());
  EXPECT_NE(what.find("not a regular file"), std::string::npos) << what;
}

TEST_F(sources_local, TextConfigOfAMultimodalConfig) {
  const fs::path file = tmp_.path() / "vlm.json";
  write_file(file, R"({"model_type": "llava", "vision_config": {"hidden_size": 1024},
                       "text_config": {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32}})");
  const ResolvedModel m = resolve(file.string());
  EXPECT_EQ(m.config.at("model_type"), "llama");
  EXPECT_EQ(m.config.at("hidden_size"), 4096);
  // The vision tower's config goes along, so that adapt_config can say it is left out.
  EXPECT_EQ(m.config.at("vision_config"), nlohmann::json({{"hidden_size", 1024}}));
  EXPECT_EQ(m.path, file);
}

TEST_F(sources_local, TextConfigWithoutModelTypeInheritsTheOuterOne) {
  const fs::path file = tmp_.path() / "vlm.json";
  write_file(file, R"({"model_type": "mistral3", "text_config": {"hidden_size": 5120, "num_hidden_layers": 40}})");
  const ResolvedModel m = resolve(file.string());
  EXPECT_EQ(m.config.at("hidden_size"), 5120);
  EXPECT_EQ(m.config.at("model_type"), "mistral3");
}

TEST_F(sources_local, TopLevelTextSettingsWinOverTextConfig) {
  // Configs such as Qwen2-VL keep the language model at the top level and also carry a text_config.
  const fs::path file = tmp_.path() / "qwen2vl.json";
  write_file(file, R"({"model_type": "qwen2_vl", "hidden_size": 3584, "num_hidden_layers": 28,
                       "text_config": {"hidden_size": 1}})");
  const ResolvedModel m = resolve(file.string());
  EXPECT_EQ(m.config.at("hidden_size"), 3584);
  EXPECT_TRUE(m.config.contains("text_config"));
}

TEST_F(sources_local, NotAPathNorAHubId) {
  write_file(zoo() / "acme--Widget" / "config.json", kTiny);
  // Shaped like a path: only that.
  for (const char* arg : {"no-such-thing.json", "./x", "/no/such/dir", "a/b/c"}) {
    const std::string what = error_of<NotFoundError>(arg);
    EXPECT_NE(what.find("no such file or folder"), std::string::npos) << what;
    EXPECT_EQ(what.find("acme/Widget"), std::string::npos) << what;
  }
  // Neither: say what a hub id looks like, and what is bundled.
  const std::string what = error_of<NotFoundError>("just-a-name");
  EXPECT_NE(what.find("org/name"), std::string::npos) << what;
  EXPECT_NE(what.find("acme/Widget"), std::string::npos) << what;
  EXPECT_THROW(resolve(""), UsageError);
}

TEST(sources_hub_id, Shapes) {
  for (const char* ok :
       {"deepseek-ai/DeepSeek-V3", "Qwen/Qwen2.5-7B", "a/b", "org_1/name.v2", "meta-llama/Llama-3.1-8B"})
    EXPECT_TRUE(looks_like_hub_id(ok)) << ok;
  for (const char* bad : {"",          "name",         "/abs/path",  "org/",        "/name",     "a/b/c",
                          "../x",      "./x",          "org/..",     "org/.hidden", "-org/name", "org/name-",
                          "org/name.", "org--x/name",  "org/na--me", "org/na..me",  "org/na me", "org/na%2Fme",
                          "org\\name", "org/name?x=1", "org/name#x", "org/nä"})
    EXPECT_FALSE(looks_like_hub_id(bad)) << bad;
  EXPECT_FALSE(looks_like_hub_id("org/" + std::string(97, 'a')));
  EXPECT_TRUE(looks_like_hub_id("org/" + std::string(96, 'a')));
}

// ---- the bundled zoo

class sources_zoo : public sources_local {
 protected:
  void add(const fs::path& dir, const std::string& folder, const std::string& text = kTiny) {
    write_file(dir / folder / "config.json", text);
  }
};

TEST_F(sources_zoo, LookupIgnoresCase) {
  add(zoo(), "Acme--Widget-7B");
  for (const char* arg : {"Acme/Widget-7B", "acme/widget-7b", "ACME/WIDGET-7B"}) {
    const ResolvedModel m = resolve(arg);
    EXPECT_EQ(m.origin, "bundled") << arg;
    EXPECT_EQ(m.name, "Acme/Widget-7B") << arg;  // the canonical spelling
    EXPECT_EQ(m.path, zoo() / "Acme--Widget-7B" / "config.json") << arg;
    EXPECT_EQ(m.config.at("hidden_size"), 64) << arg;
  }
}

TEST_F(sources_zoo, ListingIsSortedAndSkipsNonModels) {
  add(zoo(), "zeta--Last");
  add(zoo(), "Alpha--First");
  add(zoo(), "beta--Middle");
  fs::create_directories(zoo() / "gamma--NoConfig");
  add(zoo(), "not-a-model-folder");
  write_file(zoo() / "README.md", "x");
  const auto models = list_bundled_models({zoo()});
  std::vector<std::string> names;
  for (const auto& m : models) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Alpha/First", "beta/Middle", "zeta/Last"}));
  EXPECT_TRUE(list_bundled_models({tmp_.path() / "absent"}).empty());
}

TEST_F(sources_zoo, EarlierZooFolderWinsAndNamesAreNotRepeated) {
  const fs::path second = tmp_.path() / "zoo2";
  add(zoo(), "acme--Widget", R"({"from": "first"})");
  add(second, "Acme--widget", R"({"from": "second"})");
  add(second, "acme--Other");
  options_.zoo_dirs = {zoo(), second};
  const auto models = list_bundled_models(options_.zoo_dirs);
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].name, "acme/Widget");
  EXPECT_EQ(models[1].name, "acme/Other");
  EXPECT_EQ(resolve("ACME/WIDGET").config.at("from"), "first");
}

TEST_F(sources_zoo, SameNameTwiceInOneFolderIsListedOnce) {
  add(zoo(), "acme--Widget");
  add(zoo(), "ACME--WIDGET");
  EXPECT_EQ(list_bundled_models({zoo()}).size(), 1u);
}

TEST_F(sources_zoo, ModelsPathEnvironmentComesFirst) {
  test::SourceEnv::set("MME_MODELS_PATH", "/first/zoo::/second/zoo");
  const auto dirs = default_zoo_dirs();
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], fs::path("/first/zoo"));
  EXPECT_EQ(dirs[1], fs::path("/second/zoo"));
  for (const auto& d : dirs) EXPECT_EQ(d.string().find(".."), std::string::npos) << d;
}

TEST_F(sources_zoo, BundledBeatsTheCache) {
  add(zoo(), "acme--Widget", R"({"from": "zoo"})");
  const fs::path repo = tmp_.path() / "cache" / "models--acme--Widget";
  write_file(repo / "refs" / "main", "abc");
  write_file(repo / "snapshots" / "abc" / "config.json", R"({"from": "cache"})");
  EXPECT_EQ(resolve("acme/Widget").config.at("from"), "zoo");
}

TEST_F(sources_zoo, BrokenBundledConfigIsAConfigError) {
  add(zoo(), "acme--Broken", "{");
  EXPECT_THROW(resolve("acme/Broken"), ConfigError);
}

TEST_F(sources_zoo, OfflineMissNamesTheBundledModels) {
  add(zoo(), "acme--Widget-7B");
  add(zoo(), "acme--Gadget-1B");
  const std::string what = error_of<NotFoundError>("nobody/nothing");
  EXPECT_NE(what.find("nobody/nothing"), std::string::npos) << what;
  EXPECT_NE(what.find("acme/Widget-7B"), std::string::npos) << what;
  EXPECT_NE(what.find("acme/Gadget-1B"), std::string::npos) << what;
}

}  // namespace
}  // namespace mme
