// The CDNA profile against AMD's MI300X data sheet and rocm-smi's capacity.
#include "amd_cdna.hpp"

#include "hardware_plugin_test.hpp"

namespace mme::plugins {
namespace {

TEST(AmdCdna, TheMi300xOfTheDataSheet) {
  const auto r = test::hardware_plugin("hw_amd_cdna", register_amd_cdna);
  // 192 GB HBM3 at 5.3 TB/s (205,822,885,888 bytes = 196288 MiB in rocm-smi), BF16 1,307.4 and
  // FP8 2,614.9 TFLOPS dense, Infinity Fabric 896 GB/s per GPU.
  test::expect_datasheet(*r, {"MI300X-192GB", 196288, 5300, 1307, 2615, 896});
  test::expect_family(*r, "AMD", "cdna3");
  test::expect_aliases(*r, {{"mi300x", "MI300X-192GB"}, {"MI300X 192GB", "MI300X-192GB"}});
  // Not a CUDA device: the defaults of CUDA GPUs before Hopper apply.
  EXPECT_EQ(r->find_hardware("MI300X")->compute_capability, 0);
}

}  // namespace
}  // namespace mme::plugins
