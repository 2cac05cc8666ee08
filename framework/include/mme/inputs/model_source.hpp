// Model sources: where a MODEL argument's config.json comes from, in this order:
//   1. an existing local path (a config.json file, or a folder holding one);
//   2. the bundled zoo (models/<org>--<name>/config.json, org/name matched ignoring case);
//   3. the Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub);
//   4. a download from $HF_ENDPOINT (default https://huggingface.co), stored in that cache.
// docs/model-sources.md describes the environment, the cache layout and the security rules.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mme {

// The environment the model sources read (docs/model-sources.md), as values. A host that runs
// requests on several threads reads it once per request with the process quiet (from_process())
// and passes it on, so no request reads the environment while another thread may change it.
struct SourceEnvironment {
  std::vector<std::filesystem::path> models_path;  // MME_MODELS_PATH, '~' expanded
  std::filesystem::path bundled_dir;               // the bundled models; empty: <exe>/../share/mme/models
  std::string hf_endpoint;                         // HF_ENDPOINT as set; empty: https://huggingface.co
  std::string hf_token;                            // HF_TOKEN as set
  bool hf_offline = false;                         // HF_HUB_OFFLINE is 1, true, yes or on
  std::filesystem::path hf_cache;                  // hf_cache_dir()
  // The variables now; bundled_dir from set_bundled_models_dir().
  static SourceEnvironment from_process();
};

// The zoo folders of an environment: its models_path, then its bundled models (bundled_dir, or
// <exe>/../share/mme/models).
std::vector<std::filesystem::path> zoo_dirs(const SourceEnvironment& environment);

struct SourceOptions {
  std::string revision = "main";                // branch, tag, commit or refs/pr/N; checked for safety
  std::vector<std::filesystem::path> zoo_dirs;  // empty: default_zoo_dirs()
  bool allow_network = true;                    // HF_HUB_OFFLINE=1 turns it off as well
  long connect_timeout_s = 10;                  // per connection
  long transfer_timeout_s = 60;                 // the whole download, redirects included
  long low_speed_timeout_s = 15;                // abort when no byte arrives for this long (a stalled server)
  std::int64_t max_bytes = 4 << 20;             // a config.json is small; refuse more
  int max_redirects = 5;                        // redirects followed; HF_TOKEN only goes to the endpoint's origin
  // The environment read; none: the process's (SourceEnvironment::from_process()) when needed.
  std::optional<SourceEnvironment> environment;
  // A download says what it fetches on stderr when stderr is a terminal (the CLI; off for hosts
  // that print nothing behind their caller's back, and with the CLI's -q).
  bool download_notice = true;
};

struct ResolvedModel {
  nlohmann::json config;       // the text model's config (text_config of a multimodal config)
  std::string name;            // canonical name, e.g. "deepseek-ai/DeepSeek-V3" or the path
  std::filesystem::path path;  // the config.json read (the URL, if a download could not be cached)
  std::string origin;          // "local", "bundled", "hf-cache", "hf-hub"
};

struct BundledModel {
  std::string name;  // org/name
  std::filesystem::path path;
};

// Zoo folders: $MME_MODELS_PATH (colon-separated), then the bundled models:
// set_bundled_models_dir()'s folder if one is set, else <exe>/../share/mme/models.
std::vector<std::filesystem::path> default_zoo_dirs();
// The process-wide default of SourceEnvironment::bundled_dir, for a program that ships the bundled
// models elsewhere than beside its executable and reads no per-request setting: the folder
// searched after $MME_MODELS_PATH instead of <exe>/../share/mme/models. Empty: back to the
// executable's. Safe to call from any thread; hosts that run requests pass bundled_dir instead.
void set_bundled_models_dir(const std::filesystem::path& dir);
std::filesystem::path bundled_models_dir();
std::vector<BundledModel> list_bundled_models(const std::vector<std::filesystem::path>& zoo_dirs);

// Reads and parses a JSON config file; throws ConfigError (bad JSON) / NotFoundError.
nlohmann::json read_config_file(const std::filesystem::path& path);
// Parses config text; `source` names it in errors.
nlohmann::json parse_config_text(std::string_view text, const std::string& source);

// Resolves a MODEL argument. Throws NotFoundError (with what to do), ConfigError (a config that
// is not JSON), or UsageError (an unsafe revision, a malformed HF_ENDPOINT or HF_TOKEN).
ResolvedModel resolve_model(const std::string& arg, const SourceOptions& options = {});

// The hub cache root: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub (huggingface_hub's order).
std::filesystem::path hf_cache_dir();

// True for strings shaped like a hub id "org/name" (letters, digits, '-', '_', '.'; no "--" or
// "..", no '-' or '.' at either end of a part, a name of at most 96 characters).
bool looks_like_hub_id(const std::string& arg);

}  // namespace mme
