#include "mme/model_source.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>

#include <curl/curl.h>
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "mme/error.hpp"
#include "mme/plugin_loader.hpp"
#include "mme/version.hpp"

namespace fs = std::filesystem;

namespace mme {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::vector<fs::path> split_path_list(const char* env) {
  std::vector<fs::path> out;
  if (!env || !*env) return out;
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ':'))
    if (!item.empty()) out.emplace_back(item);
  return out;
}

// A multimodal config keeps the language model's settings in text_config.
nlohmann::json select_text_config(nlohmann::json config) {
  if (!config.is_object()) return config;
  auto it = config.find("text_config");
  if (it != config.end() && it->is_object() && !config.contains("num_hidden_layers")) {
    nlohmann::json text = *it;
    if (!text.contains("model_type") && config.contains("model_type")) text["model_type"] = config["model_type"];
    return text;
  }
  return config;
}

bool env_true(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return false;
  std::string s = lower(v);
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

std::string bundled_names(const std::vector<fs::path>& zoo_dirs) {
  std::string out;
  for (const auto& b : list_bundled_models(zoo_dirs)) out += (out.empty() ? "" : ", ") + b.name;
  return out.empty() ? "(none found)" : out;
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
    for (const auto& e : fs::directory_iterator(cache, ec))
      if (lower(e.path().filename().string()) == want) return e.path();
  }
  return exact;
}

std::optional<fs::path> find_in_cache(const fs::path& cache, const std::string& id, const std::string& revision) {
  const fs::path repo = repo_cache_dir(cache, id);
  std::error_code ec;
  std::string commit = revision;
  fs::path ref = repo / "refs" / revision;
  if (fs::is_regular_file(ref, ec)) {
    std::ifstream in(ref);
    std::getline(in, commit);
  }
  if (commit.empty() || commit.find('/') != std::string::npos || commit.find("..") != std::string::npos)
    return std::nullopt;
  fs::path config = repo / "snapshots" / commit / "config.json";
  if (fs::is_regular_file(config, ec)) return config;
  return std::nullopt;
}

void write_file_atomically(const fs::path& target, const std::string& content) {
  fs::create_directories(target.parent_path());
  std::random_device rd;
  const fs::path tmp = target.parent_path() / fmt::format(".{}.{:x}.tmp", target.filename().string(), rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw NotFoundError(fmt::format("cannot write {}", tmp.string()));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw NotFoundError(fmt::format("cannot write {}", tmp.string()));
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw NotFoundError(fmt::format("cannot move the download into {}", target.string()));
  }
}

// ---- download

struct Download {
  std::string body;
  std::string commit;  // x-repo-commit header
  std::int64_t max_bytes = 0;
  bool too_large = false;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* d = static_cast<Download*>(user);
  const size_t bytes = size * n;
  if (static_cast<std::int64_t>(d->body.size() + bytes) > d->max_bytes) {
    d->too_large = true;
    return 0;  // aborts the transfer
  }
  d->body.append(data, bytes);
  return bytes;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* d = static_cast<Download*>(user);
  std::string line(data, size * n);
  const std::string key = "x-repo-commit:";
  if (lower(line.substr(0, key.size())) == key) {
    std::string value = line.substr(key.size());
    value.erase(std::remove_if(value.begin(), value.end(), [](unsigned char c) { return std::isspace(c); }),
                value.end());
    bool hex = !value.empty() && value.size() <= 64 &&
               std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isxdigit(c); });
    if (hex) d->commit = value;
  }
  return size * n;
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { curl_global_cleanup(); }
};

std::string endpoint() {
  const char* e = std::getenv("HF_ENDPOINT");
  std::string out = (e && *e) ? e : "https://huggingface.co";
  while (!out.empty() && out.back() == '/') out.pop_back();
  return out;
}

fs::path download_to_cache(const std::string& id, const SourceOptions& options, const fs::path& cache) {
  static CurlGlobal global;
  const std::string url = fmt::format("{}/{}/resolve/{}/config.json", endpoint(), id, options.revision);
  spdlog::info("downloading {}", url);
  Download d;
  d.max_bytes = options.max_bytes;
  CURL* curl = curl_easy_init();
  if (!curl) throw NotFoundError("cannot initialise libcurl");
  std::unique_ptr<CURL, void (*)(CURL*)> guard(curl, curl_easy_cleanup);
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, options.connect_timeout_s);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, options.transfer_timeout_s);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, options.low_speed_timeout_s);
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_bytes));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "mme/" MME_VERSION_STRING);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &d);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &d);
  // HF_TOKEN as a bearer token. libcurl sends it to the original host only: credentials are
  // dropped on a redirect to another host (CURLOPT_UNRESTRICTED_AUTH stays off).
  std::string token;
  if (const char* t = std::getenv("HF_TOKEN"); t && *t) token = t;
  if (!token.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
    curl_easy_setopt(curl, CURLOPT_XOAUTH2_BEARER, token.c_str());
    curl_easy_setopt(curl, CURLOPT_UNRESTRICTED_AUTH, 0L);
  }
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (d.too_large || rc == CURLE_FILESIZE_EXCEEDED)
    throw NotFoundError(fmt::format("{}: the response is larger than {} bytes; that is no config.json", url,
                                    options.max_bytes));
  if (rc != CURLE_OK && status < 400) {
    const std::string why = error[0] ? error : curl_easy_strerror(rc);
    throw NotFoundError(fmt::format("cannot download {}: {} (offline? set HF_HUB_OFFLINE=1 and use a bundled model: "
                                    "see `mme models`)",
                                    url, why));
  }
  if (status == 401 || status == 403)
    throw NotFoundError(fmt::format("{}: HTTP {}: the model is gated or private; accept its licence on the hub and "
                                    "set HF_TOKEN to an access token",
                                    url, status));
  if (status == 404)
    throw NotFoundError(fmt::format("{}: HTTP 404: no model '{}' (revision '{}') on {}", url, id, options.revision,
                                    endpoint()));
  if (status != 200) throw NotFoundError(fmt::format("{}: unexpected HTTP status {}", url, status));
  // Parse before caching: a truncated or broken body never becomes a cache entry.
  (void)parse_config_text(d.body, url);
  const fs::path repo = repo_cache_dir(cache, id);
  const std::string commit = d.commit.empty() ? options.revision : d.commit;
  const fs::path target = repo / "snapshots" / commit / "config.json";
  write_file_atomically(target, d.body);
  if (commit != options.revision) write_file_atomically(repo / "refs" / options.revision, commit);
  spdlog::info("cached {}", target.string());
  return target;
}

}  // namespace

