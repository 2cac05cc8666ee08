#include <mme/sdk/plugin.hpp>

#include "nvidia_hopper.hpp"

MME_PLUGIN("hw_nvidia_hopper", MME_VERSION_STRING, mme::plugins::register_nvidia_hopper)
