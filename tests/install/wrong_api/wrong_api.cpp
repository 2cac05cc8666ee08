// MME_PLUGIN by hand, with api_version one past this SDK's.
#include <mme/plugin.hpp>

namespace {
void register_nothing(mme::Registry&) {}
const mme::PluginInfo* entry() {
  static const mme::PluginInfo info{mme::kPluginApiVersion + 1, MME_ABI_TAG, "wrong_api", "1.0.0", &register_nothing};
  return &info;
}
}  // namespace

BOOST_DLL_ALIAS(entry, mme_plugin_entry)
