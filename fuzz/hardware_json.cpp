// Fuzz target: JSON hardware profiles (the json_profiles plugin: --hardware-file FILE,
// MME_HARDWARE_PATH, MME_HARDWARE_FILES).
//
// Input: the bytes of a profile file. They are written to a file and read the way the plugin
// reads its files (load_hardware_profiles: the file is the unit, a bad one is a warning), with
// the built-in GPUs as names already taken; every profile it accepts is then registered and
// looked up by name and alias, and judged against a fixed estimate.
//
// Oracle: nothing may be thrown by the loading (a bad file is a warning); a profile the plugin
// accepts must also be accepted by Registry::add_hardware (else the whole plugin would be
// rejected) and be found by each of its names; only mme::Error may come out of the rest.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <mme/engine/fit.hpp>
#include <mme/engine/registry.hpp>

#include "fuzz_support.hpp"
#include "json_profiles.hpp"
#include <unistd.h>

namespace {

std::string g_file;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  g_file = std::string(tmp && *tmp ? tmp : "/tmp") + "/mme-fuzz-hardware-" + std::to_string(::getpid()) + ".json";
  std::atexit([] { std::remove(g_file.c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream out(g_file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const mme::Registry& builtins = mme::fuzz::registry();
  std::vector<mme::HardwareProfile> profiles;
  try {
    profiles = mme::plugins::load_hardware_profiles(
        {g_file},
        [&](const std::string& name) -> std::string {
          const auto* h = builtins.find_hardware(name);
          return h ? h->name : "";
        },
        [](const std::string&) {});
  } catch (const std::exception& e) {
    mme::fuzz::finding("hardware_json", std::string("load_hardware_profiles threw: ") + e.what());
  }
  mme::Registry registry;
  for (const auto& h : profiles) {
    try {
      registry.add_hardware(h);
    } catch (const std::exception& e) {
      mme::fuzz::finding("hardware_json", std::string("an accepted profile is refused by the registry: ") + e.what());
    }
  }
  for (const auto& h : profiles) {
    for (const std::string& name : [&] {
           std::vector<std::string> names{h.name};
           names.insert(names.end(), h.aliases.begin(), h.aliases.end());
           return names;
         }()) {
      const auto* found = registry.find_hardware(name);
      if (!found || found->name != h.name)
        mme::fuzz::finding("hardware_json",
                           "profile '" + h.name + "' is not found by its name or alias '" + name + "'");
    }
    mme::fuzz::run_checked("hardware_json", [&] {
      mme::Estimate est;
      est.stages.resize(1);
      est.stages[0].total_bytes = std::int64_t{80} << 30;
      (void)mme::judge_fit(est, h, mme::kDefaultHeadroom);
      if (mme::allocatable_bytes(h) < 0) mme::fuzz::finding("hardware_json", "negative allocatable bytes");
    });
  }
  return 0;
}
