// The plugin ABI, in the style of LLVM's pass plugins: one exported entry (a Boost.DLL
// alias named `mme_plugin_entry`) returns a PluginInfo whose first field is the API version.
// The host reads that field before anything else and rejects a mismatch.
//
//   #include <mme/plugin.hpp>
//   static void register_acme(mme::Registry& r) { r.add_hardware({...}); }
//   MME_PLUGIN("acme_hardware", "1.0.0", register_acme)
#pragma once

#include <cstdint>

#include <boost/dll/alias.hpp>

#include "mme/registry.hpp"
#include "mme/version.hpp"

namespace mme {

struct PluginInfo {
  std::uint32_t api_version;  // must equal kPluginApiVersion; read first
  const char* abi_tag;        // MME_ABI_TAG of the plugin's build
  const char* name;           // unique plugin name
  const char* version;        // the plugin's own version
  void (*register_plugin)(Registry&);
};

using PluginEntryFn = const PluginInfo*();

}  // namespace mme

#define MME_PLUGIN_ENTRY_SYMBOL "mme_plugin_entry"

#define MME_PLUGIN(NAME, VERSION, REGISTER_FN)                                                 \
  namespace mme_plugin_detail {                                                               \
  const ::mme::PluginInfo* mme_plugin_entry_impl() {                                          \
    static const ::mme::PluginInfo info{::mme::kPluginApiVersion, MME_ABI_TAG, NAME, VERSION, \
                                        &(REGISTER_FN)};                                      \
    return &info;                                                                             \
  }                                                                                           \
  }                                                                                           \
  BOOST_DLL_ALIAS(mme_plugin_detail::mme_plugin_entry_impl, mme_plugin_entry)
