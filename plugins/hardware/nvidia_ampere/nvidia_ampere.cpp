#include "nvidia_ampere.hpp"

namespace mme::plugins {

namespace {
constexpr std::int64_t kMiB = 1024 * 1024;
// CUDA context with cuBLAS/cuDNN/TE kernels (~0.5 GiB) plus NCCL communicator buffers
// (~0.5 GiB): memory the process holds outside PyTorch's allocator (docs/memory-model.md).
constexpr std::int64_t kReserved = 1024 * kMiB;

// NVIDIA DGX A100 datasheet: 8 GPUs on NVLink, one 200 Gb/s HDR ConnectX-6 per GPU (25 GB/s);
// the A100 datasheet: PCIe 4.0 x16 to the host, 32 GB/s a direction (plugin API 6).
HardwareProfile dgx_a100(HardwareProfile h) {
  h.inter_node_bandwidth_gbps = 25;
  h.gpus_per_node = 8;
  h.host_link_bandwidth_gbps = 32;
  return h;
}
}  // namespace

void register_nvidia_ampere(Registrar& r) {
  // NVIDIA A100 Tensor Core GPU datasheet (2021): A100 40GB SXM, HBM2 1,555 GB/s, BF16 dense
  // 312 TFLOPS, NVLink 600 GB/s. nvidia-smi reports 40960 MiB.
  r.add_hardware(dgx_a100({"A100-SXM-40GB",
                           "NVIDIA",
                           "ampere",
                           {"A100-40GB", "a100-40g", "A100 40GB", "A100-40"},
                           40960 * kMiB,
                           kReserved,
                           1555,
                           312,
                           0,
                           600,
                           "NVIDIA A100 Tensor Core GPU datasheet, 2021",
                           80}));
  // A100 80GB SXM: HBM2e 2,039 GB/s, BF16 dense 312 TFLOPS, NVLink 600 GB/s; nvidia-smi 81920 MiB.
  r.add_hardware(dgx_a100({"A100-SXM-80GB",
                           "NVIDIA",
                           "ampere",
                           {"A100", "A100-80GB", "a100-80g", "A100 80GB", "A100-80"},
                           81920 * kMiB,
                           kReserved,
                           2039,
                           312,
                           0,
                           600,
                           "NVIDIA A100 Tensor Core GPU datasheet, 2021",
                           80}));
}

}  // namespace mme::plugins
