// The Blackwell profile against NVIDIA's DGX B200 datasheet (per GPU) and nvidia-smi's capacity.
#include "nvidia_blackwell.hpp"

#include "hardware_plugin_test.hpp"

namespace mme::plugins {
namespace {

TEST(NvidiaBlackwell, TheB200OfTheDatasheet) {
  const auto r = test::hardware_plugin("hw_nvidia_blackwell", register_nvidia_blackwell);
  // 180 GB HBM3e at 8 TB/s (183359 MiB in nvidia-smi), BF16 2.25 PFLOPS, FP8 4.5 PFLOPS dense,
  // NVLink 5 1.8 TB/s.
  test::expect_datasheet(*r, {"B200-180GB", 183359, 8000, 2250, 4500, 1800});
  test::expect_family(*r, "NVIDIA", "blackwell");
  test::expect_aliases(*r, {{"B200", "B200-180GB"}, {"b200_180gb", "B200-180GB"}});
  // B300, GB200 and GB300 are profiles of their own (tests/hardware/hardware_test.cpp), never B200.
  EXPECT_EQ(r->find_hardware("B300")->name, "B300-288GB");
  EXPECT_EQ(r->find_hardware("B200")->name, "B200-180GB");
}

}  // namespace
}  // namespace mme::plugins
