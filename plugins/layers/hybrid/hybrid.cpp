#include "hybrid.hpp"

#include <memory>

namespace mme::plugins {

void register_hybrid_layers(Registrar& registry) {
  registry.add_layer_model(std::make_shared<MambaMixerModel>());
  registry.add_layer_model(std::make_shared<IdentityBlockModel>(BlockRole::kAttention));
  registry.add_layer_model(std::make_shared<IdentityBlockModel>(BlockRole::kMlp));
}

}  // namespace mme::plugins
