#include "mme/inputs/model_source.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <system_error>

#include <curl/curl.h>
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "mme/engine/plugin_loader.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/text.hpp"
#include "mme/sdk/version.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace mme {

// libcurl is loaded when a download is needed, not at start-up: linking it pulls in some
// thirty libraries (TLS, Kerberos, LDAP, ...) whose loading would dominate every run.
namespace lc {

struct Api {
  CURLcode (*global_init)(long);
  void (*global_cleanup)();
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL*);
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  const char* (*easy_strerror)(CURLcode);
  CURLU* (*url)();
  void (*url_cleanup)(CURLU*);
  CURLUcode (*url_set)(CURLU*, CURLUPart, const char*, unsigned int);
  CURLUcode (*url_get)(const CURLU*, CURLUPart, char**, unsigned int);
  void (*free)(void*);
};

const Api& api() {
  static const Api loaded = [] {
    void* lib = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      throw NotFoundError(
          "downloading a model's config.json needs libcurl (libcurl.so.4, Debian package "
          "libcurl4); use a bundled model or a local config.json instead");
    auto sym = [lib](const char* name) {
      void* p = ::dlsym(lib, name);
      if (!p) throw NotFoundError(fmt::format("libcurl.so.4 has no symbol {}; libcurl 7.62 or newer is needed", name));
      return p;
    };
    Api a{};
    a.global_init = reinterpret_cast<decltype(a.global_init)>(sym("curl_global_init"));
    a.global_cleanup = reinterpret_cast<decltype(a.global_cleanup)>(sym("curl_global_cleanup"));
    a.easy_init = reinterpret_cast<decltype(a.easy_init)>(sym("curl_easy_init"));
    a.easy_cleanup = reinterpret_cast<decltype(a.easy_cleanup)>(sym("curl_easy_cleanup"));
    a.easy_setopt = reinterpret_cast<decltype(a.easy_setopt)>(sym("curl_easy_setopt"));
    a.easy_perform = reinterpret_cast<decltype(a.easy_perform)>(sym("curl_easy_perform"));
    a.easy_getinfo = reinterpret_cast<decltype(a.easy_getinfo)>(sym("curl_easy_getinfo"));
    a.easy_strerror = reinterpret_cast<decltype(a.easy_strerror)>(sym("curl_easy_strerror"));
    a.url = reinterpret_cast<decltype(a.url)>(sym("curl_url"));
    a.url_cleanup = reinterpret_cast<decltype(a.url_cleanup)>(sym("curl_url_cleanup"));
    a.url_set = reinterpret_cast<decltype(a.url_set)>(sym("curl_url_set"));
    a.url_get = reinterpret_cast<decltype(a.url_get)>(sym("curl_url_get"));
    a.free = reinterpret_cast<decltype(a.free)>(sym("curl_free"));
    return a;  // the library stays loaded for the life of the process
  }();
  return loaded;
}

inline CURLcode curl_global_init(long flags) { return api().global_init(flags); }
inline void curl_global_cleanup() { api().global_cleanup(); }
inline CURL* curl_easy_init() { return api().easy_init(); }
inline void curl_easy_cleanup(CURL* c) { api().easy_cleanup(c); }
template <class... A>
CURLcode curl_easy_setopt(CURL* c, CURLoption o, A... a) {
  return api().easy_setopt(c, o, a...);
}
inline CURLcode curl_easy_perform(CURL* c) { return api().easy_perform(c); }
template <class... A>
CURLcode curl_easy_getinfo(CURL* c, CURLINFO i, A... a) {
  return api().easy_getinfo(c, i, a...);
}
inline const char* curl_easy_strerror(CURLcode rc) { return api().easy_strerror(rc); }
inline CURLU* curl_url() { return api().url(); }
inline void curl_url_cleanup(CURLU* u) { api().url_cleanup(u); }
inline CURLUcode curl_url_set(CURLU* u, CURLUPart p, const char* v, unsigned int f) {
  return api().url_set(u, p, v, f);
}
inline CURLUcode curl_url_get(const CURLU* u, CURLUPart p, char** v, unsigned int f) {
  return api().url_get(u, p, v, f);
}
inline void curl_free(void* p) { api().free(p); }

}  // namespace lc

