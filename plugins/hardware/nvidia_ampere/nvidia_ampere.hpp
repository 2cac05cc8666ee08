// Hardware profiles of NVIDIA Ampere data-centre GPUs (A100 40GB, A100 80GB).
#pragma once

#include <mme/sdk/hardware_profile.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {
void register_nvidia_ampere(Registrar& registry);
}
