// Hardware profiles of NVIDIA Blackwell GPUs (B200).
#pragma once

#include <mme/registry.hpp>

namespace mme::plugins {
void register_nvidia_blackwell(Registry& registry);
}