namespace {

bool all_space(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool env_true(const char* name) {
  const std::string s = lower(trim(env_or_empty(name)));
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

fs::path home_dir() {
  if (const std::string h = env_or_empty("HOME"); !h.empty()) return h;
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir && *pw->pw_dir) return pw->pw_dir;
  return "/";
}

// "~" and "~/x" as a shell would expand them (huggingface_hub expands HF_HOME the same way).
fs::path expand_home(const std::string& p) {
  if (p == "~") return home_dir();
  if (p.rfind("~/", 0) == 0) return home_dir() / p.substr(2);
  return p;
}

std::vector<fs::path> split_path_list(const std::string& env) {
  std::vector<fs::path> out;
  for (const std::string& item : split(env, ':', EmptyItems::kSkip)) out.emplace_back(expand_home(item));
  return out;
}

// A multimodal config keeps the language model's settings in text_config. Its vision_config
// goes along, so that adapt_config can say the vision tower is left out.
nlohmann::json select_text_config(nlohmann::json config) {
  if (!config.is_object()) return config;
  auto it = config.find("text_config");
  if (it != config.end() && it->is_object() && !config.contains("num_hidden_layers")) {
    nlohmann::json text = *it;
    if (!text.contains("model_type") && config.contains("model_type")) text["model_type"] = config["model_type"];
    if (auto v = config.find("vision_config"); v != config.end() && !text.contains("vision_config"))
      text["vision_config"] = *v;
    return text;
  }
  return config;
}

// The bundled names for a message: at most 30 (a zoo folder may hold thousands; a message once
// listed 60 KB of them), then how many more `mme models` lists.
std::string bundled_names(const std::vector<fs::path>& zoo_dirs) {
  constexpr std::size_t kListed = 30;
  const auto bundled = list_bundled_models(zoo_dirs);
  std::string out;
  for (std::size_t i = 0; i < bundled.size() && i < kListed; ++i) out += (out.empty() ? "" : ", ") + bundled[i].name;
  if (bundled.size() > kListed) out += fmt::format(" and {} more (`mme models` lists them)", bundled.size() - kListed);
  return out.empty() ? "(none found)" : out;
}

// One path component we are willing to create or open inside the cache: no separators, no
// "." or "..", nothing a shell or URL would treat specially.
bool safe_component(std::string_view s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A revision (branch, tag, commit, "refs/pr/N"): safe components joined by single slashes.
bool safe_revision(const std::string& rev) {
  if (rev.empty() || rev.size() > 255 || rev.front() == '/' || rev.back() == '/') return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = rev.find('/', start);
    const std::string_view part =
        std::string_view(rev).substr(start, slash == std::string::npos ? slash : slash - start);
    if (!safe_component(part)) return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

void check_revision(const std::string& rev) {
  if (!safe_revision(rev))
    throw UsageError(
        fmt::format("invalid revision '{}' (--revision): use a branch, tag or commit made of letters, "
                    "digits, '.', '_', '-' and single '/'",
                    rev));
}

// A URL fit for logs and error messages: no user:password@, no ?query or #fragment (signed
// redirect targets carry credentials there). HF_TOKEN never is in a URL at all.
std::string redact(const std::string& url) {
  std::string out = url.substr(0, url.find_first_of("?#"));
  const auto scheme_end = out.find("://");
  if (scheme_end == std::string::npos) return out;
  const auto host_start = scheme_end + 3;
  const auto host_end = out.find('/', host_start);
  const auto at = out.rfind('@', host_end == std::string::npos ? std::string::npos : host_end);
  if (at != std::string::npos && at >= host_start) out.erase(host_start, at + 1 - host_start);
  return out;
}

// ---- Hugging Face cache layout: models--org--name/{refs/<rev>, snapshots/<commit>/config.json}

fs::path repo_cache_dir(const fs::path& cache, const std::string& id) {
  std::string folder = "models--" + id;
  for (std::size_t pos = folder.find('/'); pos != std::string::npos; pos = folder.find('/'))
    folder.replace(pos, 1, "--");
  fs::path exact = cache / folder;
  std::error_code ec;
  if (fs::is_directory(exact, ec)) return exact;
  // The hub's ids are case-insensitive; the cache keeps the case it was written with.
  if (fs::is_directory(cache, ec)) {
    const std::string want = lower(folder);
    for (auto it = fs::directory_iterator(cache, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (lower(it->path().filename().string()) == want && it->is_directory(ec)) return it->path();
  }
  return exact;
}

std::optional<fs::path> find_in_cache(const fs::path& cache, const std::string& id, const std::string& revision) {
  const fs::path repo = repo_cache_dir(cache, id);
  std::error_code ec;
  std::string commit = revision;  // a commit hash needs no ref
  const fs::path ref = repo / "refs" / revision;
  if (fs::is_regular_file(ref, ec)) {
    std::ifstream in(ref, std::ios::binary);
    std::string text(256, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    commit = trim(text);
  }
  if (!safe_component(commit)) {
    spdlog::debug("{}: ignoring {}: it does not name a snapshot", id, ref.string());
    return std::nullopt;
  }
  fs::path config = repo / "snapshots" / commit / "config.json";
  if (fs::is_regular_file(config, ec)) return config;
  return std::nullopt;
}

// Writes `content` to `target` so that a reader sees the old file or the whole new one, never
// a part: a temp file in the same folder (O_EXCL), fsync, rename. Removes the temp on failure.
void write_file_atomically(const fs::path& target, const std::string& content) {
  fs::create_directories(target.parent_path());
  std::random_device rd;
  const fs::path tmp =
      target.parent_path() / fmt::format(".{}.{:08x}{:08x}.tmp", target.filename().string(), rd(), rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot create " + tmp.string());
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), fmt::format("cannot {} {}", what, tmp.string()));
  };
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("sync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), "cannot close " + tmp.string());
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), "cannot move the download to " + target.string());
  }
}

// ---- download

struct CurlGlobal {
  CurlGlobal() { lc::curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { lc::curl_global_cleanup(); }
};

struct UrlParts {
  std::string scheme, host;
  long port = 0;
  bool same_origin(const UrlParts& o) const { return scheme == o.scheme && host == o.host && port == o.port; }
};

std::optional<UrlParts> parse_url(const std::string& url) {
  std::unique_ptr<CURLU, void (*)(CURLU*)> u(lc::curl_url(), lc::curl_url_cleanup);
  if (!u || lc::curl_url_set(u.get(), CURLUPART_URL, url.c_str(), CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK)
    return std::nullopt;
  auto part = [&](CURLUPart which, unsigned flags) -> std::optional<std::string> {
    char* s = nullptr;
    if (lc::curl_url_get(u.get(), which, &s, flags) != CURLUE_OK || !s) return std::nullopt;
    std::string out = s;
    lc::curl_free(s);
    return out;
  };
  auto scheme = part(CURLUPART_SCHEME, 0);
  auto host = part(CURLUPART_HOST, 0);
  auto port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  if (!scheme || !host || host->empty()) return std::nullopt;
  UrlParts p{lower(*scheme), lower(*host), 0};
  if (port) p.port = std::strtol(port->c_str(), nullptr, 10);
  return p;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "[::1]" || host == "::1" || host.rfind("127.", 0) == 0;
}

struct Endpoint {
  std::string base;  // without trailing slashes
  UrlParts parts;
};

Endpoint hub_endpoint(const SourceEnvironment& env) {
  std::string e = trim(env.hf_endpoint);
  if (e.empty()) e = "https://huggingface.co";
  while (!e.empty() && e.back() == '/') e.pop_back();
  const auto parts = parse_url(e);
  if (!parts || (parts->scheme != "http" && parts->scheme != "https") || e.find("://") == std::string::npos)
    throw UsageError(
        fmt::format("HF_ENDPOINT '{}' is not an http:// or https:// URL (default https://huggingface.co)", redact(e)));
  // The model path is appended: after a '?' or '#' it would land in the query or the fragment.
  if (e.find_first_of("?#") != std::string::npos)
    throw UsageError(
        fmt::format("HF_ENDPOINT '{}' has a query or fragment ('?' or '#'); give the hub's base URL alone "
                    "(default https://huggingface.co)",
                    redact(e)));
  return {e, *parts};
}

// HF_TOKEN, trimmed. Control characters or spaces inside would end up in a request header.
std::string hub_token(const SourceEnvironment& env) {
  const std::string token = trim(env.hf_token);
  if (std::any_of(token.begin(), token.end(), [](unsigned char c) { return c < 0x21 || c == 0x7f; }))
    throw UsageError("HF_TOKEN contains spaces or control characters; set it to the access token alone");
  return token;
}

// On a terminal (stderr), a download says what it fetches from where, on one line, and once it
// has taken a second the line also shows the bytes received and the time so far, redrawn in
// place. Off a terminal nothing is printed (the info log has the URL): the output of a failed
// command stays one error line. -q (a log level above warn) silences it too.
class DownloadNotice {
 public:
  DownloadNotice(const std::string& id, const std::string& endpoint, bool wanted)
      : text_(printable(fmt::format("mme: downloading config.json for {} from {}", id, endpoint))),
        shown_(wanted && ::isatty(STDERR_FILENO)),
        start_(std::chrono::steady_clock::now()) {
    if (!shown_) return;
    std::fputs(text_.c_str(), stderr);
    std::fflush(stderr);
  }
  ~DownloadNotice() {
    if (!shown_) return;
    std::fputs("\n", stderr);
    std::fflush(stderr);
  }
  DownloadNotice(const DownloadNotice&) = delete;
  DownloadNotice& operator=(const DownloadNotice&) = delete;

  void progress(std::int64_t received, std::int64_t total) {
    if (!shown_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const std::string bytes =
        total > 0 ? fmt::format("{} of {}", size_text(received), size_text(total)) : size_text(received);
    std::fputs(fmt::format("\r\033[K{}  {}  {:.0f} s", text_, bytes, seconds).c_str(), stderr);
    std::fflush(stderr);
  }

 private:
  static std::string size_text(std::int64_t bytes) {
    if (bytes < 1024) return fmt::format("{} B", bytes);
    return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024.0);
  }
  std::string text_;
  bool shown_;
  std::chrono::steady_clock::time_point start_, last_;
};

// One HTTP exchange (one hop: redirects are followed by the caller, which decides per hop
// whether the token goes along).
struct Transfer {
  std::string body;
  std::string commit;      // X-Repo-Commit, when it is a hex commit id
  std::string error_code;  // X-Error-Code (RepoNotFound, GatedRepo, EntryNotFound, RevisionNotFound)
  std::int64_t max_bytes = 0;
  bool too_large = false;
  bool stalled = false;
  long idle_limit_s = 0;
  std::chrono::steady_clock::time_point last_activity;
  CURL* curl = nullptr;
  bool connected = false;
  DownloadNotice* notice = nullptr;

  CURLcode rc = CURLE_OK;
  long status = 0;
  std::string location;  // the redirect target, absolute
  std::string why;       // libcurl's message when rc != CURLE_OK
  bool reached = false;  // the TCP connection was made
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  t->last_activity = std::chrono::steady_clock::now();
  if (static_cast<std::int64_t>(t->body.size() + bytes) > t->max_bytes) {
    t->too_large = true;
    return 0;  // aborts the transfer
  }
  t->body.append(data, bytes);
  return bytes;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  t->last_activity = std::chrono::steady_clock::now();
  const std::string line(data, size * n);
  const auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  const std::string key = lower(trim(line.substr(0, colon)));
  const std::string value = trim(line.substr(colon + 1));
  if (key == "x-repo-commit") {
    const bool hex = !value.empty() && value.size() <= 64 &&
                     std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isxdigit(c); });
    if (hex) t->commit = lower(value);
  } else if (key == "x-error-code") {
    t->error_code = value.substr(0, 64);
  }
  return size * n;
}

// Called by libcurl about once a second even while nothing arrives: aborts a connection that
// has been silent for idle_limit_s (the server stalled, before or after the headers).
int on_progress(void* user, curl_off_t total, curl_off_t received, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  const auto now = std::chrono::steady_clock::now();
  if (t->notice) t->notice->progress(received, total);
  if (!t->connected) {
    curl_off_t connect_us = 0;
    if (lc::curl_easy_getinfo(t->curl, CURLINFO_CONNECT_TIME_T, &connect_us) != CURLE_OK || connect_us <= 0)
      return 0;  // still connecting: CURLOPT_CONNECTTIMEOUT governs
    t->connected = true;
    t->last_activity = now;
  }
  if (now - t->last_activity > std::chrono::seconds(t->idle_limit_s)) {
    t->stalled = true;
    return 1;  // aborts with CURLE_ABORTED_BY_CALLBACK
  }
  return 0;
}

Transfer fetch(const std::string& url, const std::string& token, const SourceOptions& options, long timeout_ms,
               DownloadNotice& notice) {
  Transfer t;
  t.notice = &notice;
  t.max_bytes = std::max<std::int64_t>(options.max_bytes, 1);
  t.idle_limit_s = std::max(options.low_speed_timeout_s, 1L);
  t.last_activity = std::chrono::steady_clock::now();
  CURL* curl = lc::curl_easy_init();
  if (!curl) throw NotFoundError("cannot initialise libcurl");
  std::unique_ptr<CURL, void (*)(CURL*)> guard(curl, lc::curl_easy_cleanup);
  t.curl = curl;
  char error[CURL_ERROR_SIZE] = {0};
  lc::curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  lc::curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  lc::curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);  // the caller follows, deciding about the token
#if LIBCURL_VERSION_NUM >= 0x075500
  lc::curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
  lc::curl_easy_setopt(curl, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  lc::curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  lc::curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  lc::curl_easy_setopt(curl, CURLOPT_NETRC, static_cast<long>(CURL_NETRC_IGNORED));
  lc::curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, std::max(options.connect_timeout_s, 1L));
  lc::curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, std::max(timeout_ms, 1L));
  lc::curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  lc::curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, t.idle_limit_s);
  lc::curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(t.max_bytes));
  lc::curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  lc::curl_easy_setopt(curl, CURLOPT_USERAGENT, "mme/" MME_VERSION_STRING);
  lc::curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  lc::curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  lc::curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  lc::curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  lc::curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  lc::curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  lc::curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  if (!token.empty()) {
    lc::curl_easy_setopt(curl, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BEARER));
    lc::curl_easy_setopt(curl, CURLOPT_XOAUTH2_BEARER, token.c_str());
  }
  t.rc = lc::curl_easy_perform(curl);
  lc::curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &t.status);
  curl_off_t connect_us = 0;
  t.reached = lc::curl_easy_getinfo(curl, CURLINFO_CONNECT_TIME_T, &connect_us) == CURLE_OK && connect_us > 0;
  if (char* loc = nullptr; lc::curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc)
    t.location = loc;
  if (t.rc != CURLE_OK) t.why = error[0] ? error : lc::curl_easy_strerror(t.rc);
  t.curl = nullptr;
  t.notice = nullptr;
  return t;
}

