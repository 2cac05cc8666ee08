// Helpers shared by the test areas: where the build put things, and running the `mme`
// executable with stdout and stderr captured separately.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace mme::test {

std::filesystem::path source_dir();  // the project checkout
std::filesystem::path stage_dir();   // build/<preset>/stage (bin/, lib/, share/)
std::filesystem::path mme_exe();     // stage/bin/mme
std::filesystem::path plugin_dir();  // stage/lib/mme/plugins
std::filesystem::path models_dir();  // stage/share/mme/models
std::filesystem::path binary_dir();  // build/<preset>/tests

struct RunResult {
  int exit_code = -1;  // the process's exit status (128 + signal if killed)
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs `mme` with the arguments; `env` entries are added to (or, with an empty value,
// removed from) the environment. Never goes through a shell.
RunResult run_mme(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {});

// Runs `mme` with stdout and stderr on one pseudo-terminal; `out` holds what it printed
// (newlines as the terminal turns them: "\r\n"), `err` stays empty. exit_code -1: no
// pseudo-terminal could be opened (the caller skips).
RunResult run_on_terminal(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {});

// A fresh empty folder under the build tree, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& path, const std::string& content);
std::string read_file(const std::filesystem::path& path);

// An mme argument (no single quote in it) as a POSIX shell line must write it: single-quoted
// unless every character is one the shell leaves alone (a layout string's |, *, ( and ) are not).
std::string shell_word(const std::string& word);

}  // namespace mme::test
