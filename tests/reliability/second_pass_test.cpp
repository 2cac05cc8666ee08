// Issue 20, "what an adversarial tester broke": each test below failed before its fix. Report
// files that are devices, FIFOs and symlinks (made in a temp folder, never in /dev), interrupted
// reports, the linear-time validate filters, invalid measured rows, files that are not regular,
// escape sequences from input, `-v`, `mme init` with odd paths, a plugin that needs a missing
// symbol. docs/reliability.md lists the classes.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mme {
namespace {

namespace fs = std::filesystem;
using test::run_mme;

const char* const kModel = "meta-llama/Meta-Llama-3-8B";

const char* const kLlama = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
  "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
  "tie_word_embeddings": false, "hidden_act": "silu"})";

const std::string kTiny =
    "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 4096 "
    "--micro-batch-size 1 --vocab-size 1000 --tokenizer-type NullTokenizer";

const std::string kCasesHeader =
    "model,test_case,golden,max_alloc_GiB_max,alloc_GiB_median,nodes_gpus,num-layers,hidden-size,"
    "num-attention-heads,seq-length,max-position-embeddings,micro-batch-size,vocab-size,tokenizer-type\n";
std::string case_row(const std::string& name, const std::string& peak, const std::string& nodes_gpus = "dgx_h100:1x8") {
  return "gpt," + name + ",dgx_h100," + peak + ",1.5," + nodes_gpus + ",4,256,8,1024,4096,1,1000,NullTokenizer\n";
}

bool lstat_is_char_device(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}
bool lstat_is_fifo(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}
// A character device like /dev/null (1, 3) or /dev/zero (1, 5), made in the test's own folder.
bool make_char_device(const fs::path& p, unsigned minor) {
  return ::mknod(p.c_str(), S_IFCHR | 0666, ::makedev(1, minor)) == 0;
}

std::vector<std::string> temp_files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) out.push_back(e.path().filename().string());
  return out;
}