// scheme://host[:port] of a URL, without credentials.
std::string origin_of(const std::string& url) {
  const std::string r = redact(url);
  const auto scheme_end = r.find("://");
  if (scheme_end == std::string::npos) return r;
  return r.substr(0, r.find('/', scheme_end + 3));
}

bool is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

struct Downloaded {
  std::string body;
  std::string commit;
  std::string url;  // the first URL, redacted
};

Downloaded download(const std::string& id, const SourceOptions& options, const SourceEnvironment& env,
                    const std::vector<fs::path>& zoo) {
  static CurlGlobal global;
  const Endpoint endpoint = hub_endpoint(env);
  const std::string token = hub_token(env);
  std::string revision_in_url = options.revision;
  for (std::size_t pos = revision_in_url.find('/'); pos != std::string::npos; pos = revision_in_url.find('/'))
    revision_in_url.replace(pos, 1, "%2F");
  const std::string first_url = fmt::format("{}/{}/resolve/{}/config.json", endpoint.base, id, revision_in_url);
  std::string url = first_url;
  const std::string shown = redact(url);
  if (!token.empty() && endpoint.parts.scheme == "http" && !is_loopback(endpoint.parts.host))
    spdlog::warn("HF_TOKEN goes to {} over plain http: anyone on the path can read it", endpoint.parts.host);
  spdlog::info("downloading {}", shown);
  // Errors name what was contacted: the config's URL, and after a redirect the URL that
  // failed as well (a CDN, another host), never the endpoint for a host that is not it.
  auto at = [&] { return url == first_url ? shown : fmt::format("{} (redirected to {})", shown, redact(url)); };
  DownloadNotice notice(id, redact(endpoint.base), options.download_notice);

  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(std::max(options.transfer_timeout_s, 1L));
  const int max_redirects = std::max(options.max_redirects, 0);
  std::string commit;
  Transfer t;
  for (int hop = 0;; ++hop) {
    const auto parts = parse_url(url);
    // The token goes to the endpoint's own scheme, host and port, never elsewhere (a CDN, or
    // any host a redirect names).
    const bool to_endpoint = parts && parts->same_origin(endpoint.parts);
    const long left_ms = static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left_ms <= 0)
      throw NotFoundError(
          fmt::format("{}: timed out: the download took longer than {} s", at(), options.transfer_timeout_s));
    t = fetch(url, to_endpoint ? token : std::string(), options, left_ms, notice);
    spdlog::trace("{}: HTTP {} ({} body bytes, token {})", redact(url), t.status, t.body.size(),
                  to_endpoint && !token.empty() ? "sent" : "not sent");
    if (commit.empty()) commit = t.commit;  // the endpoint's own answer comes first
    if (t.rc != CURLE_OK || !is_redirect(t.status)) break;
    if (hop >= max_redirects)
      throw NotFoundError(fmt::format("{}: more than {} redirects; giving up", shown, max_redirects));
    const auto next = parse_url(t.location);
    if (t.location.empty() || !next)
      throw NotFoundError(fmt::format("{}: HTTP {} redirect without a usable Location", at(), t.status));
    if (next->scheme != "http" && next->scheme != "https")
      throw NotFoundError(fmt::format("{}: refusing a redirect to a {}: URL", at(), next->scheme));
    if (parts && parts->scheme == "https" && next->scheme == "http")
      throw NotFoundError(
          fmt::format("{}: refusing a redirect from https to plain http ({})", at(), redact(t.location)));
    spdlog::debug("HTTP {} redirect to {}", t.status, redact(t.location));
    url = t.location;
  }

  const long status = t.status;
  const bool have_token = !token.empty();
  if (status == 401 || status == 403) {
    if (t.error_code == "RepoNotFound")
      throw NotFoundError(fmt::format(
          "{}: HTTP {}: repository '{}' not found, or it is private{}", at(), status, id,
          have_token ? " and HF_TOKEN gives no access to it" : ": check the name, or set HF_TOKEN to an access token"));
    if (have_token)
      throw NotFoundError(
          fmt::format("{}: HTTP {}: HF_TOKEN is set but gives no access to '{}': accept the model's "
                      "licence on its hub page with that account, or use another token",
                      at(), status, id));
    throw NotFoundError(
        fmt::format("{}: HTTP {}: '{}' is gated or private: accept its licence on the hub and set "
                    "HF_TOKEN to an access token",
                    at(), status, id));
  }
  if (status == 404) {
    if (t.error_code == "RevisionNotFound")
      throw NotFoundError(fmt::format("{}: HTTP 404: '{}' has no revision '{}'", at(), id, options.revision));
    if (t.error_code == "EntryNotFound")
      throw NotFoundError(
          fmt::format("{}: HTTP 404: '{}' (revision '{}') has no config.json", at(), id, options.revision));
    throw NotFoundError(fmt::format("{}: HTTP 404: no model '{}' (revision '{}') on {}", at(), id, options.revision,
                                    url == first_url ? redact(endpoint.base) : origin_of(url)));
  }
  if (t.too_large || t.rc == CURLE_FILESIZE_EXCEEDED)
    throw NotFoundError(
        fmt::format("{}: the response is larger than {} bytes; that is no config.json", at(), options.max_bytes));
  if (t.rc != CURLE_OK) {
    if (!t.reached && (t.rc == CURLE_COULDNT_RESOLVE_HOST || t.rc == CURLE_COULDNT_CONNECT ||
                       t.rc == CURLE_COULDNT_RESOLVE_PROXY || t.rc == CURLE_OPERATION_TIMEDOUT))
      throw NotFoundError(fmt::format(
          "cannot reach {} for {}: {} (offline? set HF_HUB_OFFLINE=1 and use a bundled "
          "model: {}; or give a local config.json)",
          url == first_url ? redact(endpoint.base) : fmt::format("{} (where {} redirects)", origin_of(url), shown), id,
          t.why, bundled_names(zoo)));
    if (t.stalled)
      throw NotFoundError(
          fmt::format("{}: timed out: no data for {} s", at(), std::max(options.low_speed_timeout_s, 1L)));
    if (t.rc == CURLE_OPERATION_TIMEDOUT) throw NotFoundError(fmt::format("{}: timed out: {}", at(), t.why));
    if (t.rc == CURLE_PEER_FAILED_VERIFICATION || t.rc == CURLE_SSL_CONNECT_ERROR || t.rc == CURLE_SSL_CACERT_BADFILE ||
        t.rc == CURLE_SSL_CERTPROBLEM)
      throw NotFoundError(
          fmt::format("{}: TLS failure: {} (certificates are always verified; check the system CA "
                      "certificates, or a proxy that intercepts TLS)",
                      at(), t.why));
    if (t.rc == CURLE_PARTIAL_FILE)
      throw NotFoundError(fmt::format("{}: the connection closed before the whole file arrived: {}", at(), t.why));
    throw NotFoundError(fmt::format("cannot download {}: {}", at(), t.why));
  }
  if (is_redirect(status))
    throw NotFoundError(fmt::format("{}: HTTP {} redirect that could not be followed", at(), status));
  if (status != 200) throw NotFoundError(fmt::format("{}: unexpected HTTP status {}", at(), status));
  return {std::move(t.body), commit, shown};
}

