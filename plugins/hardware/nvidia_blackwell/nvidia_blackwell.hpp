// Hardware profiles of NVIDIA Blackwell GPUs (B200).
#pragma once

#include <mme/sdk/hardware_profile.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {
void register_nvidia_blackwell(Registrar& registry);
}
