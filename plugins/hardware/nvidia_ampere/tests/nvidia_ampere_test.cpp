// The Ampere profiles against NVIDIA's A100 datasheet and nvidia-smi's capacities.
#include "nvidia_ampere.hpp"

#include "hardware_plugin_test.hpp"

namespace mme::plugins {
namespace {

TEST(NvidiaAmpere, TheA100sOfTheDatasheet) {
  const auto r = test::hardware_plugin("hw_nvidia_ampere", register_nvidia_ampere);
  test::expect_datasheet(*r, {"A100-SXM-40GB", 40960, 1555, 312, 0, 600});
  test::expect_datasheet(*r, {"A100-SXM-80GB", 81920, 2039, 312, 0, 600});
  test::expect_family(*r, "NVIDIA", "ampere");
  // FP8 tensor cores arrived with Hopper: no Ampere profile claims them.
  for (const auto& reg : r->hardware()) EXPECT_EQ(reg.object->fp8_tflops, 0) << reg.object->name;
}

TEST(NvidiaAmpere, AliasesResolve) {
  const auto r = test::hardware_plugin("hw_nvidia_ampere", register_nvidia_ampere);
  test::expect_aliases(*r, {{"A100", "A100-SXM-80GB"},
                            {"a100-80gb", "A100-SXM-80GB"},
                            {"A100 80GB", "A100-SXM-80GB"},
                            {"a100_sxm_80gb", "A100-SXM-80GB"},
                            {"A100-40GB", "A100-SXM-40GB"},
                            {"a100-40g", "A100-SXM-40GB"},
                            {"A100 40GB", "A100-SXM-40GB"}});
  EXPECT_EQ(r->find_hardware("a100-120gb"), nullptr);
}

}  // namespace
}  // namespace mme::plugins