ResolvedModel download_to_cache(const std::string& id, const SourceOptions& options, const SourceEnvironment& env,
                                const fs::path& cache, const std::vector<fs::path>& zoo) {
  Downloaded d = download(id, options, env, zoo);
  if (all_space(d.body))
    throw ConfigError(fmt::format("{}: the response is empty; that is no config.json; nothing cached", d.url));
  // Parse before caching: a truncated or broken body never becomes a cache entry.
  nlohmann::json config = parse_config_text(d.body, d.url);
  // Valid JSON that is not a config ([1,2,3]) would stay in the cache and fail every later run.
  if (!config.is_object())
    throw ConfigError(
        fmt::format("{}: expected a JSON object (a config.json), got {}; nothing cached", d.url, config.type_name()));
  const std::string commit = d.commit.empty() ? options.revision : d.commit;
  if (!safe_component(commit)) {
    spdlog::debug("{}: no commit id from the server; not cached", d.url);
    return {select_text_config(std::move(config)), id, d.url, "hf-hub"};
  }
  const fs::path repo = repo_cache_dir(cache, id);
  const fs::path target = repo / "snapshots" / commit / "config.json";
  try {
    write_file_atomically(target, d.body);
    if (commit != options.revision) write_file_atomically(repo / "refs" / options.revision, commit);
  } catch (const std::exception& e) {
    spdlog::warn("cannot cache {} ({}); the next run downloads it again", d.url, e.what());
    return {select_text_config(std::move(config)), id, d.url, "hf-hub"};
  }
  spdlog::info("cached {}", target.string());
  return {select_text_config(std::move(config)), id, target, "hf-hub"};
}

}  // namespace

