// The plugin trust model (docs/reliability.md): plugins are code, so they load only from the
// documented places (--plugin-dir, MME_PLUGIN_PATH, <exe>/../lib/mme/plugins), never from the
// current folder unless it is named. A real plugin (the tests' fixture_good) is put in the
// current folder, and must not be loaded however the search path is left empty.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mme/engine/plugin_loader.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

namespace fs = std::filesystem;

// Runs `mme` with the current folder set to `cwd` (the child inherits it).
test::RunResult run_in(const fs::path& cwd, const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env = {}) {
  const fs::path old = fs::current_path();
  fs::current_path(cwd);
  test::RunResult r;
  try {
    r = test::run_mme(args, env);
  } catch (...) {
    fs::current_path(old);
    throw;
  }
  fs::current_path(old);
  return r;
}

bool lists_fixture(const std::string& json_text) {
  const auto j = nlohmann::json::parse(json_text);
  for (const auto& p : j["plugins"])
    if (p["name"] == "fixture_good") return true;
  return false;
}

class PluginTrust : public ::testing::Test {
 protected:
  void SetUp() override {
    // The fixture under the name of a real plugin file and under its own: a current folder
    // that shadows a plugin must not win either.
    fs::copy_file(MME_TEST_FIXTURE_GOOD, dir_.path() / "fixture_good.so");
    fs::copy_file(MME_TEST_FIXTURE_GOOD, dir_.path() / "mme_layer_gqa.so");
    fs::create_directories(dir_.path() / "lib" / "mme" / "plugins");
    fs::copy_file(MME_TEST_FIXTURE_GOOD, dir_.path() / "lib" / "mme" / "plugins" / "fixture_good.so");
  }
  test::TempDir dir_;
};

TEST_F(PluginTrust, TheCurrentFolderIsNeverSearchedImplicitly) {
  // Every way to leave the search path empty or blank.
  const std::vector<std::pair<std::vector<std::string>, std::map<std::string, std::string>>> cases = {
      {{"plugins", "--json"}, {{"MME_PLUGIN_PATH", ""}}},
      {{"plugins", "--json"}, {{"MME_PLUGIN_PATH", ":"}}},
      {{"plugins", "--json"}, {{"MME_PLUGIN_PATH", "::::"}}},
      {{"plugins", "--json", "--plugin-dir", ""}, {}},
  };  // ("--plugin-dir=" is a usage error of the option parser: it names no folder either.)
  for (const auto& [args, env] : cases) {
    const auto r = run_in(dir_.path(), args, env);
    SCOPED_TRACE(::testing::PrintToString(args) + " " + ::testing::PrintToString(env));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(lists_fixture(r.out)) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    for (const auto& folder : j["search_path"]) {
      const std::string f = folder.get<std::string>();
      EXPECT_FALSE(f.empty() || f == "." || f == "./") << "the search path names the current folder: " << r.out;
    }
    // The real plugins are loaded from the install tree, not the shadowing copy here.
    bool gqa = false;
    for (const auto& p : j["plugins"])
      if (p["name"] == "layer_gqa") gqa = p["path"].get<std::string>().find(dir_.path().string()) == std::string::npos;
    EXPECT_TRUE(gqa) << r.out;
  }
}

TEST_F(PluginTrust, NamedFoldersAreSearched) {
  // The positive control: the same fixture loads when its folder is named, relative or not.
  for (const auto& [args, env] : std::vector<std::pair<std::vector<std::string>, std::map<std::string, std::string>>>{
           {{"plugins", "--json", "--plugin-dir", "."}, {}},
           {{"plugins", "--json"}, {{"MME_PLUGIN_PATH", "."}}},
           {{"plugins", "--json", "--plugin-dir", "lib/mme/plugins"}, {}},
       }) {
    const auto r = run_in(dir_.path(), args, env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(lists_fixture(r.out)) << ::testing::PrintToString(args) << r.out;
  }
}

TEST(PluginSearchPath, OnlyTheDocumentedPlaces) {
  const char* saved = std::getenv("MME_PLUGIN_PATH");
  const std::string keep = saved ? saved : "";
  ::setenv("MME_PLUGIN_PATH", "::a::b:", 1);
  const auto dirs = plugin_search_path({"cli"});
  if (saved)
    ::setenv("MME_PLUGIN_PATH", keep.c_str(), 1);
  else
    ::unsetenv("MME_PLUGIN_PATH");
  ASSERT_EQ(dirs.size(), 4u);
  EXPECT_EQ(dirs[0], "cli");
  EXPECT_EQ(dirs[1], "a");
  EXPECT_EQ(dirs[2], "b");
  // The default: next to the executable (here the test program), always absolute.
  EXPECT_TRUE(dirs[3].is_absolute()) << dirs[3];
  EXPECT_EQ(dirs[3].filename(), "plugins");
  for (const auto& d : dirs) EXPECT_FALSE(d.empty());
}

}  // namespace
}  // namespace mme
