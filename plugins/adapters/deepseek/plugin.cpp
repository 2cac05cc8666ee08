#include <mme/sdk/plugin.hpp>

#include "deepseek_adapter.hpp"

MME_PLUGIN("adapter_deepseek", MME_VERSION_STRING, mme::plugins::register_deepseek_adapter)
