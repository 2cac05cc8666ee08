// Model sources, step 4: downloads from $HF_ENDPOINT, here a local HTTP server on 127.0.0.1
// (tests/sources/http_test_server.*), never the internet. What a download must guarantee:
// the hub cache layout afterwards (so the next run is offline), clear errors for 401/403/404
// and unreachable hosts, bounded time and size, nothing left in the cache after a failure,
// and HF_TOKEN sent only to the endpoint's host and never written to a log.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <mme/inputs/model_source.hpp>
#include <mme/sdk/error.hpp>

#include "http_test_server.hpp"
#include "source_test_env.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace mme {
namespace {

using test::http_response;
using test::HttpConnection;
using test::HttpRequest;
using test::HttpTestServer;
using test::list_tree;

const std::string kId = "test-org/tiny-model";
const std::string kRepo = "models--test-org--tiny-model";
const std::string kTarget = "/test-org/tiny-model/resolve/main/config.json";
const std::string kCommit = "8f3c2a1b9d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a";
const std::string kBody = R"({"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 4})";
const std::string kToken = "hf_SeCrEtToKeN0123456789abcdefXYZ";

HttpTestServer::Handler serve(int status, std::string body,
                              std::vector<std::pair<std::string, std::string>> headers = {}) {
  return [=](HttpConnection& c, const HttpRequest&) { c.send(http_response(status, body, headers)); };
}

HttpTestServer::Handler serve_config() { return serve(200, kBody, {{"X-Repo-Commit", kCommit}}); }

class sources_download : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(tmp_.path() / "zoo");
    test::write_file(tmp_.path() / "zoo" / "acme--Bundled-1B" / "config.json", "{}");
    test::SourceEnv::set("HF_HUB_CACHE", cache().string());
    test::SourceEnv::unset("HF_HUB_OFFLINE");
    test::SourceEnv::set("no_proxy", "*");  // a proxy from the environment must not see 127.0.0.1
    test::SourceEnv::set("NO_PROXY", "*");
    options_.zoo_dirs = {tmp_.path() / "zoo"};
    options_.connect_timeout_s = 2;
    options_.transfer_timeout_s = 10;
    options_.low_speed_timeout_s = 1;
  }
  fs::path cache() const { return tmp_.path() / "cache"; }
  fs::path repo() const { return cache() / kRepo; }
  static void use(const HttpTestServer& server, const std::string& host = "127.0.0.1") {
    test::SourceEnv::set("HF_ENDPOINT", server.url(host));
  }
  ResolvedModel resolve(const std::string& id = kId) { return resolve_model(id, options_); }
  // Resolves, expecting an error of type E; returns its message.
  template <class E = NotFoundError>
  std::string failure(const std::string& id = kId) {
    try {
      resolve(id);
    } catch (const E& e) {
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
      return {};
    }
    ADD_FAILURE() << id << " resolved; an error was expected";
    return {};
  }
  void expect_cache_empty() {
    const auto left = list_tree(cache());
    EXPECT_TRUE(left.empty()) << "left in the cache: " << ::testing::PrintToString(left);
  }

  test::SourceEnv env_;
  test::TempDir tmp_;
  SourceOptions options_;
};

TEST_F(sources_download, FirstRunDownloadsAndCachesSecondRunIsOffline) {
  HttpTestServer server(serve_config());
  use(server);
  const ResolvedModel first = resolve();
  EXPECT_EQ(first.origin, "hf-hub");
  EXPECT_EQ(first.name, kId);
  EXPECT_EQ(first.config, nlohmann::json::parse(kBody));
  EXPECT_EQ(first.path, repo() / "snapshots" / kCommit / "config.json");

  // The hub's layout, and nothing else (no temp files).
  EXPECT_EQ(list_tree(cache()), (std::vector<std::string>{kRepo, kRepo + "/refs", kRepo + "/refs/main",
                                                          kRepo + "/snapshots", kRepo + "/snapshots/" + kCommit,
                                                          kRepo + "/snapshots/" + kCommit + "/config.json"}));
  EXPECT_EQ(test::read_file(repo() / "refs" / "main"), kCommit);
  EXPECT_EQ(test::read_file(first.path), kBody);

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].target, kTarget);
  EXPECT_EQ(requests[0].get("user-agent").rfind("mme/", 0), 0u) << requests[0].get("user-agent");
  EXPECT_FALSE(requests[0].has("authorization"));

  server.stop();
  const ResolvedModel second = resolve();
  EXPECT_EQ(second.origin, "hf-cache");
  EXPECT_EQ(second.path, first.path);
  EXPECT_EQ(second.config, first.config);
  test::SourceEnv::set("HF_HUB_OFFLINE", "1");
  EXPECT_EQ(resolve().origin, "hf-cache");
  EXPECT_EQ(resolve("TEST-ORG/Tiny-Model").origin, "hf-cache");
}

