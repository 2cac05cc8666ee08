#include <mme/sdk/plugin.hpp>

#include "hybrid.hpp"

MME_PLUGIN("layer_hybrid", MME_VERSION_STRING, mme::plugins::register_hybrid_layers)
