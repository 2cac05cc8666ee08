#include <mme/sdk/plugin.hpp>

#include "generic_hf_adapter.hpp"

MME_PLUGIN("adapter_generic_hf", MME_VERSION_STRING, mme::plugins::register_generic_hf_adapter)
