#include "amd_cdna.hpp"

namespace mme::plugins {

namespace {
constexpr std::int64_t kMiB = 1024 * 1024;
constexpr std::int64_t kReserved = 1024 * kMiB;  // HIP context + RCCL buffers
}  // namespace

void register_amd_cdna(Registrar& r) {
  // AMD Instinct MI300X data sheet (2023): 192 GB HBM3 at 5.3 TB/s, BF16 dense 1,307.4
  // TFLOPS, FP8 dense 2,614.9 TFLOPS, Infinity Fabric 896 GB/s aggregate per GPU.
  // rocm-smi reports 205,822,885,888 bytes of VRAM (196288 MiB).
  // The MI300X platform joins 8 GPUs by Infinity Fabric; servers carry one 400 Gb/s NIC per GPU
  // (50 GB/s) (plugin API 6).
  HardwareProfile mi300x{"MI300X-192GB",
                         "AMD",
                         "cdna3",
                         {"MI300X", "mi300x-192gb"},
                         196288 * kMiB,
                         kReserved,
                         5300,
                         1307,
                         2615,
                         896,
                         "AMD Instinct MI300X data sheet, 2023"};
  mi300x.inter_node_bandwidth_gbps = 50;
  mi300x.gpus_per_node = 8;
  mi300x.host_link_bandwidth_gbps = 64;  // PCIe 5.0 x16, a direction
  r.add_hardware(mi300x);
}

}  // namespace mme::plugins
