#include <mme/sdk/plugin.hpp>

#include "nvidia_blackwell.hpp"

MME_PLUGIN("hw_nvidia_blackwell", MME_VERSION_STRING, mme::plugins::register_nvidia_blackwell)
