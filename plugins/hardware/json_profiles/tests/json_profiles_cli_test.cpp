// JSON hardware profiles end to end through the built `mme`: --hardware-file and
// MME_HARDWARE_PATH feed `mme hardware`, the estimate's fit verdicts and --gpu; a bad file is
// one warning on stderr and the command still succeeds.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mme {
namespace {

using test::run_mme;
using test::RunResult;

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' lacks '" << (needle) << "'"

std::string describe(const RunResult& r) {
  return fmt::format("exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}", r.exit_code, r.out, r.err);
}

json parse_stdout(const RunResult& r) {
  try {
    return json::parse(r.out);
  } catch (const json::exception& e) {
    ADD_FAILURE() << "stdout is not one JSON document: " << e.what() << "\n" << describe(r);
    return json();
  }
}

const json* find_named(const json& array, const char* key, const std::string& value) {
  for (const auto& e : array)
    if (e.contains(key) && e[key] == value) return &e;
  return nullptr;
}

// No profile files from the environment the tests run in.
const std::map<std::string, std::string> kCleanEnv = {{"MME_HARDWARE_PATH", ""}, {"MME_HARDWARE_FILES", ""}};

std::map<std::string, std::string> env_with(const std::string& key, const std::string& value) {
  auto env = kCleanEnv;
  env[key] = value;
  return env;
}

constexpr const char* kAcme = R"([
  {"name": "ACME-X1-96GB", "memory_gib": 96, "aliases": ["x1"], "reserved_gib": 2,
   "hbm_bandwidth_gbps": 3600, "bf16_tflops": 900, "fp8_tflops": 1800, "link_bandwidth_gbps": 800,
   "vendor": "ACME", "architecture": "hopper", "source": "ACME X1 brief"},
  {"name": "ACME-Mini-8GB", "memory_gib": 8}
])";

TEST(HardwareJsonCli, HardwareFileProfilesAreListed) {
  test::TempDir dir;
  test::write_file(dir.path() / "acme.json", kAcme);
  const RunResult r =
      run_mme({"hardware", "--json", "--hardware-file", (dir.path() / "acme.json").string()}, kCleanEnv);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  const json list = parse_stdout(r)["hardware"];
  const json* x1 = find_named(list, "name", "ACME-X1-96GB");
  ASSERT_NE(x1, nullptr) << list.dump(2);
  EXPECT_EQ((*x1)["plugin"], "json_profiles");
  EXPECT_EQ((*x1)["memory_bytes"], 96LL << 30);
  EXPECT_EQ((*x1)["reserved_bytes"], 2LL << 30);
  EXPECT_EQ((*x1)["allocatable_bytes"], 94LL << 30);
  EXPECT_EQ((*x1)["aliases"], json::array({"x1"}));
  EXPECT_EQ((*x1)["vendor"], "ACME");
  EXPECT_EQ((*x1)["bf16_tflops"], 900.0);
  EXPECT_EQ((*x1)["source"], "ACME X1 brief");
  const json* mini = find_named(list, "name", "ACME-Mini-8GB");
  ASSERT_NE(mini, nullptr);
  EXPECT_EQ((*mini)["source"], (dir.path() / "acme.json").string());
  EXPECT_EQ(list.front()["name"], "ACME-Mini-8GB");  // sorted by capacity with the built-ins
  EXPECT_NE(find_named(list, "name", "H100-SXM-80GB"), nullptr);

  const RunResult text = run_mme({"hardware", "--hardware-file", (dir.path() / "acme.json").string()}, kCleanEnv);
  ASSERT_EQ(text.exit_code, 0) << describe(text);
  EXPECT_CONTAINS(text.out, "ACME-X1-96GB");
}

