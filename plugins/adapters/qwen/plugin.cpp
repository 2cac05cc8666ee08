#include <mme/sdk/plugin.hpp>

#include "qwen_adapter.hpp"

MME_PLUGIN("adapter_qwen", MME_VERSION_STRING, mme::plugins::register_qwen_adapter)
