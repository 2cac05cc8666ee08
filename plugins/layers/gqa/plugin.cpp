#include <mme/sdk/plugin.hpp>

#include "gqa.hpp"

MME_PLUGIN("layer_gqa", MME_VERSION_STRING, mme::plugins::register_gqa)