TEST(HardwareJsonCli, FoldersInMmeHardwarePathAreRead) {
  test::TempDir one, two;
  test::write_file(one.path() / "acme.json", kAcme);
  test::write_file(two.path() / "lab.json", R"({"name": "Lab-GPU-40", "memory_gib": 40})");
  test::write_file(two.path() / "readme.txt", "not read");
  const RunResult r =
      run_mme({"hardware", "--json"}, env_with("MME_HARDWARE_PATH", one.path().string() + ":" + two.path().string()));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  const json list = parse_stdout(r)["hardware"];
  EXPECT_NE(find_named(list, "name", "ACME-X1-96GB"), nullptr);
  EXPECT_NE(find_named(list, "name", "Lab-GPU-40"), nullptr);
}

TEST(HardwareJsonCli, ABadFileIsOneWarningAndTheRestLoads) {
  test::TempDir dir;
  test::write_file(dir.path() / "acme.json", kAcme);
  test::write_file(dir.path() / "broken.json", R"({"name": "Broken", "memory_gib": )");
  test::write_file(dir.path() / "negative.json", R"({"name": "Neg", "memory_gib": -4})");
  test::write_file(dir.path() / "noname.json", R"({"memory_gib": 4})");
  test::write_file(dir.path() / "dup.json", R"({"name": "ACME-X1-96GB", "memory_gib": 4})");
  test::write_file(dir.path() / "h100.json", R"({"name": "Not-an-H100", "memory_gib": 80, "aliases": ["H100"]})");
  const RunResult r = run_mme({"hardware", "--json"}, env_with("MME_HARDWARE_PATH", dir.path().string()));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 5) << r.err;
  const auto warned = [&](const std::string& file, const std::string& why) {
    EXPECT_CONTAINS(
        r.err, fmt::format("mme: warning: hardware profile file {} skipped: {}", (dir.path() / file).string(), why));
  };
  warned("broken.json", "invalid JSON: parse error at line 1");
  warned("negative.json", "'Neg': 'memory_gib' must not be negative, got -4");
  warned("noname.json", "required key 'name' is missing");
  // acme.json sorts before dup.json, so acme's ACME-X1-96GB stays.
  warned("dup.json", "name 'ACME-X1-96GB' of profile 'ACME-X1-96GB' is already taken by profile 'ACME-X1-96GB' of " +
                         (dir.path() / "acme.json").string());
  warned("h100.json",
         "name 'H100' of profile 'Not-an-H100' is already taken by profile 'H100-SXM-80GB' of plugin "
         "hw_nvidia_hopper");
  const json list = parse_stdout(r)["hardware"];
  EXPECT_NE(find_named(list, "name", "ACME-X1-96GB"), nullptr);
  EXPECT_EQ((*find_named(list, "name", "ACME-X1-96GB"))["memory_bytes"], 96LL << 30);
  EXPECT_EQ(find_named(list, "name", "Not-an-H100"), nullptr);
  // The built-in H100 is untouched and no plugin was rejected.
  const json* h100 = find_named(list, "name", "H100-SXM-80GB");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ((*h100)["plugin"], "hw_nvidia_hopper");
  const RunResult plugins = run_mme({"plugins", "--json", "-q"}, env_with("MME_HARDWARE_PATH", dir.path().string()));
  ASSERT_EQ(plugins.exit_code, 0) << describe(plugins);
  EXPECT_EQ(parse_stdout(plugins)["rejected"], json::array());
}

