// The GPU a run names: `--gpu NAME`, or a spec file's `infrastructure.gpu`, looked up among the
// loaded profiles by name or alias (Registry::find_hardware: ignoring case, '-', '_' and
// spaces). `mme estimate`, `compare`, `validate --from-log`, `plan` and `init` all look it up
// here, so one name finds the same profile everywhere and an unknown one gets one message.
#pragma once

#include <optional>
#include <string>

#include "mme/engine/registry.hpp"
#include "mme/inputs/spec_file.hpp"

namespace mme {

// The canonical names of the loaded profiles, in registration order, comma separated; "none
// loaded" when there is none.
std::string known_gpu_names(const Registry& registry);

// The profile `flag` (the --gpu value) names, else the one the spec's infrastructure.gpu names,
// else nullptr (neither is given). An unknown name throws: from the flag a UsageError
// "--gpu: unknown GPU 'X' (known: A, B)", from the file a ConfigError
// "spec.yaml:7: infrastructure.gpu: unknown GPU 'X' (known: A, B)".
const HardwareProfile* find_gpu(const Registry& registry, const std::optional<std::string>& flag,
                                const SpecFile* spec = nullptr);

}  // namespace mme
