// The plugin ABI, in the style of LLVM's pass plugins: one exported C function,
// `mme_plugin_info`, returns a PluginInfo whose first field is the API version. The host reads
// that field before anything else and rejects a mismatch.
//
//   #include <mme/sdk/plugin.hpp>
//   #include <mme/sdk/hardware_profile.hpp>
//   static void register_acme(mme::Registrar& r) { r.add_hardware({...}); }
//   MME_PLUGIN("acme_hardware", "1.0.0", register_acme)
//
// This header pulls in no Boost, nlohmann/json or spdlog header, and two of mme's own.
#pragma once

#include <cstdint>

#include "mme/sdk/registrar.hpp"
#include "mme/sdk/version.hpp"

namespace mme {

struct PluginInfo {
  std::uint32_t api_version;  // must equal kPluginApiVersion; read first
  const char* abi_tag;        // MME_ABI_TAG of the plugin's build
  const char* name;           // unique plugin name
  const char* version;        // the plugin's own version
  void (*register_plugin)(Registrar&);
};

using PluginEntryFn = const PluginInfo*();

}  // namespace mme

// The exported entry. (Plugins of API version 2 and older exported a Boost.DLL alias named
// `mme_plugin_entry` instead; the host names them as built for an older API.)
#define MME_PLUGIN_ENTRY_SYMBOL "mme_plugin_info"

#define MME_PLUGIN(NAME, VERSION, REGISTER_FN)                                                                 \
  extern "C" __attribute__((visibility("default"))) const ::mme::PluginInfo* mme_plugin_info() {               \
    static const ::mme::PluginInfo info{::mme::kPluginApiVersion, MME_ABI_TAG, NAME, VERSION, &(REGISTER_FN)}; \
    return &info;                                                                                              \
  }
