// HardwareProfile: what the fit verdict and the planner's step-time model need to know about one GPU.
// Plugins register profiles as values (a "tiny plugin"), the json_profiles plugin reads them
// from files, so a new GPU needs no compiler.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mme {

struct HardwareProfile {
  std::string name;                  // canonical name, e.g. "H100-SXM-80GB"
  std::string vendor;                // "NVIDIA", "AMD", ...
  std::string architecture;          // "ampere", "hopper", "blackwell", "cdna3", ...
  std::vector<std::string> aliases;  // what users type: "H100", "h100-80gb", ...
  std::int64_t memory_bytes = 0;     // capacity as the driver reports it (nvidia-smi)
  std::int64_t reserved_bytes = 0;   // kept by the CUDA context, driver and NCCL, not allocatable
  double hbm_bandwidth_gbps = 0;     // GB/s
  double bf16_tflops = 0;            // dense
  double fp8_tflops = 0;             // dense, 0 = not supported
  double link_bandwidth_gbps = 0;    // intra-node GPU-to-GPU (NVLink / Infinity Fabric), GB/s per GPU
  std::string source;                // datasheet the figures come from
  // CUDA compute capability as major x 10 + minor (80 A100, 90 H100, 100 B200): what PyTorch
  // and Transformer Engine choose workspace sizes and attention kernels by. 0 = not a CUDA
  // device (ROCm), which takes the defaults of CUDA GPUs before Hopper.
  int compute_capability = 0;
  // Plugin API 6 (the planner's step-time model, docs/planner.md). 0 = unknown: the planner
  // then assumes the figure its PlanOptions give (and says so).
  double fp4_tflops = 0;                 // dense NVFP4/MXFP4 TFLOP/s, 0 = not supported
  double inter_node_bandwidth_gbps = 0;  // scale-out network per GPU, GB/s (one 400 Gb/s NIC: 50)
  // GPUs one NVLink domain joins: 8 on an HGX/DGX board, 72 on an NVL72 rack (GB200, GB300).
  // Groups within it use link_bandwidth_gbps, groups beyond it inter_node_bandwidth_gbps.
  std::int64_t gpus_per_node = 0;
  // Host (CPU) to GPU, one direction, GB/s: PCIe 5.0 x16 64, NVLink-C2C of a Grace superchip
  // 450 (the offloads' copies).
  double host_link_bandwidth_gbps = 0;
};

// The throughput figures of a profile, each once: what a hardware file's key is, its unit, and
// whether an explicit 0 means something ("not supported"). A figure that is not given is 0
// (unknown). A given figure lies in [kMinThroughput, kMaxThroughput], as memory has its own
// bounds: 0 or a denormal figure (bf16_tflops: 0, hbm_bandwidth_gbps: 1e-300) once made every
// step time infinite and the planner's ranking degenerate, 1e308 made every score 0. A new
// figure is one more row here: the json_profiles plugin reads every row, the registry checks
// every row of every profile a plugin adds.
inline constexpr double kMinThroughput = 1.0;  // GB/s or TFLOP/s: a thousandth of any data-centre GPU
inline constexpr double kMaxThroughput = 1e6;  // a thousand times any device
struct ThroughputFigure {
  const char* key;   // the hardware file's key (and the name in messages)
  const char* unit;  // "GB/s" or "TFLOP/s"
  double HardwareProfile::*member;
  bool zero_allowed;  // an explicit 0 is meaningful (fp8_tflops: not supported)
};
inline constexpr ThroughputFigure kThroughputFigures[] = {
    {"hbm_bandwidth_gbps", "GB/s", &HardwareProfile::hbm_bandwidth_gbps, false},
    {"bf16_tflops", "TFLOP/s", &HardwareProfile::bf16_tflops, false},
    {"fp8_tflops", "TFLOP/s", &HardwareProfile::fp8_tflops, true},
    {"link_bandwidth_gbps", "GB/s", &HardwareProfile::link_bandwidth_gbps, false},
    // Plugin API 6 (the planner's step-time model).
    {"fp4_tflops", "TFLOP/s", &HardwareProfile::fp4_tflops, true},
    {"inter_node_bandwidth_gbps", "GB/s", &HardwareProfile::inter_node_bandwidth_gbps, false},
    {"host_link_bandwidth_gbps", "GB/s", &HardwareProfile::host_link_bandwidth_gbps, false},
};
// The largest NVLink domain a profile may give (gpus_per_node): the largest parallel size.
inline constexpr std::int64_t kMaxGpusPerNode = std::int64_t{1} << 20;
// Why `value`, given for `figure`, is no figure a profile may hold ("'bf16_tflops' 0 is less
// than 1 TFLOP/s, ..."); empty when it is one. `given`: written out (a hardware file's key),
// where 0 is refused unless the figure allows it; otherwise 0 is "not given".
std::string throughput_problem(const ThroughputFigure& figure, double value, bool given);

// The compute capability an estimate assumes when no GPU is named: Hopper's.
inline constexpr int kDefaultComputeCapability = 90;

// The bytes a training process can allocate on this GPU.
// Canonical form used to compare hardware names: lower case, no '-', '_' or spaces.
std::string normalize_hardware_name(std::string_view name);

inline std::int64_t allocatable_bytes(const HardwareProfile& hw) { return hw.memory_bytes - hw.reserved_bytes; }

}  // namespace mme
