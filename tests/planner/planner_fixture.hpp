// Shared by the planner's test programs: a registry of the layer models, the H100 profile and
// the given config adapters, from the static plugin archives, and the bundled configs adapted
// through it.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>

#include <mme/engine/registry.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>

#include "layer_plugins.hpp"
#include "nvidia_hopper.hpp"
#include "test_support.hpp"

namespace mme::test {

struct NamedPlugin {
  const char* name;
  void (*register_fn)(Registrar&);
};

// The adapters first, in the order given, then the four layer models and hw_nvidia_hopper.
inline std::unique_ptr<Registry> planner_registry(std::initializer_list<NamedPlugin> adapters) {
  auto reg = std::make_unique<Registry>();
  for (const auto& a : adapters) reg->register_plugin(a.name, "test", "", a.register_fn);
  test::register_layer_plugins(*reg);
  reg->register_plugin("hw_nvidia_hopper", "test", "", plugins::register_nvidia_hopper);
  return reg;
}

// The bundled config of `id` (org/name), adapted through `registry`.
inline ModelSpec bundled_model(const std::string& id, const Registry& registry) {
  std::string dir = id;
  dir.replace(dir.find('/'), 1, "--");
  const auto path = source_dir() / "models" / dir / "config.json";
  return adapt_config(read_config_file(path), id, path.string(), registry);
}

}  // namespace mme::test