TEST(HardwareJsonCli, EstimateJudgesTheFitOnJsonProfilesAndAcceptsThemAsGpu) {
  test::TempDir dir;
  test::write_file(dir.path() / "acme.json", kAcme);
  const std::string file = (dir.path() / "acme.json").string();
  const RunResult all = run_mme({"estimate", "Qwen/Qwen3-0.6B", "--json", "--hardware-file", file}, kCleanEnv);
  ASSERT_EQ(all.exit_code, 0) << describe(all);
  const json j = parse_stdout(all);
  const json* x1 = find_named(j["fits"], "hardware", "ACME-X1-96GB");
  const json* mini = find_named(j["fits"], "hardware", "ACME-Mini-8GB");
  ASSERT_NE(x1, nullptr) << j["fits"].dump(2);
  ASSERT_NE(mini, nullptr);
  EXPECT_EQ((*x1)["capacity_bytes"], 96LL << 30);
  EXPECT_EQ((*x1)["fits"], true);
  // By default the device total (reserved + outside PyTorch) is judged against the whole card.
  EXPECT_EQ((*mini)["rule"], "device_total");
  EXPECT_EQ((*mini)["usable_bytes"], 8LL << 30);
  EXPECT_EQ((*mini)["fits"], (*mini)["needed_bytes"].get<std::int64_t>() <= (8LL << 30));
  EXPECT_EQ((*mini)["needed_bytes"], j["peak"]["device_upper_bytes"]);

  // --headroom restores the fixed rule: the profile's reserve (2 GiB on the X1) and the headroom
  // come off the capacity.
  const RunResult one =
      run_mme({"estimate", "Qwen/Qwen3-0.6B", "--json", "--gpu", "x1", "--hardware-file", file, "--headroom", "0.05"},
              kCleanEnv);
  ASSERT_EQ(one.exit_code, 0) << describe(one);
  const json fits = parse_stdout(one)["fits"];
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0]["hardware"], "ACME-X1-96GB");
  EXPECT_EQ(fits[0]["usable_bytes"], (96LL << 30) - (2LL << 30) - std::llround(static_cast<double>(96LL << 30) * 0.05));

  const RunResult text =
      run_mme({"estimate", "Qwen/Qwen3-0.6B", "--gpu", "acme_x1_96gb", "--hardware-file", file}, kCleanEnv);
  ASSERT_EQ(text.exit_code, 0) << describe(text);
  EXPECT_CONTAINS(text.out, "ACME-X1-96GB");

  // Without the file the alias means nothing.
  const RunResult unknown = run_mme({"estimate", "Qwen/Qwen3-0.6B", "--gpu", "x1"}, kCleanEnv);
  EXPECT_EQ(unknown.exit_code, 2) << describe(unknown);
  EXPECT_CONTAINS(unknown.err, "unknown GPU 'x1'");
}

TEST(HardwareJsonCli, HardwareFileAddsToMmeHardwareFiles) {
  test::TempDir dir;
  test::write_file(dir.path() / "a.json", R"({"name": "Env-GPU", "memory_gib": 16})");
  test::write_file(dir.path() / "b.json", R"({"name": "Flag-GPU", "memory_gib": 32})");
  test::write_file(dir.path() / "c.json", R"({"name": "Flag-GPU-2", "memory_gib": 64})");
  const RunResult r = run_mme({"hardware", "--json", "--hardware-file", (dir.path() / "b.json").string(),
                               "--hardware-file", (dir.path() / "c.json").string()},
                              env_with("MME_HARDWARE_FILES", (dir.path() / "a.json").string()));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json list = parse_stdout(r)["hardware"];
  for (const char* name : {"Env-GPU", "Flag-GPU", "Flag-GPU-2"})
    EXPECT_NE(find_named(list, "name", name), nullptr) << name;
}

TEST(HardwareJsonCli, AMissingHardwareFileIsAnError) {
  test::TempDir dir;
  const std::string missing = (dir.path() / "missing.json").string();
  const RunResult r = run_mme({"hardware", "--hardware-file", missing}, kCleanEnv);
  EXPECT_EQ(r.exit_code, 6) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_CONTAINS(r.err, fmt::format("--hardware-file: {}: no such file", missing));
  const RunResult e = run_mme({"estimate", "Qwen/Qwen3-0.6B", "--hardware-file", missing}, kCleanEnv);
  EXPECT_EQ(e.exit_code, 6) << describe(e);
}

}  // namespace
}  // namespace mme
