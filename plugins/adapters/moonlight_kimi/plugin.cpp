#include <mme/sdk/plugin.hpp>

#include "moonlight_kimi_adapter.hpp"

MME_PLUGIN("adapter_moonlight_kimi", MME_VERSION_STRING, mme::plugins::register_moonlight_kimi_adapter)
