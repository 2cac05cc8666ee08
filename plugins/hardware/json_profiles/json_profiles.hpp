// Hardware plugin "json_profiles": GPU profiles read from JSON files, no compiler needed.
//
// Files: every *.json (in name order) in each folder of the hardware path, then each hardware
// file. The host gives both as values while the plugin registers (mme/sdk/load_settings.hpp:
// the front end's MME_HARDWARE_PATH and MME_HARDWARE_FILES, read once, and the request's
// `--hardware-file FILE`s); a host that gives none leaves the plugin to read MME_HARDWARE_PATH
// and MME_HARDWARE_FILES (colon-separated) itself. A file holds one profile object or an array
// of them:
//
//   {"name": "ACME-X1", "memory_gib": 96, "aliases": ["x1"], "reserved_gib": 1.5,
//    "hbm_bandwidth_gbps": 3000, "bf16_tflops": 800, "fp8_tflops": 1600, "link_bandwidth_gbps": 600,
//    "vendor": "ACME", "architecture": "hopper", "source": "ACME X1 datasheet"}
//
// `name` and `memory_gib` are required. A file is the unit: a bad one (invalid JSON, a missing
// or mistyped key, a negative figure, a name or alias already taken) costs one warning naming
// the file and the reason, and none of its profiles is registered. docs/plugin-authoring.md
// describes the format.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <mme/sdk/hardware_profile.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

// GiB of reserved memory (CUDA context + NCCL buffers) when a profile gives no reserved_gib.
inline constexpr double kJsonDefaultReservedGib = 1.0;

// The profiles of one parsed document (an object or a non-empty array of objects); `source`
// is the default of each profile's `source`. Throws std::invalid_argument saying what is wrong
// (the entry, for an array, and the key) if anything is. Names are checked only within it.
std::vector<HardwareProfile> parse_hardware_profiles(const nlohmann::json& document, const std::string& source);

// The files to read, in order: the *.json of each folder of `hardware_path` (sorted by name),
// then each entry of `hardware_files`; both are colon-separated lists. A folder that does not
// exist is reported through `warn` and skipped.
std::vector<std::filesystem::path> hardware_profile_files(std::string_view hardware_path,
                                                          std::string_view hardware_files,
                                                          const std::function<void(const std::string&)>& warn);
// The same with the folders and files as lists.
std::vector<std::filesystem::path> hardware_profile_files(const std::vector<std::string>& hardware_path,
                                                          const std::vector<std::string>& hardware_files,
                                                          const std::function<void(const std::string&)>& warn);

// Reads and parses every file in order. A bad file, or one with a name or alias that an
// earlier file gave or for which `taken_by` names a holder (non-empty), gets one `warn`
// ("hardware profile file F skipped: why") and none of its profiles is returned.
std::vector<HardwareProfile> load_hardware_profiles(const std::vector<std::filesystem::path>& files,
                                                    const std::function<std::string(const std::string&)>& taken_by,
                                                    const std::function<void(const std::string&)>& warn);

// The plugin's registration: files from the host's load settings (else the environment), names
// checked against what the host registry already holds (Registrar::host()), warnings through spdlog.
void register_json_profiles(Registrar& registry);

}  // namespace mme::plugins
