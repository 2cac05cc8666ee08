// Model sources, step 3: the Hugging Face cache, in the hub's own layout
// (models--org--name/refs/<revision> holds a commit; snapshots/<commit>/config.json).
#include <gtest/gtest.h>

#include <mme/inputs/model_source.hpp>
#include <mme/sdk/error.hpp>

#include "source_test_env.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace mme {
namespace {

using test::TempDir;
using test::write_file;

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

class sources_cache : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(tmp_.path() / "zoo");
    test::SourceEnv::set("HF_HUB_OFFLINE", "1");
    options_.zoo_dirs = {tmp_.path() / "zoo"};
    options_.allow_network = false;
  }
  // Writes a hub-layout entry for `id` under `cache`, refs/<revision> -> commit.
  static fs::path put(const fs::path& cache, const std::string& folder, const std::string& commit,
                      const std::string& text, const std::string& revision = "main") {
    const fs::path repo = cache / folder;
    write_file(repo / "refs" / revision, commit);
    const fs::path cfg = repo / "snapshots" / commit / "config.json";
    write_file(cfg, text);
    return cfg;
  }
  ResolvedModel resolve(const std::string& arg) { return resolve_model(arg, options_); }

  test::SourceEnv env_;
  TempDir tmp_;
  SourceOptions options_;
};

