// The `mme` executable end to end for model resolution: every failure is one line on stderr,
// nothing on stdout, and the documented exit code (framework/include/mme/sdk/error.hpp).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <thread>

#include <gtest/gtest.h>

#include <mme/inputs/model_source.hpp>
#include <mme/sdk/error.hpp>

#include "http_test_server.hpp"
#include "source_test_env.hpp"
#include "test_support.hpp"
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace mme {
namespace {

using test::HttpConnection;
using test::HttpRequest;
using test::HttpTestServer;
using test::run_mme;

const std::string kToken = "hf_CliSeCrEt9876543210zyxwvuts";

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

class sources_cli : public ::testing::Test {
 protected:
  fs::path cache() const { return tmp_.path() / "cache"; }
  // An empty cache and downloads off, whatever the caller's environment holds.
  std::map<std::string, std::string> env(const std::map<std::string, std::string>& extra = {}) const {
    std::map<std::string, std::string> e{{"HF_HUB_CACHE", cache().string()},
                                         {"HF_HUB_OFFLINE", "1"},
                                         {"HF_HOME", ""},
                                         {"HF_TOKEN", ""},
                                         {"HF_ENDPOINT", ""},
                                         {"MME_MODELS_PATH", ""},
                                         {"no_proxy", "*"},
                                         {"NO_PROXY", "*"}};
    for (const auto& [k, v] : extra) e[k] = v;
    return e;
  }
  static void expect_one_error_line(const test::RunResult& r, ExitCode code, const std::string& needle) {
    EXPECT_EQ(r.exit_code, static_cast<int>(code)) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("mme: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }

  test::TempDir tmp_;
};

TEST_F(sources_cli, OfflineUnknownHubIdIsNotFound) {
  for (const char* command : {"params", "estimate"}) {
    const auto r = run_mme({command, "no-such-org/no-such-model"}, env());
    expect_one_error_line(r, ExitCode::kNotFound, "no-such-org/no-such-model");
    EXPECT_NE(r.err.find("HF_HUB_OFFLINE"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("deepseek-ai/DeepSeek-V3"), std::string::npos) << "names the bundled models: " << r.err;
  }
  EXPECT_TRUE(test::list_tree(cache()).empty());
}

TEST_F(sources_cli, MissingLocalPathIsNotFound) {
  const fs::path missing = tmp_.path() / "nowhere" / "config.json";
  expect_one_error_line(run_mme({"params", missing.string()}, env()), ExitCode::kNotFound, "no such file");
  fs::create_directories(tmp_.path() / "ckpt");
  expect_one_error_line(run_mme({"params", (tmp_.path() / "ckpt").string()}, env()), ExitCode::kNotFound,
                        "no config.json");
}

TEST_F(sources_cli, UnreadableConfigsAreBadModels) {
  const fs::path file = tmp_.path() / "config.json";
  test::write_file(file, "");
  expect_one_error_line(run_mme({"params", file.string()}, env()), ExitCode::kBadModel, "empty");
  test::write_file(file, std::string("{\0}", 3));
  expect_one_error_line(run_mme({"params", file.string()}, env()), ExitCode::kBadModel, "NUL");
  test::write_file(file, "{\"hidden_size\": 40\n96,");
  expect_one_error_line(run_mme({"estimate", file.string()}, env()), ExitCode::kBadModel, "invalid JSON");
  test::write_file(file, "[1, 2]");  // valid JSON, but no adapter takes an array
  expect_one_error_line(run_mme({"params", file.string()}, env()), ExitCode::kBadModel, "array");
}

TEST_F(sources_cli, UnsafeRevisionIsAUsageError) {
  expect_one_error_line(run_mme({"params", "no-such-org/no-such-model", "--revision", "../../x"}, env()),
                        ExitCode::kUsage, "--revision");
  EXPECT_TRUE(test::list_tree(cache()).empty());
}

TEST_F(sources_cli, HubErrorsAreOneLineAndNeverShowTheToken) {
  HttpTestServer server([](HttpConnection& c, const HttpRequest& r) {
    if (r.target.find("/gated-org/") == 0)
      c.send(test::http_response(401, "", {{"X-Error-Code", "GatedRepo"}}));
    else
      c.send(test::http_response(404, "", {{"X-Error-Code", "RepoNotFound"}}));
  });
  const auto online = env({{"HF_HUB_OFFLINE", ""}, {"HF_ENDPOINT", server.url()}, {"HF_TOKEN", kToken}});
  expect_one_error_line(run_mme({"params", "missing-org/missing-model"}, online), ExitCode::kNotFound, "404");
  expect_one_error_line(run_mme({"estimate", "gated-org/gated-model"}, online), ExitCode::kNotFound, "401");
  const auto traced = run_mme({"params", "gated-org/gated-model", "--log-level", "trace"}, online);
  EXPECT_EQ(traced.exit_code, static_cast<int>(ExitCode::kNotFound)) << traced.err;
  EXPECT_NE(traced.err.find("downloading"), std::string::npos) << traced.err;
  EXPECT_EQ(traced.err.find(kToken), std::string::npos) << traced.err;
  EXPECT_EQ(traced.out.find(kToken), std::string::npos) << traced.out;
  for (const auto& req : server.requests()) EXPECT_EQ(req.get("authorization"), "Bearer " + kToken);
  EXPECT_EQ(server.requests().size(), 3u);
  EXPECT_TRUE(test::list_tree(cache()).empty());
}

TEST_F(sources_cli, DownloadKilledMidwayLeavesNoCacheEntry) {
  // The server sends the headers and half the body, then stalls; `mme` is killed (SIGKILL: no
  // clean-up of its own runs) while it waits for the rest. The cache must hold no config.json,
  // and the next run downloads the whole file.
  const std::string body = R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
    "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000})";
  std::atomic<int> served{0};
  HttpTestServer server([&](HttpConnection& c, const HttpRequest&) {
    if (served++ == 0) {
      c.send("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
             "\r\nX-Repo-Commit: 0123456789abcdef0123456789abcdef01234567\r\n\r\n" + body.substr(0, body.size() / 2));
      c.hold_open();
    } else {
      c.send(test::http_response(200, body, {{"X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567"}}));
    }
  });
  const auto online = env({{"HF_HUB_OFFLINE", ""}, {"HF_ENDPOINT", server.url()}});

  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    for (const auto& [k, v] : online) ::setenv(k.c_str(), v.c_str(), 1);
    const std::string exe = test::mme_exe().string();
    ::execl(exe.c_str(), exe.c_str(), "params", "killed-org/killed-model", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (served.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the half body is on its way
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_EQ(served.load(), 1) << "mme never reached the server";
  EXPECT_TRUE(WIFSIGNALED(status)) << "mme ended before it was killed";

  for (const auto& f : test::list_tree(cache()))
    EXPECT_EQ(f.find("config.json", f.size() >= 11 ? f.size() - 11 : 0), std::string::npos)
        << "a config.json in the cache after a killed download: " << f;

  const auto r = run_mme({"params", "killed-org/killed-model"}, online);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(served.load(), 2);
}

// On a terminal a download says what it fetches and from where, and after a second how far it
// got (redrawn in place); off a terminal a successful download prints nothing.
TEST_F(sources_cli, DownloadsSayWhatTheyFetchOnATerminal) {
  const std::string body = R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
    "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000, "rms_norm_eps": 1e-5})";
  HttpTestServer server([&](HttpConnection& c, const HttpRequest& r) {
    if (r.target.find("/slow-org/") == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1600));
    c.send(test::http_response(200, body, {{"X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567"}}));
  });
  const auto online = env({{"HF_HUB_OFFLINE", ""}, {"HF_ENDPOINT", server.url()}, {"TERM", "dumb"}});
  const std::string line = "mme: downloading config.json for slow-org/slow-model from " + server.url();

  const test::RunResult slow = test::run_on_terminal({"params", "slow-org/slow-model"}, online);
  if (slow.exit_code == -1) GTEST_SKIP() << "no pseudo-terminal available";
  ASSERT_EQ(slow.exit_code, 0) << slow.out;
  EXPECT_EQ(slow.out.rfind(line, 0), 0u) << slow.out;  // the first thing printed
  // Redrawn after a second with the bytes so far (none: the server is still silent) and the time.
  EXPECT_NE(slow.out.find("\r\x1b[K" + line + "  0 B  1 s"), std::string::npos) << slow.out;
  EXPECT_NE(slow.out.find("\r\n"), std::string::npos) << slow.out;  // the line ends before the report

  const test::RunResult fast = test::run_on_terminal({"params", "fast-org/fast-model"}, online);
  ASSERT_EQ(fast.exit_code, 0) << fast.out;
  EXPECT_EQ(fast.out.rfind("mme: downloading config.json for fast-org/fast-model from " + server.url() + "\r\n", 0), 0u)
      << fast.out;
  EXPECT_EQ(fast.out.find("\x1b[K"), std::string::npos) << "no progress within the first second: " << fast.out;

  const auto piped = run_mme({"params", "piped-org/piped-model"}, online);
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err, "");
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST_F(sources_cli, StagedZooIsFound) {
  // The build stages models/ into share/mme/models next to bin/; the CLI finds it there.
  ASSERT_TRUE(fs::is_directory(test::models_dir())) << test::models_dir();
  const auto models = list_bundled_models({test::models_dir()});
  EXPECT_FALSE(models.empty());
  for (const auto& m : models) EXPECT_TRUE(looks_like_hub_id(m.name)) << m.name;
}

}  // namespace
}  // namespace mme