std::vector<fs::path> default_zoo_dirs() {
  std::vector<fs::path> dirs = split_path_list(std::getenv("MME_MODELS_PATH"));
  if (fs::path exe = executable_dir(); !exe.empty()) dirs.push_back(exe / ".." / "share" / "mme" / "models");
  return dirs;
}

std::vector<BundledModel> list_bundled_models(const std::vector<fs::path>& zoo_dirs) {
  std::vector<BundledModel> out;
  for (const auto& dir : zoo_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<BundledModel> here;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string folder = e.path().filename().string();
      const auto sep = folder.find("--");
      std::error_code ec2;
      if (sep == std::string::npos || !fs::is_regular_file(e.path() / "config.json", ec2)) continue;
      std::string name = folder.substr(0, sep) + "/" + folder.substr(sep + 2);
      bool dup = std::any_of(out.begin(), out.end(), [&](const BundledModel& b) { return lower(b.name) == lower(name); });
      if (!dup) here.push_back({name, e.path() / "config.json"});
    }
    std::sort(here.begin(), here.end(), [](const auto& a, const auto& b) { return lower(a.name) < lower(b.name); });
    out.insert(out.end(), here.begin(), here.end());
  }
  return out;
}

nlohmann::json parse_config_text(std::string_view text, const std::string& source) {
  if (text.find('\0') != std::string_view::npos)
    throw ConfigError(fmt::format("{}: contains NUL bytes; not a JSON text file", source));
  try {
    return nlohmann::json::parse(text.begin(), text.end(), nullptr, true, false);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    if (auto pos = what.find("parse error"); pos != std::string::npos) what = what.substr(pos);
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
  if (!in) throw NotFoundError(fmt::format("{}: cannot open the file", path.string()));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty()) throw ConfigError(fmt::format("{}: the file is empty", path.string()));
  return parse_config_text(text, path.string());
}

fs::path hf_cache_dir() {
  if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HF_HOME"); h && *h) return fs::path(h) / "hub";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/root") / ".cache" / "huggingface" / "hub";
}

bool looks_like_hub_id(const std::string& arg) {
  const auto slash = arg.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == arg.size()) return false;
  if (arg.find('/', slash + 1) != std::string::npos) return false;
  if (arg.size() > 200) return false;
  for (unsigned char c : arg)
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/')) return false;
  const std::string org = arg.substr(0, slash), name = arg.substr(slash + 1);
  for (const auto& part : {org, name})
    if (part == "." || part == ".." || part.front() == '.' || part.front() == '-') return false;
  return true;
}

ResolvedModel resolve_model(const std::string& arg, const SourceOptions& options) {
  if (arg.empty()) throw UsageError("MODEL is empty: give a hub id (org/name), a config.json or a folder");
  std::error_code ec;
  const fs::path local(arg);
  if (fs::exists(local, ec)) {
    if (fs::is_directory(local, ec)) {
      const fs::path cfg = local / "config.json";
      if (!fs::exists(cfg, ec))
        throw NotFoundError(fmt::format("{}: the folder has no config.json", local.string()));
      return {select_text_config(read_config_file(cfg)), local.string(), cfg, "local"};
    }
    return {select_text_config(read_config_file(local)), local.string(), local, "local"};
  }
  const auto zoo = options.zoo_dirs.empty() ? default_zoo_dirs() : options.zoo_dirs;
  if (!looks_like_hub_id(arg)) {
    throw NotFoundError(fmt::format("{}: no such file or folder, and not a hub id of the form org/name (bundled "
                                    "models: {})",
                                    arg, bundled_names(zoo)));
  }
  for (const auto& b : list_bundled_models(zoo)) {
    if (lower(b.name) == lower(arg)) {
      spdlog::debug("{}: bundled config {}", arg, b.path.string());
      return {select_text_config(read_config_file(b.path)), b.name, b.path, "bundled"};
    }
  }
  const fs::path cache = hf_cache_dir();
  if (auto cached = find_in_cache(cache, arg, options.revision)) {
    spdlog::debug("{}: cached config {}", arg, cached->string());
    return {select_text_config(read_config_file(*cached)), arg, *cached, "hf-cache"};
  }
  if (!options.allow_network || env_true("HF_HUB_OFFLINE")) {
    throw NotFoundError(fmt::format("{}: not bundled and not in the Hugging Face cache ({}), and downloads are off "
                                    "(HF_HUB_OFFLINE); bundled models: {}",
                                    arg, cache.string(), bundled_names(zoo)));
  }
  const fs::path downloaded = download_to_cache(arg, options, cache);
  return {select_text_config(read_config_file(downloaded)), arg, downloaded, "hf-hub"};
}

}  // namespace mme
