// The json_profiles plugin through its static archive: what a profile file may hold, the
// figures it turns into, and that every kind of bad file costs exactly one warning naming the
// file while the good files still load.
#include "json_profiles.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <mme/engine/registry.hpp>
#include <mme/sdk/version.hpp>

#include "nvidia_hopper.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mme {
namespace {

using plugins::hardware_profile_files;
using plugins::load_hardware_profiles;
using plugins::parse_hardware_profiles;

constexpr std::int64_t kMiB = 1024 * 1024;
constexpr std::int64_t kGiB = 1024 * kMiB;

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' lacks '" << (needle) << "'"

struct Loaded {
  std::vector<HardwareProfile> profiles;
  std::vector<std::string> warnings;
};

Loaded load(const std::vector<fs::path>& files, std::function<std::string(const std::string&)> taken = nullptr) {
  Loaded l;
  l.profiles = load_hardware_profiles(files, taken, [&](const std::string& w) { l.warnings.push_back(w); });
  return l;
}

// One file holding `text`, loaded alone.
Loaded load_text(const test::TempDir& dir, const std::string& text, const std::string& file = "gpu.json") {
  test::write_file(dir.path() / file, text);
  return load({dir.path() / file});
}

TEST(JsonProfiles, ReadsEveryFieldOfOneProfile) {
  test::TempDir dir;
  const Loaded l = load_text(dir, R"({
    "name": "ACME-X1", "memory_gib": 96, "aliases": ["x1", "acme x1"], "reserved_gib": 1.5,
    "hbm_bandwidth_gbps": 3600, "bf16_tflops": 900, "fp8_tflops": 1800.5, "link_bandwidth_gbps": 800,
    "vendor": "ACME", "architecture": "hopper", "source": "ACME datasheet", "_comment": "ignored",
    "fp4_tflops": 3600, "inter_node_bandwidth_gbps": 100, "gpus_per_node": 72})");
  ASSERT_TRUE(l.warnings.empty()) << l.warnings.front();
  ASSERT_EQ(l.profiles.size(), 1u);
  const HardwareProfile& h = l.profiles[0];
  EXPECT_EQ(h.name, "ACME-X1");
  EXPECT_EQ(h.aliases, (std::vector<std::string>{"x1", "acme x1"}));
  EXPECT_EQ(h.memory_bytes, 96 * kGiB);
  EXPECT_EQ(h.reserved_bytes, 1536 * kMiB);
  EXPECT_EQ(h.hbm_bandwidth_gbps, 3600);
  EXPECT_EQ(h.bf16_tflops, 900);
  EXPECT_EQ(h.fp8_tflops, 1800.5);
  EXPECT_EQ(h.link_bandwidth_gbps, 800);
  EXPECT_EQ(h.fp4_tflops, 3600);
  EXPECT_EQ(h.inter_node_bandwidth_gbps, 100);
  EXPECT_EQ(h.gpus_per_node, 72);
  EXPECT_EQ(h.vendor, "ACME");
  EXPECT_EQ(h.architecture, "hopper");
  EXPECT_EQ(h.source, "ACME datasheet");
}

TEST(JsonProfiles, OnlyNameAndMemoryAreRequired) {
  test::TempDir dir;
  const Loaded l = load_text(dir, R"({"name": "Lab-GPU", "memory_gib": 79.6474609375})");
  ASSERT_TRUE(l.warnings.empty()) << l.warnings.front();
  ASSERT_EQ(l.profiles.size(), 1u);
  const HardwareProfile& h = l.profiles[0];
  EXPECT_EQ(h.memory_bytes, 81559 * kMiB);  // nvidia-smi's MiB, written in GiB
  EXPECT_EQ(h.reserved_bytes, 1 * kGiB);    // the default: CUDA context + NCCL
  EXPECT_TRUE(h.aliases.empty());
  EXPECT_EQ(h.hbm_bandwidth_gbps, 0);  // left out: unknown
  EXPECT_EQ(h.fp8_tflops, 0);
  EXPECT_EQ(h.gpus_per_node, 0);  // unknown: the planner assumes its default
  EXPECT_EQ(h.inter_node_bandwidth_gbps, 0);
  EXPECT_EQ(h.vendor, "");
  EXPECT_EQ(h.source, (dir.path() / "gpu.json").string());  // where the figures came from
}