namespace {
std::mutex g_bundled_mutex;
fs::path g_bundled_dir;  // set_bundled_models_dir(); empty: beside the executable
}  // namespace

void set_bundled_models_dir(const fs::path& dir) {
  const std::lock_guard<std::mutex> lock(g_bundled_mutex);
  g_bundled_dir = dir;
}

fs::path bundled_models_dir() {
  const std::lock_guard<std::mutex> lock(g_bundled_mutex);
  return g_bundled_dir;
}

std::vector<fs::path> zoo_dirs(const SourceEnvironment& env) {
  std::vector<fs::path> dirs = env.models_path;
  if (!env.bundled_dir.empty()) {
    dirs.push_back(env.bundled_dir);
    return dirs;
  }
  // executable_dir() is the kernel's resolved path, so folding "bin/.." is exact.
  if (fs::path exe = executable_dir(); !exe.empty())
    dirs.push_back((exe / ".." / "share" / "mme" / "models").lexically_normal());
  return dirs;
}

std::vector<fs::path> default_zoo_dirs() { return zoo_dirs(SourceEnvironment::from_process()); }

SourceEnvironment SourceEnvironment::from_process() {
  SourceEnvironment env;
  env.models_path = split_path_list(env_or_empty("MME_MODELS_PATH"));
  env.bundled_dir = bundled_models_dir();
  env.hf_endpoint = env_or_empty("HF_ENDPOINT");
  env.hf_token = env_or_empty("HF_TOKEN");
  env.hf_offline = env_true("HF_HUB_OFFLINE");
  env.hf_cache = hf_cache_dir();
  return env;
}

