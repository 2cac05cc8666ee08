#include <mme/sdk/plugin.hpp>

#include "moe.hpp"

MME_PLUGIN("layer_moe", MME_VERSION_STRING, mme::plugins::register_moe)