// An explicit fp8_tflops of 0 says "not supported"; the other figures have no such meaning.
TEST(JsonProfiles, AnExplicitZeroFp8SaysNotSupported) {
  const auto p = parse_hardware_profiles(json::parse(R"({"name": "A-1", "memory_gib": 16, "fp8_tflops": 0,
                                                       "bf16_tflops": 1, "hbm_bandwidth_gbps": 1000000})"),
                                         "lab.json");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fp8_tflops, 0);
  EXPECT_EQ(p[0].bf16_tflops, 1);  // the bounds are inclusive
  EXPECT_EQ(p[0].hbm_bandwidth_gbps, 1e6);
}

TEST(JsonProfiles, AnArrayHoldsSeveralProfiles) {
  const json doc = json::parse(R"([{"name": "A-1", "memory_gib": 16}, {"name": "A-2", "memory_gib": 32,
                                   "reserved_gib": 0}])");
  const auto profiles = parse_hardware_profiles(doc, "lab.json");
  ASSERT_EQ(profiles.size(), 2u);
  EXPECT_EQ(profiles[0].name, "A-1");
  EXPECT_EQ(profiles[1].memory_bytes, 32 * kGiB);
  EXPECT_EQ(profiles[1].reserved_bytes, 0);
}

// What PyTorch's and TE's choices follow: the compute capability as nvidia-smi prints it, or,
// without it, the documented table by architecture (an empty one is Hopper's, another not CUDA).
TEST(JsonProfiles, ComputeCapabilityIsGivenOrFollowsTheArchitecture) {
  const json doc = json::parse(R"([
    {"name": "A-1", "memory_gib": 16, "compute_capability": 8.9, "architecture": "hopper"},
    {"name": "A-2", "memory_gib": 16, "architecture": "ampere"},
    {"name": "A-3", "memory_gib": 16, "architecture": "blackwell"},
    {"name": "A-4", "memory_gib": 16},
    {"name": "A-5", "memory_gib": 16, "architecture": "cdna3"},
    {"name": "A-6", "memory_gib": 16, "architecture": "cdna3", "compute_capability": 0},
    {"name": "A-7", "memory_gib": 16, "compute_capability": 12.0}])");
  const auto p = parse_hardware_profiles(doc, "lab.json");
  ASSERT_EQ(p.size(), 7u);
  EXPECT_EQ(p[0].compute_capability, 89);  // given wins over the architecture
  EXPECT_EQ(p[1].compute_capability, 80);
  EXPECT_EQ(p[2].compute_capability, 100);
  EXPECT_EQ(p[3].compute_capability, 90);
  EXPECT_EQ(p[4].compute_capability, 0);
  EXPECT_EQ(p[5].compute_capability, 0);
  EXPECT_EQ(p[6].compute_capability, 120);
}

struct BadCase {
  const char* text;
  const char* reason;  // a piece of the warning
};

