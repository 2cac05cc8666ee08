#include <mme/sdk/plugin.hpp>

#include "gpt_oss_adapter.hpp"

MME_PLUGIN("adapter_gpt_oss", MME_VERSION_STRING, mme::plugins::register_gpt_oss_adapter)
