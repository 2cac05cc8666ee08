// ACME Corp's accelerators as mme hardware profiles. A hardware plugin is one registration
// function that adds HardwareProfile values; no class to implement. The figures here are
// made up (ACME is fictional); a real plugin cites the datasheet in `source`.
#include <cstdint>

#include <mme/sdk/hardware_profile.hpp>
#include <mme/sdk/plugin.hpp>

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;
constexpr std::int64_t kGiB = 1024 * kMiB;

void register_acme_hardware(mme::Registrar& registry) {
  mme::HardwareProfile x1;
  x1.name = "ACME-X1-96GB";
  x1.vendor = "ACME";
  x1.architecture = "hopper";  // shown in `mme hardware`
  x1.compute_capability = 90;  // what PyTorch and TE pick workspaces and attention kernels by
  x1.aliases = {"ACME-X1", "x1"};
  x1.memory_bytes = 98304 * kMiB;  // capacity as the driver reports it
  x1.reserved_bytes = 1 * kGiB;    // CUDA context + NCCL buffers
  x1.hbm_bandwidth_gbps = 3600;
  x1.bf16_tflops = 900;
  x1.fp8_tflops = 1800;
  x1.link_bandwidth_gbps = 800;
  x1.source = "ACME X1 product brief (fictional)";
  registry.add_hardware(x1);

  // A designated initialiser reads as well: every field of mme::HardwareProfile in order.
  registry.add_hardware({.name = "ACME-X2-192GB",
                         .vendor = "ACME",
                         .architecture = "blackwell",
                         .aliases = {"ACME-X2", "x2"},
                         .memory_bytes = 196608 * kMiB,
                         .reserved_bytes = 2 * kGiB,
                         .hbm_bandwidth_gbps = 8000,
                         .bf16_tflops = 2200,
                         .fp8_tflops = 4400,
                         .link_bandwidth_gbps = 1800,
                         .source = "ACME X2 product brief (fictional)",
                         .compute_capability = 100});
}

}  // namespace

// The one exported symbol: name, the plugin's own version, the registration function.
MME_PLUGIN("acme_hardware", "1.0.0", register_acme_hardware)