TEST(JsonProfiles, EveryBadFileCostsOneWarningAndIsSkipped) {
  const std::vector<BadCase> cases = {
      {R"({"name": "X", "memory_gib": 80,)", "invalid JSON: parse error at line 1"},
      {"", "invalid JSON"},
      {R"({"memory_gib": 80})", "required key 'name' is missing"},
      {R"({"name": 7, "memory_gib": 80})", "'name' must be a string, got a number"},
      {R"({"name": "--", "memory_gib": 80})", "'name' must contain a letter or a digit"},
      {R"({"name": "X"})", "'X': required key 'memory_gib' is missing"},
      {R"({"name": "X", "memory_gib": -80})", "'X': 'memory_gib' must not be negative, got -80"},
      {R"({"name": "X", "memory_gib": 0})", "'memory_gib' must be positive"},
      {R"({"name": "X", "memory_gib": "80"})", "'memory_gib' must be a number, got a string"},
      {R"({"name": "X", "memory_gib": true})", "'memory_gib' must be a number, got a boolean"},
      {R"({"name": "X", "memory_gib": 85899345920})", "is more than 1048576 GiB (1 PiB); is it in bytes?"},
      {R"({"name": "X", "memory_gib": 80, "reserved_gib": -1})", "'reserved_gib' must not be negative"},
      {R"({"name": "X", "memory_gib": 80, "reserved_gib": 80})", "'reserved_gib' (80 GiB) must be less than"},
      {R"({"name": "X", "memory_gib": 0.5})", "'reserved_gib' (default 1 GiB) must be less than 'memory_gib'"},
      {R"({"name": "X", "memory_gib": 80, "bf16_tflops": -1})", "'bf16_tflops' must not be negative, got -1"},
      // Issue 20: an absurd throughput made every plan score 0; a control character in a name
      // would reach the terminal.
      {R"({"name": "X", "memory_gib": 80, "bf16_tflops": 1e308})", "'bf16_tflops' 1e+308 is more than 1e+06"},
      {R"({"name": "X\u001b[2J", "memory_gib": 80})", "'name' must not contain control characters"},
      // Issue 32: zero or tiny throughput made every step time infinite (the ranking degenerate);
      // a bidi control in a name would reorder the terminal line.
      {R"({"name": "X", "memory_gib": 80, "bf16_tflops": 0})", "'X': 'bf16_tflops' 0 is less than 1 TFLOP/s"},
      {R"({"name": "X", "memory_gib": 80, "hbm_bandwidth_gbps": 1e-300})",
       "'X': 'hbm_bandwidth_gbps' 1e-300 is less than 1 GB/s, below any device"},
      {R"({"name": "X", "memory_gib": 80, "link_bandwidth_gbps": 0.5})", "'link_bandwidth_gbps' 0.5 is less than 1"},
      {R"({"name": "X", "memory_gib": 80, "fp8_tflops": 1e-9})", "'fp8_tflops' 1e-09 is less than 1 TFLOP/s"},
      {R"({"name": "X\u202e", "memory_gib": 80})", "'name' must not contain control characters (C0, C1 or bidi"},
      {R"({"name": "X", "memory_gib": 80, "aliases": ["x\u0007"]})", "'aliases'[0] must not contain control"},
      {R"({"name": "X", "memory_gib": 80, "link_bandwidth_gbps": null})", "'link_bandwidth_gbps' must be a number"},
      {R"({"name": "X", "memory_gib": 80, "aliases": "x"})", "'aliases' must be an array of strings, got a string"},
      {R"({"name": "X", "memory_gib": 80, "aliases": ["x", 3]})", "'aliases'[1] must be a string"},
      {R"({"name": "X", "memory_gib": 80, "aliases": [""]})", "'aliases'[0] must contain a letter or a digit"},
      {R"({"name": "X", "memory_gib": 80, "vendor": 1})", "'vendor' must be a string"},
      {R"({"name": "X", "memory_gib": 80, "compute_capability": 9.05})", "one digit after the point (9.0, 8.9)"},
      {R"({"name": "X", "memory_gib": 80, "compute_capability": -9})", "'compute_capability' must not be negative"},
      {R"({"name": "X", "memory_gib": 80, "compute_capability": 100})", "'compute_capability' 100 is more than 99.9"},
      {R"({"name": "X", "memory_gib": 80, "compute_capability": "9.0"})", "'compute_capability' must be a number"},
      {R"({"name": "X", "memory_gb": 80})", "unknown key 'memory_gb'"},
      {R"({"name": "X", "memory_gib": 80, "gpus_per_node": 7.5})", "'gpus_per_node' must be a whole number, got 7.5"},
      {R"({"name": "X", "memory_gib": 80, "gpus_per_node": -8})", "'gpus_per_node' must not be negative"},
      {R"({"name": "X", "memory_gib": 80, "inter_node_bandwidth_gbps": "50"})",
       "'inter_node_bandwidth_gbps' must be a number"},
      {R"([])", "the array holds no profiles"},
      {R"(42)", "expected a profile object or an array of them, got a number"},
      {R"([{"name": "X", "memory_gib": 80}, "Y"])", "profile 2: expected a profile object, got a string"},
      {R"([{"name": "X", "memory_gib": 80}, {"name": "Y", "memory_gib": -1}])", "profile 2: 'Y': 'memory_gib'"},
      {R"([{"name": "X-1", "memory_gib": 80}, {"name": "x_1", "memory_gib": 40}])",
       "name 'x_1' of profile 'x_1' repeats profile 'X-1' of the same file"},
      {R"([{"name": "X", "memory_gib": 80, "aliases": ["fast"]}, {"name": "Y", "memory_gib": 40, "aliases": ["FAST"]}])",
       "name 'FAST' of profile 'Y' repeats profile 'X'"},
  };
  for (const auto& c : cases) {
    test::TempDir dir;
    test::write_file(dir.path() / "a_good.json", R"({"name": "Good-1", "memory_gib": 24})");
    test::write_file(dir.path() / "b_bad.json", c.text);
    test::write_file(dir.path() / "c_good.json", R"({"name": "Good-2", "memory_gib": 48})");
    const Loaded l = load({dir.path() / "a_good.json", dir.path() / "b_bad.json", dir.path() / "c_good.json"});
    ASSERT_EQ(l.warnings.size(), 1u) << c.text;
    const std::string& w = l.warnings[0];
    EXPECT_CONTAINS(w, "hardware profile file " + (dir.path() / "b_bad.json").string() + " skipped: ");
    EXPECT_CONTAINS(w, c.reason);
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
    ASSERT_EQ(l.profiles.size(), 2u) << c.text;
    EXPECT_EQ(l.profiles[0].name, "Good-1");
    EXPECT_EQ(l.profiles[1].name, "Good-2");
  }
}

TEST(JsonProfiles, AFileRepeatingAnEarlierFilesNameIsSkippedWhole) {
  test::TempDir dir;
  test::write_file(dir.path() / "1.json", R"({"name": "Lab-A", "memory_gib": 40, "aliases": ["a"]})");
  // Lab-B is fine, but Lab-C's alias is Lab-A's: the whole file goes.
  test::write_file(dir.path() / "2.json", R"([{"name": "Lab-B", "memory_gib": 40},
                                              {"name": "Lab-C", "memory_gib": 40, "aliases": ["A"]}])");
  const Loaded l = load({dir.path() / "1.json", dir.path() / "2.json"});
  ASSERT_EQ(l.profiles.size(), 1u);
  EXPECT_EQ(l.profiles[0].name, "Lab-A");
  ASSERT_EQ(l.warnings.size(), 1u);
  EXPECT_CONTAINS(l.warnings[0], "2.json skipped: name 'A' of profile 'Lab-C' is already taken by profile 'Lab-A' of " +
                                     (dir.path() / "1.json").string());
}

