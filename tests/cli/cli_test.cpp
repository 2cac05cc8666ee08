// End-to-end runs of the built `mme`: help and version, usage errors (exit 2, one line on
// stderr, nothing on stdout), `hardware` and `plugins` listings, the plugin search path, and
// the output contract (stdout carries only the result; no ANSI colour off a terminal or
// under NO_COLOR).
#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mme/sdk/version.hpp>

#include "test_support.hpp"
#include <fcntl.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using nlohmann::json;

namespace mme {
namespace {

using test::run_mme;
using test::RunResult;

std::string describe(const RunResult& r) {
  return fmt::format("exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}", r.exit_code, r.out, r.err);
}

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' lacks '" << (needle) << "'"

// Parses stdout as exactly one JSON document (trailing text makes the parse fail).
json parse_stdout(const RunResult& r) {
  try {
    return json::parse(r.out);
  } catch (const json::exception& e) {
    ADD_FAILURE() << "stdout is not one JSON document: " << e.what() << "\n" << describe(r);
    return json();
  }
}

// A usage error: exit 2, nothing on stdout, exactly one stderr line "mme: error: ...".
void expect_usage_error(const RunResult& r, const std::string& mentions = "") {
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_EQ(r.out, "") << describe(r);
  EXPECT_EQ(r.err.rfind("mme: error: ", 0), 0u) << describe(r);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << describe(r);
  EXPECT_EQ(r.err.back(), '\n') << describe(r);
  if (!mentions.empty()) {
    EXPECT_CONTAINS(r.err, mentions);
  }
}

bool has_ansi(const std::string& s) { return s.find('\x1b') != std::string::npos; }

// The commands `mme help` lists (the first word of each line under "Commands:").
std::vector<std::string> listed_commands() {
  const RunResult r = run_mme({"help"});
  std::vector<std::string> out;
  std::istringstream in(r.out);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "Commands:") {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (line.empty()) break;
    std::istringstream words(line);
    std::string first;
    words >> first;
    out.push_back(first);
  }
  return out;
}

const json* find_by(const json& array, const char* key, const std::string& value) {
  for (const auto& x : array)
    if (x.value(key, "") == value) return &x;
  return nullptr;
}

std::string canonical_string(const fs::path& p) { return fs::weakly_canonical(p).string(); }

// A folder with the files a careless user might drop among plugins.
void write_corrupt_plugins(const fs::path& dir) {
  test::write_file(dir / "corrupt.so",
                   "This is not a shared library: it is a text file whose name happens to end in .so.\n");
  test::write_file(dir / "empty.so", "");
}

// ---------------------------------------------------------------------------------------
// version and help

TEST(Cli, VersionSpellingsAgree) {
  const std::string expected = fmt::format("mme {} (libmme {}, plugin API {}, ABI {})\n", MME_VERSION_STRING,
                                           library_version(), kPluginApiVersion, kAbiTag);
  for (const char* spelling : {"--version", "-V", "version"}) {
    const RunResult r = run_mme({spelling});
    EXPECT_EQ(r.exit_code, 0) << spelling << "\n" << describe(r);
    EXPECT_EQ(r.out, expected) << spelling;
    EXPECT_EQ(r.err, "") << spelling;
  }
}

TEST(Cli, VersionTakesNoArguments) { expect_usage_error(run_mme({"version", "extra"}), "version takes no arguments"); }

TEST(Cli, HelpListsEveryCommandAndTheExitCodes) {
  const RunResult r = run_mme({"help"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  EXPECT_CONTAINS(r.out, "Usage: mme <command>");
  EXPECT_CONTAINS(r.out, "Exit codes: 0 ok, 1 internal error, 2 usage");
  const auto listed = listed_commands();
  for (const char* required : {"estimate", "params", "models", "hardware", "plugins", "version", "help"})
    EXPECT_NE(std::find(listed.begin(), listed.end(), required), listed.end()) << required;
  for (const char* spelling : {"--help", "-h"}) {
    const RunResult s = run_mme({spelling});
    EXPECT_EQ(s.exit_code, 0) << spelling;
    EXPECT_EQ(s.out, r.out) << spelling;
    EXPECT_EQ(s.err, "") << spelling;
  }
}

TEST(Cli, NoArgumentsPrintsHelpOnStderrAndExitsTwo) {
  const RunResult r = run_mme({});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_CONTAINS(r.err, "Usage: mme <command>");
}

TEST(Cli, HelpEstimateDescribesTheLayoutFlags) {
  const RunResult r = run_mme({"help", "estimate"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  for (const char* flag :
       {"Usage: mme estimate MODEL", "--tp", "--pp", "--ep", "--etp", "--cp", "--vpp", "--num-gpus",
        "--micro-batch-size", "--seq-length", "--recompute-granularity", "--num-layers-in-last-pipeline-stage",
        "--json", "--gpu", "--headroom", "--plugin-dir", "--tensor-model-parallel-size"})
    EXPECT_CONTAINS(r.out, flag);
}

TEST(Cli, EveryCommandHasHelp) {
  const auto listed = listed_commands();
  ASSERT_GE(listed.size(), 7u);
  for (const auto& c : listed) {
    SCOPED_TRACE(c);
    const RunResult via_help = run_mme({"help", c});
    EXPECT_EQ(via_help.exit_code, 0) << describe(via_help);
    EXPECT_EQ(via_help.err, "");
    EXPECT_CONTAINS(via_help.out, "Usage: mme ");
    if (c != "help") {
      EXPECT_CONTAINS(via_help.out, "Usage: mme " + c);
    }
    for (const char* flag : {"--help", "-h"}) {
      const RunResult r = run_mme({c, flag});
      EXPECT_EQ(r.exit_code, 0) << flag << "\n" << describe(r);
      EXPECT_EQ(r.out, via_help.out) << flag;
      EXPECT_EQ(r.err, "") << flag;
    }
    // --help wins over anything else on the line, even a bad flag.
    const RunResult late = run_mme({c, "--no-such-flag", "--help"});
    EXPECT_EQ(late.exit_code, 0) << describe(late);
    EXPECT_EQ(late.out, via_help.out);
  }
}

// ---------------------------------------------------------------------------------------
// usage errors

TEST(Cli, UnknownCommandIsAUsageError) {
  expect_usage_error(run_mme({"frobnicate"}), "unknown command 'frobnicate'");
  expect_usage_error(run_mme({"--frobnicate"}), "unknown command '--frobnicate'");
  expect_usage_error(run_mme({"help", "frobnicate"}), "unknown command 'frobnicate'");
  expect_usage_error(run_mme({"help", "hardware", "plugins"}));
}

// A misspelt command or flag names the one meant (one or two edits away, ignoring case), as
// spec files do for their fields; a word far from every name gets no guess.
TEST(Cli, MisspeltCommandsAndFlagsSuggestTheNameMeant) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"estimat", "Qwen/Qwen3-8B"}, "mme: error: unknown command 'estimat'; did you mean 'estimate'?\n"},
      {{"plna"}, "mme: error: unknown command 'plna'; did you mean 'plan'?\n"},
      {{"Models"}, "mme: error: unknown command 'Models'; did you mean 'models'?\n"},
      {{"help", "hardwre"}, "mme: error: unknown command 'hardwre'; did you mean 'hardware'?\n"},
      {{"frobnicate"}, "mme: error: unknown command 'frobnicate' (see `mme help`)\n"},
      {{"--tp", "4"}, "mme: error: unknown command '--tp' (see `mme help`)\n"},  // a flag is no command
      {{"estimate", "Qwen/Qwen3-8B", "--tpp", "2"}, "mme: error: unknown option --tpp; did you mean --tp?\n"},
      // One dash, as the seed's users sometimes type it: the same name with two.
      {{"estimate", "Qwen/Qwen3-8B", "-tp", "2"}, "mme: error: unknown option -tp; did you mean --tp?\n"},
      {{"estimate", "Qwen/Qwen3-8B", "--num_gpus=8"},
       "mme: error: unknown option --num_gpus; did you mean --num-gpus?\n"},
      {{"estimate", "Qwen/Qwen3-8B", "--jsno"}, "mme: error: unknown option --jsno; did you mean --json?\n"},
      // A Megatron-LM spelling (a hidden alias) is suggested as well.
      {{"estimate", "Qwen/Qwen3-8B", "--tensor-model-parallel-siz", "2"},
       "mme: error: unknown option --tensor-model-parallel-siz; did you mean --tensor-model-parallel-size?\n"},
      {{"plan", "Qwen/Qwen3-8B", "--num-gpu", "8"}, "mme: error: unknown option --num-gpu; did you mean --num-gpus?\n"},
      {{"hardware", "--jason"}, "mme: error: unknown option --jason; did you mean --json?\n"},
      // A one-letter flag is close to every short name: no guess.
      {{"estimate", "Qwen/Qwen3-8B", "-x"}, "mme: error: unknown option -x (`mme help estimate` lists the options)\n"},
      {{"models", "--frobnicate"}, "mme: error: unknown option --frobnicate (`mme help models` lists the options)\n"},
  };
  for (const auto& [args, line] : cases) {
    SCOPED_TRACE(args.front() + " " + (args.size() > 1 ? args[1] : ""));
    const RunResult r = run_mme(args);
    expect_usage_error(r);
    EXPECT_EQ(r.err, line);
  }
}

TEST(Cli, UnknownFlagIsAUsageErrorForEveryCommand) {
  for (const auto& c : listed_commands()) {
    SCOPED_TRACE(c);
    expect_usage_error(run_mme({c, "--no-such-flag"}), "--no-such-flag");
  }
}

TEST(Cli, BadCommonOptionsAreUsageErrors) {
  expect_usage_error(run_mme({"hardware", "--log-level", "loud"}), "--log-level");
  expect_usage_error(run_mme({"hardware", "--plugin-dir"}), "plugin-dir");
  expect_usage_error(run_mme({"hardware", "unexpected-positional"}));
  expect_usage_error(run_mme({"plugins", "--js"}));  // no guessing of abbreviated flags
}

// ---------------------------------------------------------------------------------------
// hardware

TEST(Cli, HardwareJsonListsTheRequiredGpus) {
  const RunResult r = run_mme({"hardware", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  const json j = parse_stdout(r);
  ASSERT_TRUE(j.contains("hardware") && j["hardware"].is_array()) << r.out;
  const json& list = j["hardware"];
  const std::map<std::string, std::int64_t> required = {
      {"A100-SXM-40GB", 40960}, {"A100-SXM-80GB", 81920}, {"H100-SXM-80GB", 81559}, {"H200-SXM-141GB", 143771}};
  for (const auto& [name, mib] : required) {
    const json* h = find_by(list, "name", name);
    ASSERT_NE(h, nullptr) << name;
    EXPECT_EQ((*h)["memory_bytes"].get<std::int64_t>(), mib * 1024 * 1024) << name;
    EXPECT_EQ((*h)["allocatable_bytes"].get<std::int64_t>(),
              (*h)["memory_bytes"].get<std::int64_t>() - (*h)["reserved_bytes"].get<std::int64_t>());
    EXPECT_EQ((*h)["vendor"], "NVIDIA");
    EXPECT_GT((*h)["hbm_bandwidth_gbps"].get<double>(), 0);
    EXPECT_GT((*h)["bf16_tflops"].get<double>(), 0);
    EXPECT_FALSE((*h)["plugin"].get<std::string>().empty());
    EXPECT_FALSE((*h)["source"].get<std::string>().empty());
  }
  const auto aliases = (*find_by(list, "name", "H100-SXM-80GB"))["aliases"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(aliases.begin(), aliases.end(), "H100"), aliases.end());
  // Sorted by capacity.
  std::int64_t last = 0;
  for (const auto& h : list) {
    EXPECT_GE(h["memory_bytes"].get<std::int64_t>(), last) << h["name"];
    last = h["memory_bytes"].get<std::int64_t>();
  }
}

TEST(Cli, HardwareTextTable) {
  const RunResult r = run_mme({"hardware"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.rfind("NAME", 0), 0u) << r.out;
  for (const char* name : {"A100-SXM-40GB", "A100-SXM-80GB", "H100-SXM-80GB", "H200-SXM-141GB"})
    EXPECT_CONTAINS(r.out, name);
  EXPECT_CONTAINS(r.out, "140.40 GiB");  // H200: 143771 MiB, labelled in binary units
}

// ---------------------------------------------------------------------------------------
// plugins

TEST(Cli, PluginsJsonListsWhatEachPluginRegistered) {
  const RunResult r = run_mme({"plugins", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  const json j = parse_stdout(r);
  EXPECT_EQ(j["api_version"], kPluginApiVersion);
  EXPECT_EQ(j["abi_tag"], std::string(kAbiTag));
  ASSERT_TRUE(j["search_path"].is_array() && !j["search_path"].empty());
  EXPECT_EQ(canonical_string(j["search_path"].back().get<std::string>()), canonical_string(test::plugin_dir()));
  // Every shipped plugin loads.
  EXPECT_TRUE(j["rejected"].empty()) << j["rejected"].dump(2);

  const json& plugins = j["plugins"];
  const std::string stage = canonical_string(test::plugin_dir());
  for (const auto& p : plugins) {
    EXPECT_EQ(canonical_string(fs::path(p["path"].get<std::string>()).parent_path()), stage) << p["name"];
    EXPECT_FALSE(p["version"].get<std::string>().empty()) << p["name"];
    for (const char* key : {"adapters", "layer_models", "hardware"}) EXPECT_TRUE(p[key].is_array()) << p["name"];
  }
  const std::map<std::string, std::vector<std::string>> hardware = {
      {"hw_nvidia_ampere", {"A100-SXM-40GB", "A100-SXM-80GB"}},
      {"hw_nvidia_hopper", {"H100-SXM-80GB", "H200-SXM-141GB"}},
  };
  for (const auto& [name, gpus] : hardware) {
    const json* p = find_by(plugins, "name", name);
    ASSERT_NE(p, nullptr) << name;
    const auto listed = (*p)["hardware"].get<std::vector<std::string>>();
    for (const auto& g : gpus) EXPECT_NE(std::find(listed.begin(), listed.end(), g), listed.end()) << name << " " << g;
  }
  for (const auto& [name, kind] : std::map<std::string, std::string>{
           {"layer_gqa", "gqa"}, {"layer_mla", "mla"}, {"layer_dense_mlp", "dense"}, {"layer_moe", "moe"}}) {
    const json* p = find_by(plugins, "name", name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ((*p)["layer_models"], json::array({kind})) << name;
  }

  // The hardware listing agrees with what the plugins say they registered.
  const json hw = parse_stdout(run_mme({"hardware", "--json"}));
  std::set<std::string> from_plugins, from_hardware;
  for (const auto& p : plugins)
    for (const auto& g : p["hardware"]) from_plugins.insert(p["name"].get<std::string>() + "/" + g.get<std::string>());
  for (const auto& h : hw["hardware"])
    from_hardware.insert(h["plugin"].get<std::string>() + "/" + h["name"].get<std::string>());
  EXPECT_EQ(from_plugins, from_hardware);
}

TEST(Cli, PluginsText) {
  const RunResult r = run_mme({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  EXPECT_CONTAINS(r.out, fmt::format("Plugin API {}", kPluginApiVersion));
  EXPECT_CONTAINS(r.out, "Search path:");
  EXPECT_CONTAINS(r.out, "Loaded (");
  EXPECT_CONTAINS(r.out, "hw_nvidia_hopper");
  EXPECT_EQ(r.out.find("Rejected"), std::string::npos);
}

TEST(Cli, CorruptPluginFileIsAWarningNotACrash) {
  test::TempDir dir;
  write_corrupt_plugins(dir.path());
  const RunResult r = run_mme({"plugins", "--json", "--plugin-dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json j = parse_stdout(r);
  EXPECT_EQ(canonical_string(j["search_path"].front().get<std::string>()), canonical_string(dir.path()));
  ASSERT_EQ(j["rejected"].size(), 2u) << j["rejected"].dump(2);
  for (const char* file : {"corrupt.so", "empty.so"}) {
    const json* x = find_by(j["rejected"], "path", canonical_string(dir.path() / file));
    ASSERT_NE(x, nullptr) << file << "\n" << j["rejected"].dump(2);
    EXPECT_CONTAINS((*x)["reason"].get<std::string>(), "not a loadable library");
    // One warning line on stderr per rejected file, naming it.
    EXPECT_CONTAINS(r.err, fmt::format("mme: warning: plugin {} rejected: not a loadable library",
                                       canonical_string(dir.path() / file)));
  }
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
  // The real plugins still load.
  EXPECT_NE(find_by(j["plugins"], "name", "hw_nvidia_hopper"), nullptr);

  const RunResult hw = run_mme({"hardware", "--json", "--plugin-dir", dir.path().string()});
  ASSERT_EQ(hw.exit_code, 0) << describe(hw);
  EXPECT_NE(find_by(parse_stdout(hw)["hardware"], "name", "H200-SXM-141GB"), nullptr);
  EXPECT_CONTAINS(hw.err, "corrupt.so");
  // -q silences the warnings; the result is the same.
  const RunResult quiet = run_mme({"hardware", "--json", "-q", "--plugin-dir", dir.path().string()});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(quiet.out, hw.out);
}

TEST(Cli, MissingPluginFolderIsAWarning) {
  test::TempDir dir;
  const fs::path missing = dir.path() / "no-such-folder";
  const RunResult r = run_mme({"hardware", "--json", "--plugin-dir", missing.string()});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_CONTAINS(r.err, "mme: warning: ");
  EXPECT_CONTAINS(r.err, missing.string());
  EXPECT_NE(find_by(parse_stdout(r)["hardware"], "name", "H100-SXM-80GB"), nullptr);
}

TEST(Cli, BytesThatAreNotUtf8InAPathStillGiveValidJson) {
  // A folder name is bytes; --json writes it with U+FFFD where it is not UTF-8, never an
  // internal error (found by the cli_args fuzzer, docs/reliability.md).
  const std::string odd = "\xff\xfe-no-such-folder";
  const RunResult r = run_mme({"plugins", "--json", "--plugin-dir", odd});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto j = parse_stdout(r);
  bool listed = false;
  for (const auto& d : j["search_path"]) listed |= d.get<std::string>() == "\xEF\xBF\xBD\xEF\xBF\xBD-no-such-folder";
  EXPECT_TRUE(listed) << r.out;
  const RunResult e = run_mme({"estimate", "meta-llama/Meta-Llama-3-8B", "--json", "--plugin-dir", odd});
  ASSERT_EQ(e.exit_code, 0) << describe(e);
  EXPECT_TRUE(parse_stdout(e).contains("stages"));
}

TEST(Cli, PluginPathEnvironmentVariableIsSearchedAfterPluginDir) {
  test::TempDir cli_dir, env_one, env_two;
  const fs::path ampere = test::plugin_dir() / "mme_hw_nvidia_ampere.so";
  ASSERT_TRUE(fs::is_regular_file(ampere)) << ampere;
  fs::copy_file(ampere, env_one.path() / "mme_hw_nvidia_ampere.so");
  write_corrupt_plugins(env_two.path());
  const std::string env = env_one.path().string() + ":" + env_two.path().string();

  const RunResult r =
      run_mme({"plugins", "--json", "--plugin-dir", cli_dir.path().string()}, {{"MME_PLUGIN_PATH", env}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json j = parse_stdout(r);
  std::vector<std::string> search;
  for (const auto& d : j["search_path"]) search.push_back(canonical_string(d.get<std::string>()));
  EXPECT_EQ(search, (std::vector<std::string>{canonical_string(cli_dir.path()), canonical_string(env_one.path()),
                                              canonical_string(env_two.path()), canonical_string(test::plugin_dir())}));
  // The copy on MME_PLUGIN_PATH is found before the one beside the executable.
  const json* p = find_by(j["plugins"], "name", "hw_nvidia_ampere");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ((*p)["path"], canonical_string(env_one.path() / "mme_hw_nvidia_ampere.so"));
  const json* dup = find_by(j["rejected"], "path", canonical_string(ampere));
  ASSERT_NE(dup, nullptr) << j["rejected"].dump(2);
  EXPECT_CONTAINS((*dup)["reason"].get<std::string>(), "already loaded from");
  // The corrupt files on the environment path are rejected; the rest loads.
  EXPECT_NE(find_by(j["rejected"], "path", canonical_string(env_two.path() / "corrupt.so")), nullptr);
  EXPECT_NE(find_by(j["plugins"], "name", "hw_nvidia_hopper"), nullptr);
  EXPECT_CONTAINS(r.err, "corrupt.so");

  // --plugin-dir comes first: a copy there beats the one on MME_PLUGIN_PATH.
  fs::copy_file(ampere, cli_dir.path() / "mme_hw_nvidia_ampere.so");
  const json k =
      parse_stdout(run_mme({"plugins", "--json", "--plugin-dir", cli_dir.path().string()}, {{"MME_PLUGIN_PATH", env}}));
  ASSERT_NE(find_by(k["plugins"], "name", "hw_nvidia_ampere"), nullptr);
  EXPECT_EQ((*find_by(k["plugins"], "name", "hw_nvidia_ampere"))["path"],
            canonical_string(cli_dir.path() / "mme_hw_nvidia_ampere.so"));
}

// ---------------------------------------------------------------------------------------
// output contract

TEST(Cli, LogsGoToStderrAndStdoutHoldsOneJsonDocument) {
  test::TempDir dir;
  write_corrupt_plugins(dir.path());
  for (const char* cmd : {"hardware", "plugins"}) {
    SCOPED_TRACE(cmd);
    const RunResult r = run_mme({cmd, "--json", "--log-level", "debug", "--plugin-dir", dir.path().string()});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_CONTAINS(r.err, "mme: debug: ");  // debug lines: on stderr
    EXPECT_CONTAINS(r.err, "mme: warning: ");
    EXPECT_EQ(r.out.find("mme: "), std::string::npos) << r.out;
    const json j = parse_stdout(r);
    EXPECT_TRUE(j.is_object());
    ASSERT_FALSE(r.out.empty());
    EXPECT_EQ(r.out.back(), '\n');
  }
}

TEST(Cli, NoAnsiEscapesWhenNotATerminal) {
  test::TempDir dir;
  write_corrupt_plugins(dir.path());
  const std::vector<std::vector<std::string>> runs = {
      {"help"},    {"--version"},        {"hardware"},   {"hardware", "--json"},
      {"plugins"}, {"help", "estimate"}, {"frobnicate"}, {"plugins", "--plugin-dir", dir.path().string()}};
  for (const char* no_color : {"", "1"}) {  // "" removes NO_COLOR from the environment
    for (const auto& args : runs) {
      const RunResult r = run_mme(args, {{"NO_COLOR", no_color}, {"TERM", "xterm-256color"}});
      EXPECT_FALSE(has_ansi(r.out)) << args.front() << " NO_COLOR=" << no_color << "\n" << describe(r);
      EXPECT_FALSE(has_ansi(r.err)) << args.front() << " NO_COLOR=" << no_color << "\n" << describe(r);
    }
  }
}

using test::run_on_terminal;

TEST(Cli, NoColorIsHonouredOnATerminal) {
  test::TempDir dir;
  write_corrupt_plugins(dir.path());
  const std::vector<std::string> args = {"plugins", "--plugin-dir", dir.path().string()};
  const RunResult plain = run_on_terminal(args, {{"NO_COLOR", "1"}, {"TERM", "xterm-256color"}});
  if (plain.exit_code == -1) GTEST_SKIP() << "no pseudo-terminal available";
  EXPECT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_CONTAINS(plain.out, "rejected: not a loadable library");
  EXPECT_FALSE(has_ansi(plain.out)) << plain.out;
  // The control: on a colour terminal without NO_COLOR the warnings are coloured, so the
  // check above can fail.
  const RunResult coloured = run_on_terminal(args, {{"NO_COLOR", ""}, {"TERM", "xterm-256color"}});
  EXPECT_EQ(coloured.exit_code, 0) << coloured.out;
  EXPECT_TRUE(has_ansi(coloured.out)) << coloured.out;
}

// The error line is coloured as the warnings are (spdlog's colour of its error level, on the
// level name only), under the same rule: a colour terminal and NO_COLOR unset or empty.
TEST(Cli, ErrorLinesAreColouredLikeWarningsOnATerminal) {
  const std::vector<std::string> args = {"frobnicate"};
  const RunResult coloured = run_on_terminal(args, {{"NO_COLOR", ""}, {"TERM", "xterm-256color"}});
  if (coloured.exit_code == -1) GTEST_SKIP() << "no pseudo-terminal available";
  EXPECT_EQ(coloured.exit_code, 2);
  // The terminal turns "\n" into "\r\n".
  EXPECT_EQ(coloured.out, "mme: \x1b[31m\x1b[1merror\x1b[m: unknown command 'frobnicate' (see `mme help`)\r\n");
  const RunResult empty_no_color = run_on_terminal(args, {{"NO_COLOR", "  "}, {"TERM", "xterm"}});
  EXPECT_FALSE(has_ansi(empty_no_color.out)) << empty_no_color.out;  // set, not empty: no colour
  for (const auto& env : std::vector<std::map<std::string, std::string>>{
           {{"NO_COLOR", "1"}, {"TERM", "xterm-256color"}},             // NO_COLOR
           {{"NO_COLOR", ""}, {"TERM", "dumb"}, {"COLORTERM", ""}}}) {  // a terminal without colour
    const RunResult plain = run_on_terminal(args, env);
    EXPECT_EQ(plain.exit_code, 2);
    EXPECT_EQ(plain.out, "mme: error: unknown command 'frobnicate' (see `mme help`)\r\n");
  }
  // A warning and the error of one run are coloured alike.
  test::TempDir dir;
  write_corrupt_plugins(dir.path());
  const RunResult both = run_on_terminal({"params", "nobody-org/no-such-model", "--plugin-dir", dir.path().string()},
                                         {{"NO_COLOR", ""}, {"TERM", "xterm"}, {"HF_HUB_OFFLINE", "1"}});
  EXPECT_EQ(both.exit_code, 6) << both.out;
  EXPECT_CONTAINS(both.out, "mme: \x1b[33m\x1b[1mwarning\x1b[m: ");
  EXPECT_CONTAINS(both.out, "mme: \x1b[31m\x1b[1merror\x1b[m: ");
}

// ---------------------------------------------------------------------------------------
// Where the model and the GPU come from: one lookup for estimate, plan and init
// (cli/estimate_inputs.hpp, mme/inputs/gpu_lookup.hpp), so the same name gets the same answer.

TEST(Cli, AnUnknownGpuIsTheSameUsageErrorInEveryCommand) {
  const RunResult hardware = run_mme({"hardware", "--json"});
  ASSERT_EQ(hardware.exit_code, 0) << describe(hardware);
  std::string known;
  const nlohmann::json listed = parse_stdout(hardware);  // kept: the loop below iterates inside it
  for (const auto& h : listed["hardware"]) known += (known.empty() ? "" : ", ") + h["name"].get<std::string>();
  // `mme hardware` lists the profiles smallest first; the message names them as loaded. Same
  // set, whatever the order.
  const std::vector<std::vector<std::string>> runs = {
      {"estimate", "Qwen/Qwen3-8B", "--gpu", "Z900"},
      {"compare", "Qwen/Qwen3-8B", "--tp", "1,2", "--gpu", "Z900"},
      {"plan", "Qwen/Qwen3-8B", "--num-gpus", "8", "--gpu", "Z900"},
      {"init", "Qwen/Qwen3-8B", "--gpu", "Z900"},
      {"init", "--gpu", "Z900"},
  };
  std::string first;
  for (const auto& args : runs) {
    SCOPED_TRACE(args.front());
    const RunResult r = run_mme(args);
    expect_usage_error(r, "--gpu: unknown GPU 'Z900' (known: ");
    for (const auto& h : listed["hardware"]) EXPECT_CONTAINS(r.err, h["name"].get<std::string>());
    if (first.empty()) first = r.err;
    EXPECT_EQ(r.err, first);
  }
}

TEST(Cli, AGpuOfAHardwareFileIsFoundByEveryCommand) {
  // init had no --hardware-file: a GPU that estimate and plan took from a JSON file was
  // unknown to init, whose spec file then named no GPU. Now all three read the same profiles.
  test::TempDir dir;
  const fs::path lab = dir.path() / "lab.json";
  test::write_file(lab, R"({"name": "Lab-GPU-24GB", "memory_gib": 24, "aliases": ["lab"]})");
  const RunResult init = run_mme({"init", "Qwen/Qwen3-0.6B", "--hardware-file", lab.string(), "--gpu", "lab"});
  ASSERT_EQ(init.exit_code, 0) << describe(init);
  EXPECT_CONTAINS(init.out, "gpu: Lab-GPU-24GB");
  const fs::path spec = dir.path() / "spec.yaml";
  test::write_file(spec, init.out);
  const RunResult est = run_mme({"estimate", "--config", spec.string(), "--hardware-file", lab.string(), "--json"});
  ASSERT_EQ(est.exit_code, 0) << describe(est);
  const json j = parse_stdout(est);
  ASSERT_EQ(j["fits"].size(), 1u);
  EXPECT_EQ(j["fits"][0]["hardware"], "Lab-GPU-24GB");
  const RunResult plan = run_mme({"plan", "Qwen/Qwen3-0.6B", "--num-gpus", "8", "--hardware-file", lab.string(),
                                  "--gpu", "lab", "--json", "--top", "1"});
  ASSERT_EQ(plan.exit_code, 0) << describe(plan);
  EXPECT_EQ(parse_stdout(plan)["gpu"], "Lab-GPU-24GB");
  // Without the file the name is unknown to each, with the same message.
  expect_usage_error(run_mme({"init", "Qwen/Qwen3-0.6B", "--gpu", "lab"}), "--gpu: unknown GPU 'lab' (known: ");
}

TEST(Cli, EachCommandNamesTheModelSourcesItTakes) {
  expect_usage_error(run_mme({"estimate"}),
                     "estimate needs a MODEL (a hub id, a config.json or a folder), --megatron-args or --config");
  expect_usage_error(run_mme({"plan", "--num-gpus", "8"}), "plan needs a MODEL (a hub id, a config.json or a folder)");
  EXPECT_EQ(run_mme({"plan", "--num-gpus", "8"}).err,
            "mme: error: plan needs a MODEL (a hub id, a config.json or a folder)\n");
  // plan checks the model first, before its own flags.
  expect_usage_error(run_mme({"plan"}), "plan needs a MODEL");
  // init's example model stands in for a missing MODEL; its setup has the seed's defaults as
  // estimate's has (ETP 1, 8 GPUs).
  const RunResult example = run_mme({"init", "--tp", "2"});
  ASSERT_EQ(example.exit_code, 0) << describe(example);
  EXPECT_CONTAINS(example.out, "world_size: 8");
  EXPECT_CONTAINS(example.out, "expert_tensor_parallel_size: 1");
}

// ---------------------------------------------------------------------------------------
// Shell completion and man pages (the scripts are tested in their shells by
// completion_bash_test.sh and completion_shell_test.sh, the pages by man_pages_test.sh).

TEST(Cli, CompletionTakesOneKnownShell) {
  expect_usage_error(run_mme({"completion"}), "completion takes one shell: bash, zsh or fish");
  expect_usage_error(run_mme({"completion", "bash", "zsh"}), "completion takes one shell");
  expect_usage_error(run_mme({"completion", "tcsh"}), "completion: unknown shell 'tcsh' (bash, zsh, fish)");
  for (const char* shell : {"bash", "zsh", "fish"}) {
    const RunResult r = run_mme({"completion", shell});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.err, "");
    // Every command, and an enum knob's values from the setup schema.
    for (const char* word : {"estimate", "validate", "completion", "recompute-granularity", "full selective"})
      EXPECT_CONTAINS(r.out, word);
  }
}

TEST(Cli, ManPagesComeFromTheHelpAndTheOptionTables) {
  const RunResult page = run_mme({"help", "--man", "estimate"});
  ASSERT_EQ(page.exit_code, 0) << describe(page);
  EXPECT_EQ(page.err, "");
  EXPECT_CONTAINS(page.out, "\n.TH MME-ESTIMATE 1 \"\" \"mme ");
  EXPECT_CONTAINS(page.out, "\n.SH NAME\nmme\\-estimate \\- per\\-GPU memory of a training layout");
  EXPECT_CONTAINS(page.out, "\n.SH SYNOPSIS\nmme estimate MODEL [options]\n.SH DESCRIPTION\n");
  const RunResult validate = run_mme({"help", "--man", "validate"});
  EXPECT_CONTAINS(validate.out, "\n.SH SYNOPSIS\nmme validate CASES.csv");  // two usage lines
  EXPECT_CONTAINS(validate.out, "\n.br\nmme validate \\-\\-from\\-log LOG");
  // Every visible flag of the help text is an entry of OPTIONS, with its value name.
  const RunResult help = run_mme({"help", "estimate"});
  for (const char* flag : {"json", "config", "tp", "recompute-granularity", "plugin-dir", "hardware-file"}) {
    std::string escaped;
    for (char c : std::string(flag)) escaped += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_CONTAINS(help.out, std::string("--") + flag);
    EXPECT_CONTAINS(page.out, "\n.TP\n\\fB\\-\\-" + escaped + "\\fR");
  }
  EXPECT_CONTAINS(page.out, "\\fB\\-\\-recompute\\-granularity\\fR \\fIG\\fR\n");
  EXPECT_CONTAINS(page.out, "\\fB\\-q\\fR, \\fB\\-\\-quiet\\fR");
  EXPECT_CONTAINS(page.out, "\n.SS \"Common options\"\n");
  // The top page lists every command.
  const RunResult top = run_mme({"help", "--man"});
  ASSERT_EQ(top.exit_code, 0) << describe(top);
  EXPECT_CONTAINS(top.out, ".TH MME 1 ");
  for (const char* c : {"estimate", "plan", "completion", "help"})
    EXPECT_CONTAINS(top.out, std::string("\n.TP\n.B ") + c + "\n");
  expect_usage_error(run_mme({"help", "--man", "estimat"}), "unknown command 'estimat'; did you mean 'estimate'?");
  expect_usage_error(run_mme({"help", "--mann"}), "unknown option --mann; did you mean --man?");
}

// 120,000 arguments (issue 31: Boost's parser takes each off the front of a vector, 25 s for
// these): refused at once, before the parser, for every command that parses flags.
TEST(Cli, ManyArgumentsAreOneUsageError) {
  std::vector<std::string> args{"estimate", "Qwen/Qwen3-0.6B"};
  for (int i = 0; i < 60000; ++i) args.insert(args.end(), {"--tp", "1"});
  expect_usage_error(run_mme(args), "120001 arguments; mme estimate takes at most 4096");
  args[0] = "compare";
  expect_usage_error(run_mme(args), "arguments; mme compare takes at most 4096");
}

}  // namespace
}  // namespace mme
