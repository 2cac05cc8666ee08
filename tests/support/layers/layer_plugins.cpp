#include "layer_plugins.hpp"

#include "builtin_plugins.hpp"

namespace mme::test {

void register_layer_plugins(Registry& registry) { register_builtin_plugins(registry, "layer_"); }

}  // namespace mme::test
