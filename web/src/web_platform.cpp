// What the browser build has instead of two files it does not compile (web/CMakeLists.txt):
//   framework/src/engine/plugin_loader.cpp (Boost.DLL): executable_dir(); there is no executable
//     on disk, and the bundled models are found through set_bundled_models_dir (mme_web.cpp);
//   framework/src/inputs/spec/reader.cpp (yaml-cpp): SpecFile::line_of, which find_gpu names for
//     a spec file's GPU. No spec file is read in the browser, so find_gpu never gets one; the
//     definition is the reader's own (the line a field was written on, 0 when absent).
#include <filesystem>
#include <string>

#include <mme/engine/plugin_loader.hpp>
#include <mme/inputs/spec_file.hpp>

namespace mme {

std::filesystem::path executable_dir() { return {}; }

int SpecFile::line_of(const std::string& key) const {
  auto it = lines.find(key);
  return it == lines.end() ? 0 : it->second;
}

}  // namespace mme
