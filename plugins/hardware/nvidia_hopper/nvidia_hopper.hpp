// Hardware profiles of NVIDIA Hopper GPUs (H100 SXM/PCIe, H800, H20, H200).
#pragma once

#include <mme/sdk/hardware_profile.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {
void register_nvidia_hopper(Registrar& registry);
}
