#include "source_test_env.hpp"

#include <algorithm>
#include <cstdlib>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

namespace fs = std::filesystem;

namespace mme::test {

namespace {
const char* const kVars[] = {"HF_HUB_CACHE",   "HUGGINGFACE_HUB_CACHE",
                             "HF_HOME",        "XDG_CACHE_HOME",
                             "HF_ENDPOINT",    "HF_TOKEN",
                             "HF_HUB_OFFLINE", "MME_MODELS_PATH",
                             "HOME",           "http_proxy",
                             "HTTP_PROXY",     "https_proxy",
                             "HTTPS_PROXY",    "all_proxy",
                             "ALL_PROXY",      "no_proxy",
                             "NO_PROXY"};
const char* const kKeep[] = {"HF_HUB_OFFLINE", "HOME"};
}  // namespace

SourceEnv::SourceEnv() {
  for (const char* name : kVars) {
    const char* v = std::getenv(name);
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
    if (std::find_if(std::begin(kKeep), std::end(kKeep), [&](const char* k) { return std::string(k) == name; }) ==
        std::end(kKeep))
      ::unsetenv(name);
  }
}

SourceEnv::~SourceEnv() {
  for (const auto& [name, value] : saved_) {
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
}

void SourceEnv::set(const std::string& name, const std::string& value) { ::setenv(name.c_str(), value.c_str(), 1); }
void SourceEnv::unset(const std::string& name) { ::unsetenv(name.c_str()); }

LogCapture::LogCapture() : out_(std::make_shared<std::ostringstream>()), previous_(spdlog::default_logger()) {
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*out_);
  auto logger = std::make_shared<spdlog::logger>("mme-test-capture", sink);
  logger->set_level(spdlog::level::trace);
  logger->set_pattern("%l: %v");
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

LogCapture::~LogCapture() {
  spdlog::set_default_logger(previous_);
  spdlog::drop("mme-test-capture");
}

std::string LogCapture::text() const { return out_->str(); }

std::vector<std::string> list_tree(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    out.push_back(fs::relative(it->path(), root).generic_string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace mme::test
