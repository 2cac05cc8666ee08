// PluginLoader against real libraries: the test plugins of tests/plugins/fixtures, most of
// them broken on purpose. Each broken one must be rejected with a reason naming the cause,
// the good ones must still load, and a plugin's library must stay mapped exactly as long as
// an object it created is alive.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <mme/engine/plugin_loader.hpp>
#include <mme/engine/registry.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/layer_model.hpp>
#include <mme/sdk/version.hpp>

#include "test_support.hpp"
#include <dlfcn.h>
#include <stdlib.h>

namespace fs = std::filesystem;

namespace mme {
namespace {

fs::path fixture(const std::string& name) { return fs::path(MME_TEST_FIXTURE_DIR) / ("fixture_" + name + ".so"); }

// A copy of a fixture under a name of our choice, so a test owns a file no other test loads.
fs::path copy_fixture(const std::string& name, const fs::path& dir, const std::string& as) {
  const fs::path to = dir / as;
  fs::copy_file(fixture(name), to, fs::copy_options::overwrite_existing);
  return fs::canonical(to);
}

// Whether the file is mapped into this process, per /proc/self/maps.
bool is_mapped(const fs::path& file) {
  std::ifstream maps("/proc/self/maps");
  const std::string needle = " " + fs::canonical(file).string();
  std::string line;
  while (std::getline(maps, line))
    if (line.size() >= needle.size() && line.compare(line.size() - needle.size(), needle.size(), needle) == 0)
      return true;
  return false;
}

// Whether the dynamic loader has the library loaded (dlopen with RTLD_NOLOAD loads nothing).
bool is_loaded(const fs::path& file) {
  void* handle = ::dlopen(fs::canonical(file).c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return false;
  ::dlclose(handle);
  return true;
}

const RejectedPlugin* rejection_of(const Registry& r, const fs::path& file) {
  for (const auto& x : r.rejected())
    if (x.path == file.string()) return &x;
  return nullptr;
}

std::set<std::string> plugin_names(const Registry& r) {
  std::set<std::string> out;
  for (const auto& p : r.plugins()) out.insert(p.name);
  return out;
}

std::size_t object_count(const Registry& r) {
  return r.adapters().size() + r.layer_models().size() + r.hardware().size();
}

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' lacks '" << (needle) << "'"

// Loads `file` into `r`, expects a rejection, and returns its reason (empty if not rejected).
std::string load_rejected(Registry& r, const fs::path& file) {
  const auto plugins_before = r.plugins().size();
  const auto objects_before = object_count(r);
  EXPECT_FALSE(load_plugin_file(r, file)) << file;
  EXPECT_EQ(r.plugins().size(), plugins_before) << file;
  EXPECT_EQ(object_count(r), objects_before) << file << ": a rejected plugin left objects behind";
  const RejectedPlugin* x = rejection_of(r, file);
  EXPECT_NE(x, nullptr) << file << " is not in the rejected list";
  return x ? x->reason : std::string();
}

// Sets (or unsets) an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

TEST(PluginLoader, FixturesWereBuilt) {
  for (const char* name :
       {"good", "good_two", "wrong_api", "wrong_abi", "null_info", "no_name", "no_entry", "throws", "throws_nonstd",
        "entry_throws", "missing_symbol", "bad_profile", "dup_layer", "dup_alias", "dup_name", "old_api_alias"})
    EXPECT_TRUE(fs::is_regular_file(fixture(name))) << fixture(name);
  // They live in the test build tree, not in the folder the `mme` executable loads.
  EXPECT_NE(fs::weakly_canonical(fs::path(MME_TEST_FIXTURE_DIR)), fs::weakly_canonical(test::plugin_dir()));
}

TEST(PluginLoader, GoodPluginLoadsWithEverythingItRegisters) {
  Registry r;
  ASSERT_TRUE(load_plugin_file(r, fixture("good")));
  EXPECT_TRUE(r.rejected().empty());
  ASSERT_EQ(r.plugins().size(), 1u);
  const PluginRecord& p = r.plugins().front();
  EXPECT_EQ(p.name, "fixture_good");
  EXPECT_EQ(p.version, "1.2.3");
  EXPECT_EQ(p.path, fixture("good").string());
  EXPECT_EQ(p.adapters, std::vector<std::string>{"fixture_adapter"});
  EXPECT_EQ(p.layer_models, std::vector<std::string>{"fixture_layer"});
  EXPECT_EQ(p.hardware, std::vector<std::string>{"FixtureGPU-1GB"});
  ASSERT_NE(r.find_layer_model("fixture_layer"), nullptr);
  EXPECT_EQ(r.find_layer_model("fixture_layer")->description(), "layer model of the good test plugin");
  ASSERT_NE(r.find_hardware("Fixture GPU one"), nullptr);
  EXPECT_EQ(r.find_hardware("FGPU")->name, "FixtureGPU-1GB");
  EXPECT_EQ(r.best_adapter({{"fixture_score", 3}})->name(), "fixture_adapter");
  EXPECT_EQ(r.layer_models().front().plugin, "fixture_good");
}

TEST(PluginLoader, WrongApiVersionIsRejectedBeforeRegistration) {
  Registry r;
  const std::string reason = load_rejected(r, fixture("wrong_api"));
  EXPECT_CONTAINS(reason, fmt::format("plugin API version {}", kPluginApiVersion + 1000));
  EXPECT_CONTAINS(reason, fmt::format("speaks version {}", kPluginApiVersion));
  EXPECT_FALSE(is_mapped(fixture("wrong_api")));  // released at once
}

TEST(PluginLoader, WrongAbiTagIsRejected) {
  Registry r;
  const std::string reason = load_rejected(r, fixture("wrong_abi"));
  EXPECT_CONTAINS(reason, "C++ ABI 'some-other-c++-abi'");
  EXPECT_CONTAINS(reason, std::string(kAbiTag));
}

TEST(PluginLoader, EntryReturningNothingIsRejected) {
  Registry r;
  EXPECT_CONTAINS(load_rejected(r, fixture("null_info")), "returned no plugin information");
}

TEST(PluginLoader, InformationWithoutNameIsRejected) {
  Registry r;
  EXPECT_CONTAINS(load_rejected(r, fixture("no_name")), "no name or no registration function");
}

TEST(PluginLoader, PlainSharedLibraryWithoutEntryIsRejected) {
  Registry r;
  const std::string reason = load_rejected(r, fixture("no_entry"));
  EXPECT_CONTAINS(reason, "no 'mme_plugin_info' entry symbol");
  EXPECT_CONTAINS(reason, "not an mme plugin");
  EXPECT_FALSE(is_loaded(fixture("no_entry")));
}

// A plugin of API version 2 exported a Boost.DLL alias `mme_plugin_entry`: a pointer variable,
// which must not be called as the new entry function (the fixture aborts if it is).
TEST(PluginLoader, PluginOfTheOldAliasEntryIsNamedAsOlderApi) {
  Registry r;
  const std::string reason = load_rejected(r, fixture("old_api_alias"));
  EXPECT_CONTAINS(reason, "built for plugin API version 2 or older (entry 'mme_plugin_entry')");
  EXPECT_CONTAINS(reason, fmt::format("speaks version {}", kPluginApiVersion));
  EXPECT_CONTAINS(reason, "rebuild it against this SDK");
}

TEST(PluginLoader, ThrowingRegistrationIsRejectedAndMergesNothing) {
  Registry r;
  const std::string reason = load_rejected(r, fixture("throws"));
  EXPECT_CONTAINS(reason, "registration of 'fixture_throws' threw");
  EXPECT_CONTAINS(reason, "deliberate failure in fixture_throws");
  EXPECT_EQ(r.find_hardware("ThrowGPU-1GB"), nullptr);
  EXPECT_EQ(r.find_layer_model("fixture_throw_layer"), nullptr);
  EXPECT_FALSE(is_mapped(fixture("throws")));
}

TEST(PluginLoader, NonStandardExceptionIsRejected) {
  Registry r;
  EXPECT_CONTAINS(load_rejected(r, fixture("throws_nonstd")), "non-standard exception");
}

// Issue 20, item 6: the entry call catches everything, as the registration call does.
TEST(PluginLoader, EntryThrowingANonStandardExceptionIsRejected) {
  Registry r;
  EXPECT_CONTAINS(load_rejected(r, fixture("entry_throws")), "the entry symbol threw a non-standard exception");
}

// Issue 20, item 5: bound immediately, a plugin that needs a symbol libmme lacks is refused at
// load (lazily bound, its registration ended the process with exit 127).
TEST(PluginLoader, PluginNeedingAMissingSymbolIsRejectedAtLoad) {
  Registry r;
  const std::string reason = load_rejected(r, fixture("missing_symbol"));
  EXPECT_CONTAINS(reason, "not a loadable library");
  EXPECT_CONTAINS(reason, "mme_function_this_build_lacks");
  EXPECT_TRUE(r.plugins().empty());
}

TEST(PluginLoader, InvalidProfileIsRejectedWithTheFrameworkMessage) {
  Registry r;
  const std::string reason = load_rejected(r, fixture("bad_profile"));
  EXPECT_CONTAINS(reason, "'BadGPU-1GB' reserves more memory than it has");
}

TEST(PluginLoader, TextFileNamedSoIsRejected) {
  test::TempDir dir;
  const fs::path file = dir.path() / "notes.so";
  test::write_file(file, "This is a text file that merely ends in .so; it is long enough to hold an ELF header.\n");
  Registry r;
  const std::string reason = load_rejected(r, file);
  EXPECT_CONTAINS(reason, "not a loadable library");
  EXPECT_CONTAINS(reason, "invalid ELF header");
}

TEST(PluginLoader, EmptyFileNamedSoIsRejected) {
  test::TempDir dir;
  const fs::path file = dir.path() / "empty.so";
  test::write_file(file, "");
  Registry r;
  const std::string reason = load_rejected(r, file);
  EXPECT_CONTAINS(reason, "not a loadable library");
  EXPECT_CONTAINS(reason, "file too short");
}

TEST(PluginLoader, MissingFileIsRejected) {
  test::TempDir dir;
  Registry r;
  EXPECT_CONTAINS(load_rejected(r, dir.path() / "absent.so"), "not a loadable library");
}

TEST(PluginLoader, DuplicatePluginNameIsRejected) {
  Registry r;
  ASSERT_TRUE(load_plugin_file(r, fixture("good")));
  const std::string reason = load_rejected(r, fixture("dup_name"));
  EXPECT_CONTAINS(reason, "a plugin named 'fixture_good' is already loaded from " + fixture("good").string());
  EXPECT_EQ(r.find_hardware("DupNameGPU-1GB"), nullptr);
  EXPECT_EQ(r.plugins().front().version, "1.2.3");
}

TEST(PluginLoader, DuplicateLayerKindIsRejected) {
  Registry r;
  ASSERT_TRUE(load_plugin_file(r, fixture("good")));
  const std::string reason = load_rejected(r, fixture("dup_layer"));
  EXPECT_CONTAINS(reason, "layer model 'FIXTURE_LAYER' is already registered");
  EXPECT_EQ(r.find_hardware("DupLayerGPU-1GB"), nullptr);
  EXPECT_EQ(r.find_layer_model("fixture_layer")->description(), "layer model of the good test plugin");
  EXPECT_FALSE(is_mapped(fixture("dup_layer")));
}

TEST(PluginLoader, ATakenHardwareAliasIsDroppedAndThePluginLoads) {
  Registry r;
  ASSERT_TRUE(load_plugin_file(r, fixture("good")));
  ASSERT_TRUE(load_plugin_file(r, fixture("dup_alias")));  // issue 20: it used to be rejected whole
  EXPECT_TRUE(r.rejected().empty());
  EXPECT_EQ(r.find_hardware("other3")->name, "OtherGPU-3GB");
  EXPECT_EQ(r.find_hardware("OtherGPU-3GB")->aliases, std::vector<std::string>{"other3"});
  EXPECT_NE(r.find_layer_model("fixture_dup_alias_layer"), nullptr);
  EXPECT_EQ(r.find_hardware("f-gpu")->name, "FixtureGPU-1GB");
  EXPECT_TRUE(is_mapped(fixture("dup_alias")));
}

TEST(PluginLoader, LoadPluginsRejectsTheBrokenOnesAndLoadsTheRest) {
  test::TempDir dir;
  // Sorted by file name, which is the load order.
  const std::vector<std::pair<std::string, std::string>> copies = {
      {"good", "a_good.so"},           {"wrong_api", "b_wrong_api.so"}, {"wrong_abi", "c_wrong_abi.so"},
      {"no_entry", "d_no_entry.so"},   {"throws", "e_throws.so"},       {"dup_name", "f_dup_name.so"},
      {"dup_layer", "g_dup_layer.so"}, {"dup_alias", "h_dup_alias.so"}, {"null_info", "i_null_info.so"},
      {"good_two", "z_good_two.so"}};
  for (const auto& [name, as] : copies) copy_fixture(name, dir.path(), as);
  test::write_file(dir.path() / "j_text.so", std::string(200, 'x'));
  test::write_file(dir.path() / "k_empty.so", "");
  // Not candidates: another extension, a versioned soname, a folder named like a plugin.
  test::write_file(dir.path() / "readme.txt", "not a plugin");
  fs::copy_file(fixture("good_two"), dir.path() / "libextra.so.1");
  fs::create_directories(dir.path() / "m_folder.so");

  Registry r;
  load_plugins(r, {dir.path() / "does-not-exist", dir.path(), dir.path()});  // listed twice: loaded once
  // h_dup_alias.so loads without its taken alias F_GPU (a warning, not a rejection).
  EXPECT_EQ(plugin_names(r), (std::set<std::string>{"fixture_good", "fixture_dup_alias", "fixture_good_two"}));
  ASSERT_EQ(r.plugins().size(), 3u);
  EXPECT_EQ(r.plugins()[0].path, (fs::canonical(dir.path()) / "a_good.so").string());
  EXPECT_EQ(r.plugins()[1].path, (fs::canonical(dir.path()) / "h_dup_alias.so").string());
  EXPECT_EQ(r.plugins()[2].path, (fs::canonical(dir.path()) / "z_good_two.so").string());

  const fs::path root = fs::canonical(dir.path());
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"b_wrong_api.so", "plugin API version"},
      {"c_wrong_abi.so", "C++ ABI"},
      {"d_no_entry.so", "no 'mme_plugin_info' entry symbol"},
      {"e_throws.so", "deliberate failure"},
      {"f_dup_name.so", "a plugin named 'fixture_good' is already loaded"},
      {"g_dup_layer.so", "layer model 'FIXTURE_LAYER' is already registered"},
      {"i_null_info.so", "no plugin information"},
      {"j_text.so", "not a loadable library"},
      {"k_empty.so", "not a loadable library"},
  };
  EXPECT_EQ(r.rejected().size(), expected.size());
  for (const auto& [file, why] : expected) {
    const RejectedPlugin* x = rejection_of(r, root / file);
    ASSERT_NE(x, nullptr) << file;
    EXPECT_CONTAINS(x->reason, why);
  }
  // Everything the three loaded plugins registered, nothing else.
  EXPECT_EQ(r.layer_models().size(), 3u);
  EXPECT_EQ(r.hardware().size(), 3u);
  EXPECT_EQ(r.adapters().size(), 1u);
  // Only the loaded libraries stay mapped.
  EXPECT_TRUE(is_mapped(root / "a_good.so"));
  EXPECT_TRUE(is_mapped(root / "h_dup_alias.so"));
  EXPECT_TRUE(is_mapped(root / "z_good_two.so"));
  for (const auto& [file, why] : expected)
    if (file != "j_text.so" && file != "k_empty.so") {
      EXPECT_FALSE(is_mapped(root / file)) << file;
    }
}

TEST(PluginLoader, FirstFolderWinsForTheSamePluginName) {
  test::TempDir first, second;
  const fs::path a = copy_fixture("good", first.path(), "mme_good.so");
  const fs::path b = copy_fixture("good", second.path(), "mme_good.so");
  Registry r;
  load_plugins(r, {first.path(), second.path()});
  ASSERT_EQ(r.plugins().size(), 1u);
  EXPECT_EQ(r.plugins().front().path, a.string());
  ASSERT_NE(rejection_of(r, b), nullptr);
  EXPECT_CONTAINS(rejection_of(r, b)->reason, "already loaded from " + a.string());
}

TEST(PluginLoader, SearchPathOrderCliThenEnvironmentThenExecutableFolder) {
  const fs::path exe_dir = fs::canonical("/proc/self/exe").parent_path();
  EXPECT_EQ(executable_dir(), exe_dir);
  const fs::path beside = exe_dir / ".." / "lib" / "mme" / "plugins";
  {
    ScopedEnv env("MME_PLUGIN_PATH", "/env/one::/env/two:");
    const auto dirs = plugin_search_path({"/cli/a", "/cli/b"});
    EXPECT_EQ(dirs, (std::vector<fs::path>{"/cli/a", "/cli/b", "/env/one", "/env/two", beside}));
  }
  {
    ScopedEnv env("MME_PLUGIN_PATH", "");
    EXPECT_EQ(plugin_search_path({"/cli/a"}), (std::vector<fs::path>{"/cli/a", beside}));
  }
  {
    ScopedEnv env("MME_PLUGIN_PATH", nullptr);
    EXPECT_EQ(plugin_search_path({}), (std::vector<fs::path>{beside}));
    EXPECT_EQ(plugin_search_path({"rel/dir"}), (std::vector<fs::path>{"rel/dir", beside}));
  }
}

TEST(PluginLoader, CommandLineFolderBeatsTheEnvironment) {
  test::TempDir cli, env_one, env_two;
  const fs::path from_cli = copy_fixture("good", cli.path(), "mme_good.so");
  const fs::path from_env = copy_fixture("good", env_one.path(), "mme_good.so");
  copy_fixture("good_two", env_two.path(), "mme_good_two.so");
  const std::string env_value = env_one.path().string() + ":" + env_two.path().string();
  ScopedEnv env("MME_PLUGIN_PATH", env_value.c_str());
  Registry r;
  std::vector<fs::path> dirs = plugin_search_path({cli.path()});
  dirs.pop_back();  // leave the real plugins out: this test is about the order only
  load_plugins(r, dirs);
  ASSERT_EQ(r.plugins().size(), 2u);
  EXPECT_EQ(r.plugins()[0].path, from_cli.string());
  EXPECT_EQ(r.plugins()[1].name, "fixture_good_two");
  ASSERT_NE(rejection_of(r, from_env), nullptr);
}

TEST(PluginLoader, ObjectsKeepTheirLibraryLoaded) {
  test::TempDir dir;
  const fs::path lib = copy_fixture("good", dir.path(), "keep_alive.so");
  std::shared_ptr<const LayerMemoryModel> layer;
  std::shared_ptr<const ConfigAdapter> adapter;
  std::optional<HardwareProfile> profile;
  {
    auto r = std::make_unique<Registry>();
    ASSERT_TRUE(load_plugin_file(*r, lib));
    EXPECT_TRUE(is_mapped(lib));
    EXPECT_TRUE(is_loaded(lib));
    layer = r->layer_models().front().object;
    adapter = r->adapters().front().object;
    profile = *r->hardware().front().object;
    r.reset();  // the registry and its own library handle are gone
  }
  ASSERT_TRUE(is_mapped(lib));
  ASSERT_TRUE(is_loaded(lib));
  // Virtual calls into the plugin and string literals of the plugin still work.
  EXPECT_EQ(layer->kind(), "fixture_layer");
  EXPECT_EQ(layer->description(), "layer model of the good test plugin");
  EXPECT_EQ(adapter->match({{"fixture_score", 7}}), 7);
  const nlohmann::json config = nlohmann::json::object();
  EXPECT_EQ(adapter->adapt(ConfigInput{config, "some/model", "here"}).adapter, "fixture_adapter");

  layer.reset();
  EXPECT_TRUE(is_mapped(lib)) << "the adapter still holds the library";
  adapter.reset();
  // Built with -fno-gnu-unique, the library can be unloaded once nothing holds it.
  EXPECT_FALSE(is_loaded(lib));
  EXPECT_FALSE(is_mapped(lib));
  // A hardware profile is a plain value: it needs no library.
  ASSERT_TRUE(profile.has_value());
  EXPECT_EQ(profile->name, "FixtureGPU-1GB");
  EXPECT_EQ(profile->aliases, (std::vector<std::string>{"fgpu", "fixture-gpu-one"}));
}

// An SDK error thrown by plugin code stays valid after the plugin is gone: its vtable,
// type_info and destructor live in libmme, so the host can still print and destroy it.
TEST(PluginLoader, ErrorThrownByAPluginOutlivesItsLibrary) {
  test::TempDir dir;
  const fs::path lib = copy_fixture("good", dir.path(), "throwing_layer.so");
  std::shared_ptr<const LayerMemoryModel> layer;
  {
    Registry r;
    ASSERT_TRUE(load_plugin_file(r, lib));
    layer = r.layer_models().front().object;
  }
  ModelSpec model;
  LayerSpec spec;
  TrainingSetup setup;
  const BlockContext ctx{model, spec, setup};
  std::string message;
  ExitCode code = ExitCode::kOk;
  bool unloaded = false;
  try {
    layer->validate(ctx);
    ADD_FAILURE() << "validate did not throw";
  } catch (const Error& e) {
    layer.reset();  // the last owner: the library is unloaded while the error is alive
    unloaded = !is_loaded(lib);
    message = e.what();
    code = e.code();
    EXPECT_NE(dynamic_cast<const LayoutError*>(&e), nullptr);
  }  // the error is destroyed here, after its plugin
  EXPECT_TRUE(unloaded);
  EXPECT_EQ(message, "fixture layer 'fixture_layer' refuses every layout");
  EXPECT_EQ(code, ExitCode::kBadLayout);
}

TEST(PluginLoader, RegistryWithoutOutstandingObjectsUnloadsItsLibraries) {
  test::TempDir dir;
  const fs::path lib = copy_fixture("good", dir.path(), "unload.so");
  {
    Registry r;
    ASSERT_TRUE(load_plugin_file(r, lib));
    EXPECT_TRUE(is_mapped(lib));
  }
  EXPECT_FALSE(is_mapped(lib));
  EXPECT_FALSE(is_loaded(lib));
}

TEST(PluginLoader, ReloadingAfterUnloadWorks) {
  test::TempDir dir;
  const fs::path lib = copy_fixture("good", dir.path(), "reload.so");
  for (int round = 0; round < 3; ++round) {
    Registry r;
    ASSERT_TRUE(load_plugin_file(r, lib)) << round;
    EXPECT_EQ(r.find_layer_model("fixture_layer")->kind(), "fixture_layer");
  }
  EXPECT_FALSE(is_mapped(lib));
}

}  // namespace
}  // namespace mme
