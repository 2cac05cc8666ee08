// Hardware profiles of NVIDIA Ampere data-centre GPUs (A100 40GB, A100 80GB).
#pragma once

#include <mme/registry.hpp>

namespace mme::plugins {
void register_nvidia_ampere(Registry& registry);
}