std::vector<BundledModel> list_bundled_models(const std::vector<fs::path>& zoo_dirs) {
  std::vector<BundledModel> out;
  for (const auto& dir : zoo_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<BundledModel> here;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const std::string folder = it->path().filename().string();
      const auto sep = folder.find("--");
      std::error_code ec2;
      if (sep == std::string::npos || !fs::is_regular_file(it->path() / "config.json", ec2)) continue;
      std::string name = folder.substr(0, sep) + "/" + folder.substr(sep + 2);
      if (!looks_like_hub_id(name)) continue;
      here.push_back({name, it->path() / "config.json"});
    }
    // Directory order is arbitrary: sort first, so that of two spellings the same one wins every time.
    std::sort(here.begin(), here.end(), [](const auto& a, const auto& b) {
      return lower(a.name) != lower(b.name) ? lower(a.name) < lower(b.name) : a.name < b.name;
    });
    for (auto& b : here) {
      const bool dup =
          std::any_of(out.begin(), out.end(), [&](const BundledModel& o) { return lower(o.name) == lower(b.name); });
      if (!dup) out.push_back(std::move(b));
    }
  }
  return out;
}

nlohmann::json parse_config_text(std::string_view text, const std::string& source) {
  if (text.find('\0') != std::string_view::npos)
    throw ConfigError(fmt::format("{}: contains NUL bytes; not a JSON text file", source));
  if (all_space(text)) throw ConfigError(fmt::format("{}: empty; expected a JSON config", source));
  check_json_nesting(text, source);  // before parsing: deep documents exhaust the stack
  try {
    return nlohmann::json::parse(text.begin(), text.end(), nullptr, true, false);
  } catch (const nlohmann::json::exception& e) {
    // parse_error (syntax) and out_of_range (a number beyond double, 1e400): drop the
    // "[json.exception.parse_error.101] " prefix.
    std::string what = e.what();
    if (auto close = what.find("] "); what.rfind("[json.exception", 0) == 0 && close != std::string::npos)
      what = what.substr(close + 2);
    for (auto& c : what)
      if (c == '\n' || c == '\r') c = ' ';
    throw ConfigError(fmt::format("{}: invalid JSON: {}", source, what));
  }
}

