// The built-in layer-memory plugins (every plugin named layer_*: plugins/layers/*), registered
// from their static archives without dlopen: what a test's registry needs before it builds an
// Estimator or a Planner.
#pragma once

#include <mme/engine/registry.hpp>

namespace mme::test {

// Registers every built-in layer plugin under its module's name; throws if one is refused.
void register_layer_plugins(Registry& registry);

}  // namespace mme::test
