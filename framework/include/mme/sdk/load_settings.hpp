// What a host's load of plugins was asked for beyond the folders: values a plugin reads while it
// registers, instead of the process environment (so requests with different settings can load
// at the same time). json_profiles reads its JSON GPU profiles from here: the folders of
// MME_HARDWARE_PATH (read by the front end) and the files of --hardware-file.
//
// Not part of the plugin entry (mme/sdk/plugin.hpp): a plugin that reads the settings calls
// load_settings(registrar.host()), a function of libmme_sdk; the Registrar and HostView
// interfaces are unchanged.
#pragma once

#include <string>
#include <vector>

namespace mme {

class HostView;

struct LoadSettings {
  std::vector<std::string> hardware_path;   // folders of JSON GPU profiles, each *.json in name order
  std::vector<std::string> hardware_files;  // JSON GPU profile files, after the folders' files
};

// What a host implements to give its settings to the plugins it loads (mme::Registry does).
class LoadSettingsSource {
 public:
  // nullptr: the host was given none (a plugin falls back to its own defaults).
  virtual const LoadSettings* load_settings() const = 0;

 protected:
  ~LoadSettingsSource() = default;
};

// The settings of the load `host` belongs to (a registration's Registrar::host()); nullptr when
// there is no host or it gives none.
const LoadSettings* load_settings(const HostView* host);

}  // namespace mme