nlohmann::json read_config_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw NotFoundError(fmt::format("{}: no such file", path.string()));
  if (!fs::is_regular_file(path, ec)) throw NotFoundError(fmt::format("{}: not a regular file", path.string()));
  const auto size = fs::file_size(path, ec);
  if (!ec && size > (16u << 20))
    throw ConfigError(fmt::format("{}: {} bytes is far larger than any config.json", path.string(), size));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NotFoundError(fmt::format("{}: cannot open the file: {}", path.string(), std::strerror(errno)));
  std::string text;
  text.reserve(static_cast<std::size_t>(ec ? 0 : size));
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > (16u << 20))  // it grew while we read it
      throw ConfigError(fmt::format("{}: far larger than any config.json", path.string()));
  }
  if (all_space(text)) throw ConfigError(fmt::format("{}: the file is empty", path.string()));
  return parse_config_text(text, path.string());
}

fs::path hf_cache_dir() {
  // huggingface_hub's order (constants.py): HF_HUB_CACHE, the older HUGGINGFACE_HUB_CACHE,
  // $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub.
  for (const char* var : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
    if (const std::string v = env_or_empty(var); !v.empty()) return expand_home(v);
  if (const std::string h = env_or_empty("HF_HOME"); !h.empty()) return expand_home(h) / "hub";
  if (const std::string x = env_or_empty("XDG_CACHE_HOME"); !x.empty()) return expand_home(x) / "huggingface" / "hub";
  return home_dir() / ".cache" / "huggingface" / "hub";
}

bool looks_like_hub_id(const std::string& arg) {
  // huggingface_hub's validate_repo_id: [A-Za-z0-9_.-], no "--" or "..", no leading or trailing
  // '-' or '.', a name of at most 96 characters. One org, one name.
  const auto slash = arg.find('/');
  if (slash == std::string::npos || arg.find('/', slash + 1) != std::string::npos) return false;
  const std::string org = arg.substr(0, slash), name = arg.substr(slash + 1);
  if (org.empty() || name.empty() || org.size() > 96 || name.size() > 96) return false;
  for (const auto& part : {org, name}) {
    if (!std::all_of(part.begin(), part.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; }))
      return false;
    if (part.find("--") != std::string::npos || part.find("..") != std::string::npos) return false;
    for (char edge : {part.front(), part.back()})
      if (edge == '-' || edge == '.') return false;
  }
  return true;
}

