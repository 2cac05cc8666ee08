#include <mme/sdk/plugin.hpp>

#include "megatron_args_adapter.hpp"

MME_PLUGIN("adapter_megatron_args", MME_VERSION_STRING, mme::plugins::register_megatron_args)
