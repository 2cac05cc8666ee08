#include "layer_plugins.hpp"

#include <stdexcept>
#include <string>

#include "dense_mlp.hpp"
#include "gqa.hpp"
#include "language_model.hpp"
#include "mla.hpp"
#include "moe.hpp"

namespace mme::test {

void register_layer_plugins(Registry& registry) {
  const std::pair<const char*, void (*)(Registrar&)> plugins[] = {
      {"layer_gqa", plugins::register_gqa},
      {"layer_mla", plugins::register_mla},
      {"layer_dense_mlp", plugins::register_dense_mlp},
      {"layer_moe", plugins::register_moe},
      {"layer_language_model", plugins::register_language_model},
  };
  for (const auto& [name, fn] : plugins)
    if (!registry.register_plugin(name, "test", "", fn))
      throw std::runtime_error(std::string("registering ") + name + " failed");
}

}  // namespace mme::test