TEST(JsonProfiles, ANameTakenByTheHostIsSkipped) {
  test::TempDir dir;
  const auto taken = [](const std::string& n) -> std::string {
    return normalize_hardware_name(n) == "h100" ? "profile 'H100-SXM-80GB' of plugin hw_nvidia_hopper" : "";
  };
  test::write_file(dir.path() / "x.json", R"({"name": "My-H100", "memory_gib": 80, "aliases": ["h-100"]})");
  const Loaded l = load({dir.path() / "x.json"}, taken);
  EXPECT_TRUE(l.profiles.empty());
  ASSERT_EQ(l.warnings.size(), 1u);
  EXPECT_CONTAINS(l.warnings[0],
                  "name 'h-100' of profile 'My-H100' is already taken by profile 'H100-SXM-80GB' of "
                  "plugin hw_nvidia_hopper");
}

TEST(JsonProfiles, MissingAndUnreadableFilesAreWarnings) {
  test::TempDir dir;
  fs::create_directories(dir.path() / "folder.json");
  const Loaded l = load({dir.path() / "nope.json", dir.path() / "folder.json"});
  EXPECT_TRUE(l.profiles.empty());
  ASSERT_EQ(l.warnings.size(), 2u);
  EXPECT_CONTAINS(l.warnings[0], "nope.json skipped: no such file");
  EXPECT_CONTAINS(l.warnings[1], "folder.json skipped: not a regular file");
}

