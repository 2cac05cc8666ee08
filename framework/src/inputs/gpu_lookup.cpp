#include "mme/inputs/gpu_lookup.hpp"

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

namespace mme {

std::string known_gpu_names(const Registry& registry) {
  std::string known;
  for (const auto& h : registry.hardware()) known += (known.empty() ? "" : ", ") + h.object->name;
  return known.empty() ? "none loaded" : known;
}

const HardwareProfile* find_gpu(const Registry& registry, const std::optional<std::string>& flag,
                                const SpecFile* spec) {
  const bool from_file = !flag && spec && spec->gpu;
  if (!flag && !from_file) return nullptr;
  const std::string& name = from_file ? *spec->gpu : *flag;
  if (const HardwareProfile* gpu = registry.find_hardware(name)) return gpu;
  if (from_file)
    throw ConfigError(fmt::format("{}:{}: infrastructure.gpu: unknown GPU '{}' (known: {})", spec->path,
                                  spec->line_of("infrastructure.gpu"), name, known_gpu_names(registry)));
  throw UsageError(fmt::format("--gpu: unknown GPU '{}' (known: {})", name, known_gpu_names(registry)));
}

}  // namespace mme