TEST_F(sources_download, ConcurrentDownloadsAllSucceed) {
  HttpTestServer server(serve_config());
  use(server);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      try {
        if (resolve_model(kId, options_).config == nlohmann::json::parse(kBody)) ++ok;
      } catch (const std::exception&) {
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(list_tree(cache()), (std::vector<std::string>{kRepo, kRepo + "/refs", kRepo + "/refs/main",
                                                          kRepo + "/snapshots", kRepo + "/snapshots/" + kCommit,
                                                          kRepo + "/snapshots/" + kCommit + "/config.json"}));
}

TEST_F(sources_download, MultimodalDownloadGivesTheTextConfig) {
  HttpTestServer server(serve(200,
                              R"({"model_type": "llava", "text_config": {"model_type": "llama", "hidden_size": 7}})",
                              {{"X-Repo-Commit", kCommit}}));
  use(server);
  EXPECT_EQ(resolve().config.at("hidden_size"), 7);
  server.stop();
  EXPECT_EQ(resolve().config.at("hidden_size"), 7);  // from the cache, selected the same way
}

TEST_F(sources_download, EndpointWithTrailingSlash) {
  HttpTestServer server(serve_config());
  test::SourceEnv::set("HF_ENDPOINT", server.url() + "/");
  EXPECT_EQ(resolve().origin, "hf-hub");
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].target, kTarget);
}

TEST_F(sources_download, WithoutCommitHeaderTheRevisionNamesTheSnapshot) {
  HttpTestServer server(serve(200, kBody));
  use(server);
  const ResolvedModel first = resolve();
  EXPECT_EQ(first.path, repo() / "snapshots" / "main" / "config.json");
  EXPECT_FALSE(fs::exists(repo() / "refs" / "main"));
  server.stop();
  EXPECT_EQ(resolve().origin, "hf-cache");
}

TEST_F(sources_download, OddCommitHeaderIsNotUsedAsAPath) {
  HttpTestServer server(serve(200, kBody, {{"X-Repo-Commit", "../../../escape"}}));
  use(server);
  const ResolvedModel m = resolve();
  EXPECT_EQ(m.path, repo() / "snapshots" / "main" / "config.json");
  EXPECT_FALSE(fs::exists(tmp_.path() / "escape"));
}

TEST_F(sources_download, RevisionWithSlashIsEscapedInTheUrl) {
  HttpTestServer server(serve_config());
  use(server);
  options_.revision = "refs/pr/3";
  const ResolvedModel m = resolve();
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].target, "/test-org/tiny-model/resolve/refs%2Fpr%2F3/config.json");
  EXPECT_EQ(test::read_file(repo() / "refs" / "refs" / "pr" / "3"), kCommit);
  server.stop();
  EXPECT_EQ(resolve().origin, "hf-cache");
}

