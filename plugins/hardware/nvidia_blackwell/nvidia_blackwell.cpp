#include "nvidia_blackwell.hpp"

namespace mme::plugins {

namespace {
constexpr std::int64_t kMiB = 1024 * 1024;
constexpr std::int64_t kReserved = 1024 * kMiB;  // CUDA context + NCCL buffers
// A capacity marketed in GB (10^9 bytes), in whole MiB, for parts whose nvidia-smi figure the
// datasheets do not give.
constexpr std::int64_t marketed_gb(std::int64_t gb) { return gb * 1'000'000'000 / kMiB * kMiB; }

// The host link, one direction: PCIe 5.0 x16 (the DGX B200 and B300 hosts are PCIe 5.0 Xeons)
// or the NVLink-C2C of a Grace superchip (GB200, GB300: 900 GB/s both ways).
constexpr double kPcie5 = 64, kNvlinkC2c = 450;

// Dense FP4 TFLOP/s, the scale-out network per GPU, the NVLink domain and the host link (plugin
// API 6).
HardwareProfile blackwell(HardwareProfile h, double fp4_tflops, double inter_node_gbps, std::int64_t gpus_per_node) {
  h.fp4_tflops = fp4_tflops;
  h.inter_node_bandwidth_gbps = inter_node_gbps;
  h.gpus_per_node = gpus_per_node;
  h.host_link_bandwidth_gbps = gpus_per_node > 8 ? kNvlinkC2c : kPcie5;  // the NVL72 racks are Grace's
  return h;
}
}  // namespace

void register_nvidia_blackwell(Registrar& r) {
  // NVIDIA DGX B200 datasheet (2024), per GPU: 180 GB HBM3e at 8 TB/s, BF16 dense 2.25
  // PFLOPS, FP8 dense 4.5 PFLOPS, FP4 dense 9 PFLOPS, NVLink 5 1.8 TB/s; 8 GPUs on NVLink, one
  // 400 Gb/s ConnectX-7 per GPU (50 GB/s). nvidia-smi reports 183359 MiB.
  r.add_hardware(blackwell({"B200-180GB",
                            "NVIDIA",
                            "blackwell",
                            {"B200", "b200-180gb"},
                            183359 * kMiB,
                            kReserved,
                            8000,
                            2250,
                            4500,
                            1800,
                            "NVIDIA DGX B200 datasheet, 2024",
                            100},
                           9000, 50, 8));
  // NVIDIA GB200 NVL72 datasheet (2024), per GPU (half a GB200 superchip): 186 GB HBM3e at
  // 8 TB/s, BF16 dense 2.5 PFLOPS, FP8 dense 5 PFLOPS, FP4 dense 10 PFLOPS (the sparse figures
  // halved), NVLink 5 1.8 TB/s across the 72 GPUs of a rack; one 400 Gb/s ConnectX-7 per GPU.
  // nvidia-smi reports 189471 MiB.
  r.add_hardware(blackwell({"GB200-186GB",
                            "NVIDIA",
                            "blackwell",
                            {"GB200", "gb200-186gb", "GB200 NVL72"},
                            189471 * kMiB,
                            kReserved,
                            8000,
                            2500,
                            5000,
                            1800,
                            "NVIDIA GB200 NVL72 datasheet, 2024",
                            100},
                           10000, 50, 72));
  // NVIDIA HGX/DGX B300 (Blackwell Ultra) datasheet (2025), per GPU: 288 GB HBM3e at 8 TB/s,
  // BF16 dense 2.25 PFLOPS, FP8 dense 4.5 PFLOPS, FP4 dense 13.5 PFLOPS, NVLink 5 1.8 TB/s;
  // 8 GPUs on NVLink, one 800 Gb/s ConnectX-8 per GPU (100 GB/s). Capacity: the marketed 288 GB.
  r.add_hardware(blackwell({"B300-288GB",
                            "NVIDIA",
                            "blackwell",
                            {"B300", "b300-288gb"},
                            marketed_gb(288),
                            kReserved,
                            8000,
                            2250,
                            4500,
                            1800,
                            "NVIDIA DGX B300 datasheet, 2025",
                            103},
                           13500, 100, 8));
  // NVIDIA GB300 NVL72 datasheet (2025), per GPU: 288 GB HBM3e at 8 TB/s, BF16 dense 2.5 PFLOPS,
  // FP8 dense 5 PFLOPS, FP4 dense 15 PFLOPS, NVLink 5 1.8 TB/s across the 72 GPUs of a rack; one
  // 800 Gb/s ConnectX-8 per GPU (100 GB/s). Capacity: the marketed 288 GB.
  r.add_hardware(blackwell({"GB300-288GB",
                            "NVIDIA",
                            "blackwell",
                            {"GB300", "gb300-288gb", "GB300 NVL72"},
                            marketed_gb(288),
                            kReserved,
                            8000,
                            2500,
                            5000,
                            1800,
                            "NVIDIA GB300 NVL72 datasheet, 2025",
                            103},
                           15000, 100, 72));
}

}  // namespace mme::plugins
