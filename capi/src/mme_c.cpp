// libmme_c: the C ABI of mme_c.h over the embedded request layer (embedded.hpp). The library
// exports these three functions only (capi/CMakeLists.txt hides everything its static archives
// bring).
#include "mme/mme_c.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "embedded.hpp"
#include <dlfcn.h>

namespace {

// The bundled models beside this library, as the executable has them beside itself:
// <lib>/../share/mme/models (an installed tree, or the build tree's stage/).
std::filesystem::path models_beside_library() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&mme_run), &info) == 0 || !info.dli_fname) return {};
  std::error_code ec;
  const std::filesystem::path lib = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) return {};
  const std::filesystem::path models = (lib.parent_path() / ".." / "share" / "mme" / "models").lexically_normal();
  return std::filesystem::is_directory(models, ec) ? models : std::filesystem::path();
}

char* copy_out(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (!out) return nullptr;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

}  // namespace

extern "C" char* mme_run(const char* request_json) {
  try {
    static const mme::embedded::RunDefaults defaults{models_beside_library(), std::nullopt};
    if (!request_json)
      return copy_out(
          R"({"api_version":1,"ok":false,"exit_code":2,"error":{"type":"UsageError","message":"mme_run: the request is NULL"}})");
    return copy_out(mme::embedded::run_request(request_json, defaults));
  } catch (...) {
    return nullptr;  // out of memory before a document could be written
  }
}

extern "C" void mme_free(char* document) { std::free(document); }

extern "C" int mme_c_api_version(void) { return MME_C_API_VERSION; }