void expect_one_error_line(const test::RunResult& r, int code, const std::string& part) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_EQ(r.err.rfind("mme: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(part), std::string::npos) << "expected: " << part << "\ngot: " << r.err;
}

// ---------------------------------------------------------------------------------------------
// 1. Report targets that are not regular files.

TEST(ReportTargets, ACharacterDeviceStaysADevice) {
  test::TempDir dir;
  const fs::path node = dir.path() / "n";
  if (!make_char_device(node, 3)) GTEST_SKIP() << "mknod needs root";
  const auto r = run_mme({"estimate", kModel, "--html", node.string(), "--svg", (dir.path() / "x.svg").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(lstat_is_char_device(node)) << "the device node was replaced";
  EXPECT_TRUE(temp_files_in(dir.path()).empty());
}

TEST(ReportTargets, ASymlinkToADeviceSurvives) {
  // Like /dev/stdout, which as root was once replaced by an HTML file.
  test::TempDir dir;
  const fs::path node = dir.path() / "null";
  if (!make_char_device(node, 3)) GTEST_SKIP() << "mknod needs root";
  const fs::path link = dir.path() / "stdout";
  fs::create_symlink(node, link);
  const auto r = run_mme({"estimate", kModel, "--html", link.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link)) << "the symlink was replaced";
  EXPECT_TRUE(lstat_is_char_device(node));
}

TEST(ReportTargets, AFifoIsWrittenThrough) {
  test::TempDir dir;
  const fs::path fifo = dir.path() / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const fs::path link = dir.path() / "link";
  fs::create_symlink(fifo, link);
  std::string got;
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    if (fd < 0) return;
    char buf[65536];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
  });
  const auto r = run_mme({"estimate", kModel, "--svg", link.string()});
  // Whatever happened, let the reader finish: a writer that opens and closes ends its read.
  const int unblock = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  if (unblock >= 0) ::close(unblock);
  reader.join();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(got.find("</svg>"), std::string::npos) << got.substr(0, 200);
  EXPECT_TRUE(lstat_is_fifo(fifo));
  EXPECT_TRUE(fs::is_symlink(link));
}

TEST(ReportTargets, ASymlinkToARegularFileHasItsTargetReplaced) {
  test::TempDir dir;
  const fs::path real = dir.path() / "real.html", link = dir.path() / "link.html";
  test::write_file(real, "old\n");
  fs::create_symlink(real, link);
  const auto r = run_mme({"estimate", kModel, "--html", link.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_NE(test::read_file(real).find("<html"), std::string::npos);
  EXPECT_TRUE(temp_files_in(dir.path()).empty());
}

TEST(ReportTargets, DashIsStandardOutput) {
  const auto r = run_mme({"estimate", kModel, "--svg", "-", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("</svg>"), std::string::npos);
}

TEST(ReportTargets, OneFileUnderTwoNamesIsRefused) {
  test::TempDir dir;
  const fs::path a = dir.path() / "a.html", link = dir.path() / "b.svg";
  test::write_file(a, "old\n");
  fs::create_symlink(a, link);
  expect_one_error_line(run_mme({"estimate", kModel, "--html", a.string(), "--svg", link.string()}), 2,
                        "--html and --svg name the same file");
  EXPECT_EQ(test::read_file(a), "old\n");
}

// 12. An interrupted plan --html leaves no temporary file.
void interrupt_plan(int sig) {
  test::TempDir dir;
  const fs::path html = dir.path() / "plan.html";
  const std::string exe = test::mme_exe().string();
  std::vector<std::string> args = {exe,      "plan",       "deepseek-ai/DeepSeek-V3", "--num-gpus", "65536",
                                   "--html", html.string()};
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY);  // read-only use of the system's /dev/null
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::setenv("HF_HUB_OFFLINE", "1", 1);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  // Wait until the temporary file exists (the search runs after it is made), then interrupt.
  bool seen = false;
  for (int i = 0; i < 2000 && !seen; ++i) {
    seen = !temp_files_in(dir.path()).empty();
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, sig);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(seen) << "the plan never made its temporary file";
  if (WIFEXITED(status)) GTEST_SKIP() << "the plan finished before the signal";
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), sig);
  EXPECT_TRUE(temp_files_in(dir.path()).empty()) << temp_files_in(dir.path()).front();
  EXPECT_FALSE(fs::exists(html));
}

TEST(ReportTargets, SigintRemovesTheTemporaryFile) { interrupt_plan(SIGINT); }
TEST(ReportTargets, SigtermRemovesTheTemporaryFile) { interrupt_plan(SIGTERM); }

// ---------------------------------------------------------------------------------------------
// 4. validate --golden / --case match in linear time, and keep their meaning.

TEST(ValidateFilters, ABacktrackingPatternOnALongFieldIsFast) {
  test::TempDir dir;
  const fs::path csv = dir.path() / "cases.csv";
  test::write_file(csv, kCasesHeader + case_row(std::string(100000, 'a'), "2.5") + case_row("tiny", "2.5"));
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_mme({"validate", csv.string(), "--case", "(.)*$", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto r2 = run_mme({"validate", csv.string(), "--case", "(\\w+)+!", "--json"});
  EXPECT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(nlohmann::json::parse(r.out)["cases"].size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(r2.out)["cases"].size(), 0u);
}

TEST(ValidateFilters, TheProjectCsvAgainstNestedRepeats) {
  const auto start = std::chrono::steady_clock::now();
  const auto r =
      run_mme({"validate", (test::source_dir() / "bench/accuracy/megatron_functional_test_memory.csv").string(),
               "--case", "(\\w+)+!", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(ValidateFilters, SubstringsAnchorsAlternativesAndClasses) {
  test::TempDir dir;
  const fs::path csv = dir.path() / "cases.csv";
  test::write_file(csv, kCasesHeader + case_row("gpt3_tp2_pp2", "2.5") + case_row("gpt3_tp1_pp4", "2.5") +
                            case_row("moe_tp2", "2.5"));
  auto count = [&](const std::string& pattern) {
    const auto r = run_mme({"validate", csv.string(), "--case", pattern, "--json"});
    EXPECT_EQ(r.exit_code, 0) << pattern << ": " << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["cases"].size() : 99u;
  };
  EXPECT_EQ(count("tp2"), 2u);
  EXPECT_EQ(count("^gpt3"), 2u);
  EXPECT_EQ(count("tp2$"), 1u);
  EXPECT_EQ(count("pp4|^moe"), 2u);
  EXPECT_EQ(count("tp[12]_pp[0-9]"), 2u);
  EXPECT_EQ(count("^gpt3_tp\\d_pp2$"), 1u);
  EXPECT_EQ(count("(?:tp2_){1}pp"), 1u);
  EXPECT_EQ(count("gpt3.*pp4"), 1u);
  EXPECT_EQ(count("x?y*moe_tp2+"), 1u);
}

// 9. Invalid measurements are errors of the row, never counted.
TEST(ValidateRows, InvalidMeasurementsAreRowErrors) {
  test::TempDir dir;
  const fs::path csv = dir.path() / "cases.csv";
  test::write_file(csv, kCasesHeader + case_row("good", "2.5") + case_row("nan", "nan") + case_row("zero", "0") +
                            case_row("negative", "-1") + case_row("inf", "1e999") +
                            case_row("overflow", "2.5", "dgx_h100:4611686018427387906x4"));
  const auto r = run_mme({"validate", csv.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, std::string> status;
  for (const auto& c : j["cases"]) status[c["test_case"]] = c["status"];
  EXPECT_EQ(status["good"], "ok");
  // Since issue 32 such rows are "refused" (counted as such in the summary), not "error".
  for (const char* bad : {"nan", "zero", "negative", "inf", "overflow"}) EXPECT_EQ(status[bad], "refused") << bad;
  EXPECT_EQ(j["summary"]["peak"]["count"], 1);
  for (const auto& c : j["cases"]) {
    if (c["test_case"] == "overflow") {
      EXPECT_NE(c["reason"].get<std::string>().find("is not a launch size"), std::string::npos);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 8. Inputs that are not regular files: one clear error, no hang, no unbounded read.

TEST(InputFiles, DevicesAndFifosAreRefused) {
  test::TempDir dir;
  const fs::path special = dir.path() / "zero";
  if (!make_char_device(special, 5)) {
    ASSERT_EQ(::mkfifo(special.c_str(), 0600), 0);
  }
  expect_one_error_line(run_mme({"estimate", "--megatron-args-file", special.string()}), 6, "not a regular file");
  expect_one_error_line(run_mme({"validate", special.string()}), 6, "not a regular file");
  expect_one_error_line(run_mme({"validate", "--from-log", special.string(), "--megatron-args", kTiny}), 6,
                        "not a regular file");
  expect_one_error_line(run_mme({"estimate", "--config", special.string()}), 6, "not a regular file");
}

// ---------------------------------------------------------------------------------------------
// 7. No escape sequence from input reaches the terminal.

bool has_control(const std::string& s) {
  for (unsigned char c : s)
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
  return false;
}

TEST(Printable, ConfigStringsAreSanitised) {
  test::TempDir dir;
  std::string cfg = kLlama;
  cfg.replace(cfg.find("\"llama\""), 7, "\"llama\\u001b]0;owned\\u0007\\u001b[2J\"");
  test::write_file(dir.path() / "config.json", cfg);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"params", (dir.path() / "config.json").string()},
        std::vector<std::string>{"estimate", (dir.path() / "config.json").string(), "--verbose", "--gpu", "H100"}}) {
    const auto r = run_mme(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(has_control(r.out)) << r.out;
    EXPECT_FALSE(has_control(r.err)) << r.err;
  }
}

TEST(Printable, HardwareFileStringsAreSanitised) {
  test::TempDir dir;
  test::write_file(dir.path() / "evil.json", R"({"name": "Evil\u001b[31m", "memory_gib": 80})");
  test::write_file(dir.path() / "hw.json",
                   R"({"name": "Fine-80GB", "memory_gib": 80, "vendor": "V\u001b]0;x\u0007", "source": "\u009b2J"})");
  const auto r = run_mme({"hardware", "--hardware-file", (dir.path() / "hw.json").string(), "--hardware-file",
                          (dir.path() / "evil.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Fine-80GB"), std::string::npos);
  EXPECT_FALSE(has_control(r.out)) << r.out;
  EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos);
  EXPECT_FALSE(has_control(r.err)) << r.err;
  EXPECT_NE(r.err.find("must not contain control characters"), std::string::npos) << r.err;
  const auto e =
      run_mme({"estimate", kModel, "--hardware-file", (dir.path() / "hw.json").string(), "--gpu", "Fine-80GB"});
  EXPECT_EQ(e.exit_code, 0) << e.err;
  EXPECT_FALSE(has_control(e.out)) << e.out;
}

TEST(Printable, ErrorLinesAreSanitised) {
  const auto r = run_mme({"estimate", "./no\x1b]0;owned\x07such/config.json"});
  EXPECT_EQ(r.exit_code, 6);
  EXPECT_FALSE(has_control(r.err)) << r.err;
}

TEST(Printable, SpecFileNamesAreSanitised) {
  test::TempDir dir;
  test::write_file(dir.path() / "s.yaml",
                   "model:\n  name: \"evil\\e[2J\"\n  num_layers: 2\n  hidden_size: 256\n  num_attention_heads: 8\n"
                   "  ffn_hidden_size: 1024\n  vocab_size: 1000\n  max_position_embeddings: 4096\nparallelism:\n  "
                   "tensor_model_parallel_size: 1\n"
                   "  pipeline_model_parallel_size: 1\ntraining:\n  micro_batch_size: 1\n  seq_length: 1024\n"
                   "infrastructure:\n  world_size: 1\n");
  const auto r = run_mme({"estimate", "--config", (dir.path() / "s.yaml").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(has_control(r.out)) << r.out;
}

// ---------------------------------------------------------------------------------------------
// 11. -v, as documented.
TEST(CommonOptions, DashVIsDebugLogging) {
  for (const char* flag : {"-v", "--v"}) {
    const auto r = run_mme({"plugins", flag});
    EXPECT_EQ(r.exit_code, 0) << flag << ": " << r.err;
    EXPECT_NE(r.err.find("mme: debug: "), std::string::npos) << flag << ": " << r.err;
  }
  EXPECT_EQ(run_mme({"estimate", kModel, "-v"}).exit_code, 0);
}

// 14. A newline in the MODEL path does not break the YAML `mme init` writes.
TEST(Init, ANewlineInTheModelPath) {
  test::TempDir dir;
  const fs::path model = dir.path() / "odd\nname";
  fs::create_directories(model);
  test::write_file(model / "config.json", kLlama);
  const auto r = run_mme({"init", model.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  test::write_file(dir.path() / "spec.yaml", r.out);
  const auto e = run_mme({"estimate", "--config", (dir.path() / "spec.yaml").string(), "--json"});
  EXPECT_EQ(e.exit_code, 0) << e.err << "\n" << r.out.substr(0, 400);
}

// 5. A plugin needing a symbol this libmme lacks is one warning, not exit 127.
TEST(Plugins, AMissingSymbolIsOneWarning) {
  test::TempDir dir;
  fs::copy_file(MME_TEST_FIXTURE_MISSING_SYMBOL, dir.path() / "missing_symbol.so");
  const auto r = run_mme({"plugins", "--plugin-dir", dir.path().string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("missing_symbol.so rejected: not a loadable library"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_EQ(run_mme({"estimate", kModel, "--plugin-dir", dir.path().string()}).exit_code, 0);
}

// 16. A plugin loaded first (--plugin-dir) that takes the alias "H100" used to get the whole
// built-in Hopper plugin rejected: every Hopper GPU was gone. Now only that alias is.
TEST(Plugins, ATakenAliasCostsTheBuiltInHopperPluginOnlyThatAlias) {
  test::TempDir dir;
  fs::copy_file(MME_TEST_FIXTURE_ALIAS_H100, dir.path() / "alias_h100.so");
  const auto r = run_mme({"hardware", "--json", "--plugin-dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "mme: warning: plugin " +
                       fs::canonical(test::stage_dir() / "lib/mme/plugins/mme_hw_nvidia_hopper.so").string() +
                       ": hardware alias 'H100' of profile 'H100-SXM-80GB' dropped: it is already a name of profile "
                       "'Lab-H100-Clone' of plugin 'fixture_alias_h100'\n");
  const auto list = nlohmann::json::parse(r.out)["hardware"];
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& h : list) by_name[h["name"].get<std::string>()] = h;
  for (const char* hopper : {"H100-SXM-80GB", "H100-PCIe-80GB", "H800-SXM-80GB", "H20-96GB", "H200-SXM-141GB"}) {
    ASSERT_EQ(by_name.count(hopper), 1u) << hopper;
    EXPECT_EQ(by_name[hopper]["plugin"], "hw_nvidia_hopper") << hopper;
  }
  EXPECT_EQ(by_name["H100-SXM-80GB"]["aliases"],
            nlohmann::json::array({"H100-SXM", "h100-80gb", "H100 80GB", "H100-80G"}));
  EXPECT_EQ(by_name["Lab-H100-Clone"]["plugin"], "fixture_alias_h100");
  const auto plugins = run_mme({"plugins", "--json", "--plugin-dir", dir.path().string()});
  ASSERT_EQ(plugins.exit_code, 0) << plugins.err;
  EXPECT_EQ(nlohmann::json::parse(plugins.out)["rejected"], nlohmann::json::array());
  // The alias finds the profile registered first; the built-in one keeps its other names.
  const auto est = run_mme({"estimate", kModel, "--gpu", "H100-SXM", "--json", "--plugin-dir", dir.path().string()});
  ASSERT_EQ(est.exit_code, 0) << est.err;
  EXPECT_NE(est.out.find("H100-SXM-80GB"), std::string::npos);
}

}  // namespace
}  // namespace mme
