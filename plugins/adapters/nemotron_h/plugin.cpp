#include <mme/sdk/plugin.hpp>

#include "nemotron_h_adapter.hpp"

MME_PLUGIN("adapter_nemotron_h", MME_VERSION_STRING, mme::plugins::register_nemotron_h_adapter)