ResolvedModel resolve_model(const std::string& arg, const SourceOptions& options) {
  const SourceEnvironment env = options.environment ? *options.environment : SourceEnvironment::from_process();
  if (arg.empty()) throw UsageError("MODEL is empty: give a hub id (org/name), a config.json or a folder");
  // A path is at most 4096 bytes (PATH_MAX): longer is named by its length, not echoed (10 MB once).
  constexpr std::size_t kMaxModelArgument = 4096;
  if (arg.size() > kMaxModelArgument)
    throw NotFoundError(
        fmt::format("MODEL '{}' is {} bytes long: no file path (at most {} bytes) or hub id "
                    "(org/name) is that long",
                    excerpt(arg), arg.size(), kMaxModelArgument));
  std::error_code ec;
  const fs::path local(arg);
  if (fs::exists(local, ec)) {
    if (fs::is_directory(local, ec)) {
      const fs::path cfg = local / "config.json";
      if (!fs::exists(cfg, ec)) throw NotFoundError(fmt::format("{}: the folder has no config.json", local.string()));
      return {select_text_config(read_config_file(cfg)), local.string(), cfg, "local"};
    }
    return {select_text_config(read_config_file(local)), local.string(), local, "local"};
  }
  const auto zoo = options.zoo_dirs.empty() ? zoo_dirs(env) : options.zoo_dirs;
  if (!looks_like_hub_id(arg)) {
    const bool pathish = std::string_view("/.~").find(arg.front()) != std::string_view::npos ||
                         std::count(arg.begin(), arg.end(), '/') > 1 ||
                         (arg.size() > 5 && lower(arg.substr(arg.size() - 5)) == ".json");
    if (pathish) throw NotFoundError(fmt::format("{}: no such file or folder", arg));
    throw NotFoundError(
        fmt::format("{}: no such file or folder, and not a hub id of the form org/name (bundled "
                    "models: {})",
                    arg, bundled_names(zoo)));
  }
  check_revision(options.revision);
  // A bundled config is the hub's main revision: another revision is read from the cache or
  // the hub, and the user is told so.
  const bool bundled_revision = options.revision == "main";
  // The exact spelling first (one stat per zoo folder), then a case-insensitive scan.
  for (const auto& dir : bundled_revision ? zoo : std::vector<fs::path>{}) {
    const std::string folder = arg.substr(0, arg.find('/')) + "--" + arg.substr(arg.find('/') + 1);
    std::error_code exact_ec;
    const fs::path exact = dir / folder / "config.json";
    if (fs::is_regular_file(exact, exact_ec)) {
      spdlog::debug("{}: bundled config {}", arg, exact.string());
      return {select_text_config(read_config_file(exact)), arg, exact, "bundled"};
    }
  }
  bool bundled_elsewhere = false;  // bundled, but another revision was asked for
  for (const auto& b : list_bundled_models(zoo)) {
    if (lower(b.name) != lower(arg)) continue;
    if (!bundled_revision) {
      bundled_elsewhere = true;
      spdlog::warn("{} is bundled as its main revision; --revision {} is read from the Hugging Face cache or hub",
                   b.name, options.revision);
      break;
    }
    spdlog::debug("{}: bundled config {}", arg, b.path.string());
    return {select_text_config(read_config_file(b.path)), b.name, b.path, "bundled"};
  }
  const fs::path& cache = env.hf_cache;
  if (auto cached = find_in_cache(cache, arg, options.revision)) {
    spdlog::debug("{}: cached config {}", arg, cached->string());
    return {select_text_config(read_config_file(*cached)), arg, *cached, "hf-cache"};
  }
  const bool offline_env = env.hf_offline;
  if (!options.allow_network || offline_env) {
    const char* why = offline_env ? "HF_HUB_OFFLINE is set: unset it to download" : "the caller allows no network";
    if (bundled_elsewhere)
      throw NotFoundError(
          fmt::format("{} revision {}: not in the Hugging Face cache ({}), and downloads are off ({}); the "
                      "bundled config is the main revision (drop --revision to use it)",
                      arg, options.revision, cache.string(), why));
    throw NotFoundError(
        fmt::format("{}: not bundled and not in the Hugging Face cache ({}), and downloads are off "
                    "({}); bundled models: {}",
                    arg, cache.string(), why, bundled_names(zoo)));
  }
  return download_to_cache(arg, options, env, cache, zoo);
}

}  // namespace mme
