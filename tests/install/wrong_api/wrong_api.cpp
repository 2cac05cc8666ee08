// MME_PLUGIN by hand, with api_version one past this SDK's.
#include <mme/sdk/plugin.hpp>

namespace {
void register_nothing(mme::Registrar&) {}
const mme::PluginInfo* entry() {
  static const mme::PluginInfo info{mme::kPluginApiVersion + 1, MME_ABI_TAG, "wrong_api", "1.0.0", &register_nothing};
  return &info;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) const mme::PluginInfo* mme_plugin_info() { return entry(); }
