#include <mme/sdk/plugin.hpp>

#include "mla.hpp"

MME_PLUGIN("layer_mla", MME_VERSION_STRING, mme::plugins::register_mla)
