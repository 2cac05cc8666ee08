#include "mme/sdk/load_settings.hpp"

#include "mme/sdk/registrar.hpp"

namespace mme {

const LoadSettings* load_settings(const HostView* host) {
  // The host's registry implements both interfaces; a host that does not is given no settings.
  const auto* source = dynamic_cast<const LoadSettingsSource*>(host);
  return source ? source->load_settings() : nullptr;
}

}  // namespace mme
