// Hardware profiles of AMD Instinct CDNA GPUs (MI300X).
#pragma once

#include <mme/registry.hpp>

namespace mme::plugins {
void register_amd_cdna(Registry& registry);
}