TEST(JsonProfiles, FilesComeFromTheFoldersThenTheFileList) {
  test::TempDir dir;
  const fs::path one = dir.path() / "one", two = dir.path() / "two";
  test::write_file(one / "b.json", "{}");
  test::write_file(one / "a.json", "{}");
  test::write_file(one / "notes.txt", "not a profile");
  fs::create_directories(one / "sub.json");  // a folder, not a file
  test::write_file(two / "c.json", "{}");
  test::write_file(dir.path() / "extra.json", "{}");
  std::vector<std::string> warnings;
  const auto warn = [&](const std::string& w) { warnings.push_back(w); };
  const std::string path = one.string() + "::" + (dir.path() / "missing").string() + ":" + two.string();
  // one/a.json twice: once from the folder, once named; it is read once.
  const std::string files = (dir.path() / "extra.json").string() + ":" + (one / "a.json").string();
  const auto list = hardware_profile_files(path, files, warn);
  EXPECT_EQ(list, (std::vector<fs::path>{one / "a.json", one / "b.json", two / "c.json", dir.path() / "extra.json"}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_CONTAINS(warnings[0], "MME_HARDWARE_PATH: " + (dir.path() / "missing").string() + " does not exist");
  EXPECT_TRUE(hardware_profile_files("", "", warn).empty());
}

// Through the registry, the way the loader runs the plugin: after hw_nvidia_hopper, with the
// files named in the environment. The clashing file is skipped; the plugin is not rejected.
class JsonProfilesPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_);
    previous_ = spdlog::default_logger();
    auto logger = std::make_shared<spdlog::logger>("test", sink_);
    logger->set_pattern("%l: %v");
    spdlog::set_default_logger(logger);
    for (const char* v : {"MME_HARDWARE_PATH", "MME_HARDWARE_FILES"}) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
    }
  }
  void TearDown() override {
    spdlog::set_default_logger(previous_);
    for (const auto& [k, v] : saved_) {
      if (v)
        ::setenv(k.c_str(), v->c_str(), 1);
      else
        ::unsetenv(k.c_str());
    }
  }
  std::ostringstream log_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(JsonProfilesPlugin, RegistersTheGoodFilesAndSkipsANameABuiltInHas) {
  test::TempDir dir;
  test::write_file(dir.path() / "hw" / "acme.json", R"([{"name": "ACME-X1", "memory_gib": 96, "aliases": ["x1"]},
                                                      {"name": "ACME-X2", "memory_gib": 192}])");
  test::write_file(dir.path() / "hw" / "h100.json", R"({"name": "Our-H100", "memory_gib": 80, "aliases": ["H100"]})");
  test::write_file(dir.path() / "lab.json", R"({"name": "Lab-9", "memory_gib": 24})");
  ::setenv("MME_HARDWARE_PATH", (dir.path() / "hw").c_str(), 1);
  ::setenv("MME_HARDWARE_FILES", (dir.path() / "lab.json").c_str(), 1);

  Registry registry;
  ASSERT_TRUE(registry.register_plugin("hw_nvidia_hopper", MME_VERSION_STRING, "", plugins::register_nvidia_hopper));
  EXPECT_EQ(registry.host(), nullptr);  // only set while a registration runs
  ASSERT_TRUE(registry.register_plugin("json_profiles", MME_VERSION_STRING, "", plugins::register_json_profiles))
      << log_.str();
  EXPECT_TRUE(registry.rejected().empty());
  ASSERT_NE(registry.find_hardware("x1"), nullptr);
  EXPECT_EQ(registry.find_hardware("x1")->name, "ACME-X1");
  EXPECT_NE(registry.find_hardware("ACME-X2"), nullptr);
  EXPECT_NE(registry.find_hardware("lab 9"), nullptr);
  EXPECT_EQ(registry.find_hardware("Our-H100"), nullptr);
  EXPECT_EQ(registry.find_hardware("H100")->name, "H100-SXM-80GB");
  ASSERT_EQ(registry.plugins().size(), 2u);
  EXPECT_EQ(registry.plugins()[1].hardware, (std::vector<std::string>{"ACME-X1", "ACME-X2", "Lab-9"}));
  for (const auto& r : registry.hardware()) {
    if (r.object->vendor.empty()) {
      EXPECT_EQ(r.plugin, "json_profiles") << r.object->name;
    }
  }

  const std::string log = log_.str();
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_CONTAINS(log, "warning: hardware profile file " + (dir.path() / "hw" / "h100.json").string() +
                           " skipped: name 'H100' of profile 'Our-H100' is already taken by profile 'H100-SXM-80GB' "
                           "of plugin hw_nvidia_hopper");
}

TEST_F(JsonProfilesPlugin, WithoutFilesItRegistersNothingAndSaysNothing) {
  ::unsetenv("MME_HARDWARE_PATH");
  ::unsetenv("MME_HARDWARE_FILES");
  Registry registry;
  ASSERT_TRUE(registry.register_plugin("json_profiles", MME_VERSION_STRING, "", plugins::register_json_profiles));
  EXPECT_TRUE(registry.hardware().empty());
  EXPECT_EQ(log_.str(), "");
}

}  // namespace
}  // namespace mme