TEST_F(sources_download, NotFound404) {
  HttpTestServer server(serve(404, R"({"error": "Repository not found"})"));
  use(server);
  const std::string what = failure("test-org/no-such-model");
  EXPECT_NE(what.find("404"), std::string::npos) << what;
  EXPECT_NE(what.find("no model 'test-org/no-such-model'"), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, Unauthorized401SaysSetHfToken) {
  HttpTestServer server(serve(401, R"({"error": "Access to model is restricted"})"));
  use(server);
  const std::string what = failure();
  EXPECT_NE(what.find("401"), std::string::npos) << what;
  EXPECT_NE(what.find("gated"), std::string::npos) << what;
  EXPECT_NE(what.find("set HF_TOKEN"), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, Forbidden403SaysSetHfToken) {
  HttpTestServer server(serve(403, "forbidden"));
  use(server);
  const std::string what = failure();
  EXPECT_NE(what.find("403"), std::string::npos) << what;
  EXPECT_NE(what.find("HF_TOKEN"), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, RefusedTokenIsNamedButNotShown) {
  test::SourceEnv::set("HF_TOKEN", kToken);
  HttpTestServer server(serve(403, "forbidden", {{"X-Error-Code", "GatedRepo"}}));
  use(server);
  const std::string what = failure();
  EXPECT_NE(what.find("403"), std::string::npos) << what;
  EXPECT_NE(what.find("HF_TOKEN is set"), std::string::npos) << what;
  EXPECT_EQ(what.find(kToken), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, HubErrorCodes) {
  {
    HttpTestServer server(serve(401, "", {{"X-Error-Code", "RepoNotFound"}}));
    use(server);
    const std::string what = failure();
    EXPECT_NE(what.find("not found"), std::string::npos) << what;
    EXPECT_NE(what.find("HF_TOKEN"), std::string::npos) << what;  // private repos look the same
  }
  {
    HttpTestServer server(serve(404, "", {{"X-Error-Code", "RevisionNotFound"}}));
    use(server);
    const std::string what = failure();
    EXPECT_NE(what.find("revision 'main'"), std::string::npos) << what;
  }
  {
    HttpTestServer server(serve(404, "", {{"X-Error-Code", "EntryNotFound"}}));
    use(server);
    const std::string what = failure();
    EXPECT_NE(what.find("no config.json"), std::string::npos) << what;
  }
  expect_cache_empty();
}

TEST_F(sources_download, OtherStatusIsAnError) {
  HttpTestServer server(serve(500, "oops"));
  use(server);
  const std::string what = failure();
  EXPECT_NE(what.find("500"), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, StalledAfterHeadersTimesOut) {
  HttpTestServer server([](HttpConnection& c, const HttpRequest&) {
    c.send("HTTP/1.1 200 OK\r\nContent-Length: 200\r\nX-Repo-Commit: " + kCommit + "\r\n\r\n{\"model_type\":");
    c.hold_open();
  });
  use(server);
  const auto start = std::chrono::steady_clock::now();
  const std::string what = failure();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 4.0) << "low_speed_timeout_s is 1";
  EXPECT_NE(what.find("timed out"), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, SilentServerTimesOut) {
  HttpTestServer server([](HttpConnection& c, const HttpRequest&) { c.hold_open(); });
  use(server);
  const auto start = std::chrono::steady_clock::now();
  const std::string what = failure();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 4.0);
  EXPECT_NE(what.find("timed out"), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, TruncatedBodyFails) {
  HttpTestServer server([](HttpConnection& c, const HttpRequest&) {
    c.send("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nX-Repo-Commit: " + kCommit + "\r\n\r\n" + kBody);
  });  // then the server closes the connection
  use(server);
  const std::string what = failure();
  EXPECT_NE(what.find(kTarget), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, BrokenJsonIsNotCached) {
  HttpTestServer server(serve(200, R"({"model_type": "llama", "hidden)", {{"X-Repo-Commit", kCommit}}));
  use(server);
  const std::string what = failure<ConfigError>();
  EXPECT_NE(what.find("invalid JSON"), std::string::npos) << what;
  expect_cache_empty();
}

// Issue 20: valid JSON that is not a config stayed in the cache for good.
TEST_F(sources_download, JsonThatIsNoConfigIsNotCached) {
  HttpTestServer server(serve(200, "[1,2,3]", {{"X-Repo-Commit", kCommit}}));
  use(server);
  const std::string what = failure<ConfigError>();
  EXPECT_NE(what.find("expected a JSON object (a config.json), got array; nothing cached"), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, EmptyBodyIsNotCached) {
  HttpTestServer server(serve(200, "", {{"X-Repo-Commit", kCommit}}));
  use(server);
  // Issue 20: the message was "<url>: empty; expected a JSON config", which model-sources.md
  // did not list.
  EXPECT_EQ(failure<ConfigError>(), server.url() + kTarget +
                                        ": the response is empty; that is no config.json; "
                                        "nothing cached");
  expect_cache_empty();
}

TEST_F(sources_download, AnnouncedBodyOverTheCapFails) {
  options_.max_bytes = 1024;
  const std::string big = "{\"pad\": \"" + std::string(4000, 'x') + "\"}";
  HttpTestServer server(serve(200, big, {{"X-Repo-Commit", kCommit}}));
  use(server);
  const std::string what = failure();
  EXPECT_NE(what.find("larger than 1024 bytes"), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, UnannouncedBodyOverTheCapFails) {
  options_.max_bytes = 1024;
  HttpTestServer server([](HttpConnection& c, const HttpRequest&) {
    // No Content-Length: the body ends when the server closes.
    c.send("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"pad\": \"" + std::string(100000, 'x') + "\"}");
  });
  use(server);
  const std::string what = failure();
  EXPECT_NE(what.find("larger than 1024 bytes"), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, BodyAtTheCapIsFine) {
  const std::string body = "{\"pad\": \"" + std::string(1000, 'x') + "\"}";
  options_.max_bytes = static_cast<std::int64_t>(body.size());
  HttpTestServer server(serve(200, body, {{"X-Repo-Commit", kCommit}}));
  use(server);
  EXPECT_EQ(resolve().origin, "hf-hub");
}

TEST_F(sources_download, UnreachableEndpointSuggestsOfflineAndBundledModels) {
  test::SourceEnv::set("HF_ENDPOINT", "http://127.0.0.1:" + std::to_string(test::unused_local_port()));
  const std::string what = failure();
  EXPECT_NE(what.find("cannot reach"), std::string::npos) << what;
  EXPECT_NE(what.find("offline"), std::string::npos) << what;
  EXPECT_NE(what.find("acme/Bundled-1B"), std::string::npos) << what;
  expect_cache_empty();
}

// Issue 20: the errors name the host that was contacted. A redirect target that cannot be
// reached was reported as "cannot reach <endpoint>", the one host that had answered.
TEST_F(sources_download, AnUnreachableRedirectTargetIsNamedNotTheEndpoint) {
  const std::string cdn = "http://localhost:" + std::to_string(test::unused_local_port());
  HttpTestServer endpoint(serve(302, "", {{"Location", cdn + "/cdn/config.json"}}));
  use(endpoint);
  const std::string what = failure();
  EXPECT_EQ(
      what.rfind("cannot reach " + cdn + " (where " + endpoint.url() + kTarget + " redirects) for " + kId + ": ", 0),
      0u)
      << what;
  EXPECT_NE(what.find("acme/Bundled-1B"), std::string::npos) << what;
  expect_cache_empty();
}

TEST_F(sources_download, FailuresAfterARedirectNameTheRedirectTarget) {
  HttpTestServer cdn([](HttpConnection& c, const HttpRequest& req) {
    c.send(http_response(req.target == "/missing/config.json" ? 404 : 500, "oops"));
  });
  const std::string shown = cdn.url("localhost");
  {
    HttpTestServer endpoint(serve(302, "", {{"Location", shown + "/broken/config.json?sig=SECRET"}}));
    use(endpoint);
    EXPECT_EQ(failure(), endpoint.url() + kTarget + " (redirected to " + shown +
                             "/broken/config.json): unexpected HTTP status 500");
  }
  {
    HttpTestServer endpoint(serve(302, "", {{"Location", shown + "/missing/config.json"}}));
    use(endpoint);
    EXPECT_EQ(failure(), endpoint.url() + kTarget + " (redirected to " + shown +
                             "/missing/config.json): HTTP 404: no "
                             "model '" +
                             kId + "' (revision 'main') on " + shown);
  }
  expect_cache_empty();
}

// Without a redirect the endpoint of HF_ENDPOINT is named, never the default hub.
TEST_F(sources_download, ErrorsNameTheEndpointOfHfEndpoint) {
  HttpTestServer server(serve(404, ""));
  use(server);
  EXPECT_EQ(failure("test-org/no-such-model"), server.url() +
                                                   "/test-org/no-such-model/resolve/main/config.json: "
                                                   "HTTP 404: no model 'test-org/no-such-model' (revision 'main') on " +
                                                   server.url());
  test::SourceEnv::set("HF_ENDPOINT", "http://127.0.0.1:" + std::to_string(test::unused_local_port()) + "/mirror");
  const std::string what = failure();
  EXPECT_EQ(what.rfind("cannot reach http://127.0.0.1:", 0), 0u) << what;
  EXPECT_NE(what.find("/mirror for " + kId), std::string::npos) << what;
  EXPECT_EQ(what.find("huggingface.co"), std::string::npos) << what;
}

TEST_F(sources_download, HttpsEndpointInsistsOnTls) {
  // No TLS server here: the point is that an https endpoint gets a TLS handshake, and that
  // its failure is reported as such (and nothing is cached), not retried in plain text.
  HttpTestServer server(serve_config());
  test::SourceEnv::set("HF_ENDPOINT", "https://127.0.0.1:" + std::to_string(server.port()));
  const std::string what = failure();
  EXPECT_NE(what.find("TLS"), std::string::npos) << what;
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "TLS");
  expect_cache_empty();
}

TEST_F(sources_download, BadEndpointIsAUsageError) {
  for (const std::string e : {"ftp://127.0.0.1/", "file:///etc", "127.0.0.1:8080", "http://"}) {
    test::SourceEnv::set("HF_ENDPOINT", e);
    const std::string what = failure<UsageError>();
    EXPECT_NE(what.find("HF_ENDPOINT"), std::string::npos) << what;
  }
  expect_cache_empty();
}

TEST_F(sources_download, OfflineEnvironmentForbidsTheNetwork) {
  HttpTestServer server(serve_config());
  use(server);
  for (const char* v : {"1", "true", "ON", "yes"}) {
    test::SourceEnv::set("HF_HUB_OFFLINE", v);
    const std::string what = failure();
    EXPECT_NE(what.find("HF_HUB_OFFLINE"), std::string::npos) << what;
    EXPECT_NE(what.find("bundled models: acme/Bundled-1B"), std::string::npos) << what;
  }
  EXPECT_TRUE(server.requests().empty());
  // 0 and other values leave the network on.
  test::SourceEnv::set("HF_HUB_OFFLINE", "0");
  EXPECT_EQ(resolve().origin, "hf-hub");
}

TEST_F(sources_download, AllowNetworkFalseForbidsTheNetwork) {
  HttpTestServer server(serve_config());
  use(server);
  options_.allow_network = false;
  const std::string what = failure();
  EXPECT_NE(what.find("downloads are off"), std::string::npos) << what;
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(sources_download, UnsafeRevisionNeverReachesTheNetworkOrTheDisk) {
  HttpTestServer server(serve_config());
  use(server);
  options_.revision = "../../../../escape";
  failure<UsageError>();
  EXPECT_TRUE(server.requests().empty());
  EXPECT_EQ(list_tree(tmp_.path()),
            (std::vector<std::string>{"zoo", "zoo/acme--Bundled-1B", "zoo/acme--Bundled-1B/config.json"}));
}

TEST_F(sources_download, UnwritableCacheStillResolves) {
  HttpTestServer server(serve_config());
  use(server);
  test::write_file(cache(), "a file where the cache folder should be");
  const ResolvedModel m = resolve();
  EXPECT_EQ(m.origin, "hf-hub");
  EXPECT_EQ(m.config, nlohmann::json::parse(kBody));
}

// ---- HF_TOKEN

TEST_F(sources_download, TokenIsSentAsBearerToTheEndpoint) {
  test::SourceEnv::set("HF_TOKEN", kToken);
  HttpTestServer server(serve_config());
  use(server);
  EXPECT_EQ(resolve().origin, "hf-hub");
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].get("authorization"), "Bearer " + kToken);
}

TEST_F(sources_download, TokenSurroundingWhitespaceIsIgnored) {
  test::SourceEnv::set("HF_TOKEN", "  " + kToken + "\n");
  HttpTestServer server(serve_config());
  use(server);
  resolve();
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].get("authorization"), "Bearer " + kToken);
}

TEST_F(sources_download, TokenWithControlCharactersIsRefusedUnsent) {
  // "\r\n" inside the token would otherwise add request headers of the attacker's choosing.
  test::SourceEnv::set("HF_TOKEN", "abc\r\nX-Injected: 1");
  HttpTestServer server(serve_config());
  use(server);
  const std::string what = failure<UsageError>();
  EXPECT_NE(what.find("HF_TOKEN"), std::string::npos) << what;
  EXPECT_EQ(what.find("X-Injected"), std::string::npos) << what;
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(sources_download, TokenFollowsARedirectOnTheSameHost) {
  // The hub answers resolve/ with a 307 to /api/resolve-cache/... on the same host.
  test::SourceEnv::set("HF_TOKEN", kToken);
  const std::string cached_target = "/api/resolve-cache/models/test-org/tiny-model/" + kCommit + "/config.json";
  HttpTestServer server([&](HttpConnection& c, const HttpRequest& r) {
    if (r.target == kTarget)
      c.send(http_response(307, "", {{"Location", cached_target}, {"X-Repo-Commit", kCommit}}));
    else
      c.send(http_response(200, kBody));
  });
  use(server);
  const ResolvedModel m = resolve();
  EXPECT_EQ(m.path, repo() / "snapshots" / kCommit / "config.json");
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].target, cached_target);
  EXPECT_EQ(requests[0].get("authorization"), "Bearer " + kToken);
  EXPECT_EQ(requests[1].get("authorization"), "Bearer " + kToken);
}

TEST_F(sources_download, TokenIsNotSentToAnotherHostAfterARedirect) {
  test::SourceEnv::set("HF_TOKEN", kToken);
  HttpTestServer other(serve(200, kBody));  // addressed as "localhost", a different host name
  const std::string elsewhere = other.url("localhost") + "/cdn/config.json";
  HttpTestServer endpoint(serve(302, "", {{"Location", elsewhere}, {"X-Repo-Commit", kCommit}}));
  use(endpoint);
  const ResolvedModel m = resolve();
  EXPECT_EQ(m.config, nlohmann::json::parse(kBody));
  EXPECT_EQ(m.path, repo() / "snapshots" / kCommit / "config.json");
  ASSERT_EQ(endpoint.requests().size(), 1u);
  EXPECT_EQ(endpoint.requests()[0].get("authorization"), "Bearer " + kToken);
  const auto seen = other.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].target, "/cdn/config.json");
  EXPECT_FALSE(seen[0].has("authorization")) << seen[0].raw;
  EXPECT_EQ(seen[0].raw.find(kToken), std::string::npos) << seen[0].raw;
}

TEST_F(sources_download, TokenIsNotSentToAnotherPortOnTheSameHost) {
  test::SourceEnv::set("HF_TOKEN", kToken);
  HttpTestServer other(serve(200, kBody));
  HttpTestServer endpoint(serve(302, "", {{"Location", other.url() + "/x/config.json"}}));
  use(endpoint);
  resolve();
  ASSERT_EQ(other.requests().size(), 1u);
  EXPECT_FALSE(other.requests()[0].has("authorization")) << other.requests()[0].raw;
}

TEST_F(sources_download, RedirectLimits) {
  {
    HttpTestServer server(serve(302, "", {{"Location", kTarget}}));  // to itself, for ever
    use(server);
    const std::string what = failure();
    EXPECT_NE(what.find("redirect"), std::string::npos) << what;
    EXPECT_LE(server.requests().size(), 10u);
  }
  {
    HttpTestServer server(serve(302, "", {{"Location", "file:///etc/passwd"}}));
    use(server);
    const std::string what = failure();
    EXPECT_NE(what.find("redirect"), std::string::npos) << what;
  }
  {
    HttpTestServer server(serve(302, ""));  // no Location
    use(server);
    failure();
  }
  expect_cache_empty();
}

TEST_F(sources_download, TokenNeverReachesTheLogEvenAtTrace) {
  test::SourceEnv::set("HF_TOKEN", kToken);
  test::LogCapture log;
  {
    HttpTestServer other(serve(200, kBody));
    HttpTestServer endpoint([&](HttpConnection& c, const HttpRequest& r) {
      if (r.target == kTarget)
        c.send(http_response(
            302, "", {{"Location", other.url("localhost") + "/cdn/config.json?sig=abc"}, {"X-Repo-Commit", kCommit}}));
      else
        c.send(http_response(401, "no"));
    });
    use(endpoint);
    EXPECT_EQ(resolve().origin, "hf-hub");
    const std::string what = failure("test-org/gated-model");
    EXPECT_EQ(what.find(kToken), std::string::npos) << what;
    endpoint.stop();
    const std::string unreachable = failure("test-org/third-model");
    EXPECT_EQ(unreachable.find(kToken), std::string::npos) << unreachable;
  }
  const std::string text = log.text();
  EXPECT_NE(text.find("downloading"), std::string::npos) << "the capture works: " << text;
  EXPECT_EQ(text.find(kToken), std::string::npos) << text;
  EXPECT_EQ(text.find(kToken.substr(0, 12)), std::string::npos) << text;
}

TEST_F(sources_download, EndpointPasswordIsNotLogged) {
  test::LogCapture log;
  HttpTestServer server(serve(404, ""));
  test::SourceEnv::set("HF_ENDPOINT", "http://user:pa55word@127.0.0.1:" + std::to_string(server.port()));
  const std::string what = failure();
  EXPECT_EQ(what.find("pa55word"), std::string::npos) << what;
  EXPECT_EQ(log.text().find("pa55word"), std::string::npos) << log.text();
}

// Issue 32: the model path is appended to HF_ENDPOINT; after a '?' or '#' it would land in the
// query or the fragment and another URL would be fetched. Refused as the space and CRLF forms
// are, before any request.
TEST_F(sources_download, EndpointWithAQueryOrAFragmentIsAUsageError) {
  HttpTestServer server(serve_config());
  for (const std::string tail : {"/?mirror=1", "?", "/#x", "#"}) {
    test::SourceEnv::set("HF_ENDPOINT", server.url() + tail);
    const std::string what = failure<UsageError>();
    EXPECT_NE(what.find("has a query or fragment"), std::string::npos) << tail << ": " << what;
  }
  EXPECT_TRUE(server.requests().empty());
  expect_cache_empty();
}

// Issue 32: --revision was ignored for bundled models, even an invalid one. It is validated,
// and a bundled id with another revision than main is read from the hub (or the cache), with a
// warning that says so.
TEST_F(sources_download, ABundledIdTakesItsRevisionFromTheHub) {
  HttpTestServer server(serve_config());
  use(server);
  options_.revision = "../x";
  EXPECT_NE(failure<UsageError>("acme/Bundled-1B").find("invalid revision '../x'"), std::string::npos);
  test::LogCapture log;
  options_.revision = "v2";
  const ResolvedModel m = resolve("acme/Bundled-1B");
  EXPECT_EQ(m.origin, "hf-hub");
  EXPECT_EQ(m.config, nlohmann::json::parse(kBody));
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].target, "/acme/Bundled-1B/resolve/v2/config.json");
  EXPECT_NE(log.text().find("acme/Bundled-1B is bundled as its main revision; --revision v2 is read from the "
                            "Hugging Face cache or hub"),
            std::string::npos)
      << log.text();
  // Offline, the message names the revision and the way back to the bundled config.
  test::SourceEnv::set("HF_HUB_OFFLINE", "1");
  options_.revision = "v3";
  const std::string what = failure("acme/Bundled-1B");
  EXPECT_NE(what.find("acme/Bundled-1B revision v3: not in the Hugging Face cache"), std::string::npos) << what;
  EXPECT_NE(what.find("drop --revision"), std::string::npos) << what;
  // main (the default) is the bundled config itself.
  options_.revision = "main";
  EXPECT_EQ(resolve("acme/Bundled-1B").origin, "bundled");
}

// Issue 32: error messages quoted input whole (a 10 MB model id) and listed every bundled model
// (60 KB with a large zoo).
TEST_F(sources_download, MessagesAreBoundedWhateverTheInput) {
  const std::string huge = "org/" + std::string(10u << 20, 'x');
  const std::string what = failure(huge);
  EXPECT_LT(what.size(), 200u) << what.substr(0, 300);
  EXPECT_NE(what.find("is " + std::to_string(huge.size()) + " bytes long: no file path (at most 4096 bytes) or hub id"),
            std::string::npos)
      << what;
  for (int i = 0; i < 40; ++i)
    test::write_file(tmp_.path() / "zoo" / ("org--model-" + std::to_string(100 + i).substr(1)) / "config.json", "{}");
  test::SourceEnv::set("HF_HUB_OFFLINE", "1");
  const std::string listed = failure("org/absent");
  // 41 bundled models: the first 30 by name, then how many more.
  EXPECT_NE(listed.find("bundled models: acme/Bundled-1B, org/model-00, "), std::string::npos) << listed;
  EXPECT_NE(listed.find("org/model-28 and 11 more (`mme models` lists them)"), std::string::npos) << listed;
  EXPECT_EQ(listed.find("org/model-29"), std::string::npos) << listed;
}

}  // namespace
}  // namespace mme
