// Helpers for the model-source tests: an environment that is restored afterwards, a spdlog
// capture, and a listing of every entry under a folder (to prove nothing was left behind).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace spdlog {
class logger;
}

namespace mme::test {

// Every variable the resolver (or libcurl, for proxies) reads. The constructor saves them and
// clears them all except HF_HUB_OFFLINE; the destructor puts the saved values back.
class SourceEnv {
 public:
  SourceEnv();
  ~SourceEnv();
  SourceEnv(const SourceEnv&) = delete;
  SourceEnv& operator=(const SourceEnv&) = delete;

  static void set(const std::string& name, const std::string& value);
  static void unset(const std::string& name);

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Installs a default spdlog logger at trace level that writes into a string; the destructor
// reinstates the previous default logger.
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string text() const;

 private:
  std::shared_ptr<std::ostringstream> out_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Every file and folder below `root`, as sorted generic relative paths ("a", "a/b.txt").
std::vector<std::string> list_tree(const std::filesystem::path& root);

}  // namespace mme::test
