#include "nvidia_hopper.hpp"

namespace mme::plugins {

namespace {
constexpr std::int64_t kMiB = 1024 * 1024;
// CUDA context (~0.5 GiB) plus NCCL communicator buffers (~0.5 GiB), outside PyTorch's allocator.
constexpr std::int64_t kReserved = 1024 * kMiB;

// PCIe 5.0 x16 to the host: 64 GB/s a direction (the datasheets' 128 GB/s both ways).
constexpr double kPcie5 = 64;

// The scale-out network, the NVLink domain and the host link (plugin API 6).
HardwareProfile networked(HardwareProfile h, double inter_node_gbps, std::int64_t gpus_per_node) {
  h.inter_node_bandwidth_gbps = inter_node_gbps;
  h.gpus_per_node = gpus_per_node;
  h.host_link_bandwidth_gbps = kPcie5;
  return h;
}
}  // namespace

void register_nvidia_hopper(Registrar& r) {
  // NVIDIA H100 Tensor Core GPU datasheet (2023), SXM5: HBM3 3.35 TB/s, BF16 dense 989
  // TFLOPS, FP8 dense 1,979 TFLOPS, NVLink 900 GB/s. nvidia-smi reports 81559 MiB. NVIDIA DGX
  // H100 datasheet: 8 GPUs on NVLink, one 400 Gb/s ConnectX-7 NIC per GPU (50 GB/s).
  r.add_hardware(networked({"H100-SXM-80GB",
                            "NVIDIA",
                            "hopper",
                            {"H100", "H100-SXM", "h100-80gb", "H100 80GB", "H100-80G"},
                            81559 * kMiB,
                            kReserved,
                            3350,
                            989,
                            1979,
                            900,
                            "NVIDIA H100 Tensor Core GPU datasheet, 2023; NVIDIA DGX H100 datasheet",
                            90},
                           50, 8));
  // H100 PCIe: HBM2e 2.0 TB/s, BF16 dense 756 TFLOPS, FP8 1,513, NVLink bridge 600 GB/s. The
  // bridge joins pairs of cards; the servers' networks vary (no figure: the planner's default).
  HardwareProfile pcie{"H100-PCIe-80GB",
                       "NVIDIA",
                       "hopper",
                       {"H100-PCIe", "h100-pcie-80gb"},
                       81559 * kMiB,
                       kReserved,
                       2000,
                       756,
                       1513,
                       600,
                       "NVIDIA H100 Tensor Core GPU datasheet, 2023",
                       90};
  pcie.host_link_bandwidth_gbps = kPcie5;  // a PCIe 5.0 card
  r.add_hardware(pcie);
  // H800 SXM5 (export variant): as H100 SXM with NVLink limited to 400 GB/s, in 8-GPU HGX boards
  // with a 400 Gb/s NIC per GPU.
  r.add_hardware(networked({"H800-SXM-80GB",
                            "NVIDIA",
                            "hopper",
                            {"H800", "h800-80gb"},
                            81559 * kMiB,
                            kReserved,
                            3350,
                            989,
                            1979,
                            400,
                            "NVIDIA H800 product brief, 2023",
                            90},
                           50, 8));
  // H20: 96 GB HBM3 at 4.0 TB/s, BF16 dense 148 TFLOPS, FP8 296, NVLink 900 GB/s;
  // nvidia-smi reports 97871 MiB. 8-GPU HGX boards.
  r.add_hardware(networked({"H20-96GB",
                            "NVIDIA",
                            "hopper",
                            {"H20", "h20-96gb"},
                            97871 * kMiB,
                            kReserved,
                            4000,
                            148,
                            296,
                            900,
                            "NVIDIA H20 product brief, 2024",
                            90},
                           50, 8));
  // NVIDIA H200 Tensor Core GPU datasheet (2024), SXM: 141 GB HBM3e at 4.8 TB/s, BF16 dense
  // 989 TFLOPS, FP8 1,979, NVLink 900 GB/s. nvidia-smi reports 143771 MiB. NVIDIA DGX H200
  // datasheet: 8 GPUs, one 400 Gb/s ConnectX-7 per GPU.
  r.add_hardware(networked({"H200-SXM-141GB",
                            "NVIDIA",
                            "hopper",
                            {"H200", "H200-SXM", "h200-141gb", "H200 141GB"},
                            143771 * kMiB,
                            kReserved,
                            4800,
                            989,
                            1979,
                            900,
                            "NVIDIA H200 Tensor Core GPU datasheet, 2024; NVIDIA DGX H200 datasheet",
                            90},
                           50, 8));
}

}  // namespace mme::plugins
