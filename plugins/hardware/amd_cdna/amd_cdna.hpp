// Hardware profiles of AMD Instinct CDNA GPUs (MI300X).
#pragma once

#include <mme/sdk/hardware_profile.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {
void register_amd_cdna(Registrar& registry);
}
