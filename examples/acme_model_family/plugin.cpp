// The plugin entry: registers the adapter. A config adapter is an object (a shared_ptr); the
// host keeps this library loaded as long as any copy of it lives.
#include <memory>

#include <mme/sdk/plugin.hpp>

#include "acme_lm_adapter.hpp"

namespace {
void register_acme_model_family(mme::Registrar& registry) {
  registry.add_adapter(std::make_shared<acme::AcmeLmAdapter>());
}
}  // namespace

MME_PLUGIN("acme_model_family", "1.0.0", register_acme_model_family)
