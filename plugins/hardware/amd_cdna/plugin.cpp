#include <mme/sdk/plugin.hpp>

#include "amd_cdna.hpp"

MME_PLUGIN("hw_amd_cdna", MME_VERSION_STRING, mme::plugins::register_amd_cdna)