TEST_F(sources_cache, CacheDirFromEnvironment) {
  test::SourceEnv::set("HOME", "/home/someone");
  EXPECT_EQ(hf_cache_dir(), fs::path("/home/someone/.cache/huggingface/hub"));
  test::SourceEnv::set("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(hf_cache_dir(), fs::path("/xdg/huggingface/hub"));
  test::SourceEnv::set("HF_HOME", "/hf-home");
  EXPECT_EQ(hf_cache_dir(), fs::path("/hf-home/hub"));
  test::SourceEnv::set("HUGGINGFACE_HUB_CACHE", "/legacy-cache");
  EXPECT_EQ(hf_cache_dir(), fs::path("/legacy-cache"));
  test::SourceEnv::set("HF_HUB_CACHE", "/hub-cache");
  EXPECT_EQ(hf_cache_dir(), fs::path("/hub-cache"));
  test::SourceEnv::set("HF_HUB_CACHE", "");  // empty counts as unset
  EXPECT_EQ(hf_cache_dir(), fs::path("/legacy-cache"));
  test::SourceEnv::unset("HUGGINGFACE_HUB_CACHE");
  test::SourceEnv::set("HF_HOME", "~/hf");
  EXPECT_EQ(hf_cache_dir(), fs::path("/home/someone/hf/hub"));
}

TEST_F(sources_cache, ViaHfHubCache) {
  const fs::path cache = tmp_.path() / "hub-cache";
  test::SourceEnv::set("HF_HUB_CACHE", cache.string());
  test::SourceEnv::set("HF_HOME", (tmp_.path() / "elsewhere").string());
  const fs::path cfg = put(cache, "models--acme--Widget", kCommit, R"({"hidden_size": 8})");
  const ResolvedModel m = resolve("acme/Widget");
  EXPECT_EQ(m.origin, "hf-cache");
  EXPECT_EQ(m.name, "acme/Widget");
  EXPECT_EQ(m.path, cfg);
  EXPECT_EQ(m.config.at("hidden_size"), 8);
}

TEST_F(sources_cache, ViaHfHome) {
  const fs::path home = tmp_.path() / "hf-home";
  test::SourceEnv::set("HF_HOME", home.string());
  const fs::path cfg = put(home / "hub", "models--acme--Widget", kCommit, R"({"hidden_size": 9})");
  const ResolvedModel m = resolve("acme/Widget");
  EXPECT_EQ(m.origin, "hf-cache");
  EXPECT_EQ(m.path, cfg);
  EXPECT_EQ(m.config.at("hidden_size"), 9);
}

TEST_F(sources_cache, RefsMainPicksTheSnapshot) {
  const fs::path cache = tmp_.path() / "cache";
  test::SourceEnv::set("HF_HUB_CACHE", cache.string());
  const std::string old_commit = "ffffffffffffffffffffffffffffffffffffffff";
  write_file(cache / "models--acme--Widget" / "snapshots" / old_commit / "config.json", R"({"v": "old"})");
  write_file(cache / "models--acme--Widget" / "snapshots" / "main" / "config.json", R"({"v": "folder named main"})");
  put(cache, "models--acme--Widget", kCommit, R"({"v": "current"})");
  EXPECT_EQ(resolve("acme/Widget").config.at("v"), "current");
  // The hub writes refs without a newline; tolerate one written by hand.
  write_file(cache / "models--acme--Widget" / "refs" / "main", old_commit + "\n");
  EXPECT_EQ(resolve("acme/Widget").config.at("v"), "old");
}

TEST_F(sources_cache, OtherRevisionsAndCommitHashes) {
  const fs::path cache = tmp_.path() / "cache";
  test::SourceEnv::set("HF_HUB_CACHE", cache.string());
  const std::string v2 = "2222222222222222222222222222222222222222";
  put(cache, "models--acme--Widget", kCommit, R"({"v": "main"})");
  put(cache, "models--acme--Widget", v2, R"({"v": "v2"})", "v2.0");
  put(cache, "models--acme--Widget", v2, R"({"v": "v2"})", "refs/pr/7");
  options_.revision = "v2.0";
  EXPECT_EQ(resolve("acme/Widget").config.at("v"), "v2");
  options_.revision = "refs/pr/7";
  EXPECT_EQ(resolve("acme/Widget").config.at("v"), "v2");
  options_.revision = kCommit;  // a commit hash needs no ref
  EXPECT_EQ(resolve("acme/Widget").config.at("v"), "main");
  options_.revision = "no-such-branch";
  EXPECT_THROW(resolve("acme/Widget"), NotFoundError);
}

TEST_F(sources_cache, FolderNameIgnoresCase) {
  const fs::path cache = tmp_.path() / "cache";
  test::SourceEnv::set("HF_HUB_CACHE", cache.string());
  put(cache, "models--Acme--Widget", kCommit, R"({"v": 1})");
  const ResolvedModel m = resolve("acme/widget");
  EXPECT_EQ(m.origin, "hf-cache");
  EXPECT_EQ(m.config.at("v"), 1);
}

TEST_F(sources_cache, SnapshotSymlinkIntoBlobs) {
  // huggingface_hub stores blobs/<sha> and links snapshots/<commit>/config.json to it.
  const fs::path cache = tmp_.path() / "cache";
  test::SourceEnv::set("HF_HUB_CACHE", cache.string());
  const fs::path repo = cache / "models--acme--Widget";
  write_file(repo / "blobs" / "abcdef", R"({"v": "blob"})");
  write_file(repo / "refs" / "main", kCommit);
  fs::create_directories(repo / "snapshots" / kCommit);
  fs::create_symlink("../../blobs/abcdef", repo / "snapshots" / kCommit / "config.json");
  EXPECT_EQ(resolve("acme/Widget").config.at("v"), "blob");
}

TEST_F(sources_cache, RefOutsideTheRepoIsIgnored) {
  const fs::path cache = tmp_.path() / "cache";
  test::SourceEnv::set("HF_HUB_CACHE", cache.string());
  write_file(tmp_.path() / "outside" / "config.json", R"({"v": "outside"})");
  for (const std::string ref : {"../../../outside", "..", "/abs", "a\\b"}) {
    write_file(cache / "models--acme--Widget" / "refs" / "main", ref);
    EXPECT_THROW(resolve("acme/Widget"), NotFoundError) << ref;
  }
}

TEST_F(sources_cache, RefWithoutSnapshotIsAMiss) {
  const fs::path cache = tmp_.path() / "cache";
  test::SourceEnv::set("HF_HUB_CACHE", cache.string());
  write_file(cache / "models--acme--Widget" / "refs" / "main", kCommit);
  try {
    resolve("acme/Widget");
    FAIL() << "resolved without a snapshot";
  } catch (const NotFoundError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(cache.string()), std::string::npos) << what;
    EXPECT_NE(what.find("HF_HUB_OFFLINE"), std::string::npos) << what;
  }
}

TEST_F(sources_cache, BrokenCachedConfigIsAConfigError) {
  const fs::path cache = tmp_.path() / "cache";
  test::SourceEnv::set("HF_HUB_CACHE", cache.string());
  put(cache, "models--acme--Widget", kCommit, R"({"v": )");
  EXPECT_THROW(resolve("acme/Widget"), ConfigError);
}

TEST_F(sources_cache, UnsafeRevisionIsAUsageError) {
  const fs::path cache = tmp_.path() / "cache";
  test::SourceEnv::set("HF_HUB_CACHE", cache.string());
  for (const std::string rev :
       {"", "../../evil", "..", "/abs", "a/../b", "a//b", "rev/", "a b", "a\\b", "a\nb", "a?b", "a#b", "a%2Fb"}) {
    options_.revision = rev;
    EXPECT_THROW(resolve("acme/Widget"), UsageError) << rev;
  }
  EXPECT_TRUE(test::list_tree(tmp_.path() / "cache").empty());
}

}  // namespace
}  // namespace mme
