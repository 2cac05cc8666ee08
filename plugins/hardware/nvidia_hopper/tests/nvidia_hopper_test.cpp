// The Hopper profiles against NVIDIA's H100/H200 datasheets and nvidia-smi's capacities.
#include "nvidia_hopper.hpp"

#include "hardware_plugin_test.hpp"

namespace mme::plugins {
namespace {

TEST(NvidiaHopper, TheH100AndH200OfTheDatasheets) {
  const auto r = test::hardware_plugin("hw_nvidia_hopper", register_nvidia_hopper);
  test::expect_datasheet(*r, {"H100-SXM-80GB", 81559, 3350, 989, 1979, 900});
  test::expect_datasheet(*r, {"H200-SXM-141GB", 143771, 4800, 989, 1979, 900});
  test::expect_family(*r, "NVIDIA", "hopper");
}

TEST(NvidiaHopper, AliasesResolve) {
  const auto r = test::hardware_plugin("hw_nvidia_hopper", register_nvidia_hopper);
  test::expect_aliases(*r, {{"H100", "H100-SXM-80GB"},
                            {"h100", "H100-SXM-80GB"},
                            {"h100-80gb", "H100-SXM-80GB"},
                            {"H100 80GB", "H100-SXM-80GB"},
                            {"H100_SXM", "H100-SXM-80GB"},
                            {"h100-pcie", "H100-PCIe-80GB"},
                            {"H200", "H200-SXM-141GB"},
                            {"h200-141gb", "H200-SXM-141GB"},
                            {"H200 141GB", "H200-SXM-141GB"},
                            {"H800", "H800-SXM-80GB"},
                            {"H20", "H20-96GB"}});
  EXPECT_EQ(r->find_hardware("H300"), nullptr);
}

}  // namespace
}  // namespace mme::plugins
