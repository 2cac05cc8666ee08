#include "nvidia_blackwell.hpp"

namespace mme::plugins {

namespace {
constexpr std::int64_t kMiB = 1024 * 1024;
constexpr std::int64_t kReserved = 1024 * kMiB;  // CUDA context + NCCL buffers
}  // namespace

void register_nvidia_blackwell(Registrar& r) {
  // NVIDIA DGX B200 datasheet (2024), per GPU: 180 GB HBM3e at 8 TB/s, BF16 dense 2.25
  // PFLOPS, FP8 dense 4.5 PFLOPS, NVLink 5 1.8 TB/s. nvidia-smi reports 183359 MiB.
  r.add_hardware({"B200-180GB",
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
                  100});
}

}  // namespace mme::plugins
