#include <mme/sdk/plugin.hpp>

#include "nvidia_ampere.hpp"

MME_PLUGIN("hw_nvidia_ampere", MME_VERSION_STRING, mme::plugins::register_nvidia_ampere)
