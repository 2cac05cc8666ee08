// The built-in hardware plugins together (every plugin named hw_*, discovered: each plugin's own
// figures are tested in its folder, plugins/hardware/<vendor_generation>/tests): none is
// rejected alone or beside the others, no name or alias collides, every figure is sane, and the
// loadable modules `mme` uses give the same profiles as the static archives.
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <mme/engine/plugin_loader.hpp>
#include <mme/engine/registry.hpp>
#include <mme/sdk/hardware_profile.hpp>

#include "builtin_plugins.hpp"
#include "test_support.hpp"

namespace mme {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

// All built-in hardware plugins, registered the way the loader does (transactionally).
const Registry& registry() {
  static const Registry* r = [] {
    auto* reg = new Registry;
    test::register_builtin_plugins(*reg, "hw_");
    return reg;
  }();
  return *r;
}

TEST(Hardware, EveryBuiltInPluginRegistersWithoutRejection) {
  const std::vector<std::string> names = test::builtin_plugin_names("hw_");
  ASSERT_GE(names.size(), 4u);  // ampere, hopper, blackwell, cdna at least
  for (const auto& name : names) {
    Registry alone;  // each on its own
    test::register_builtin_plugin(alone, name);
    EXPECT_FALSE(alone.hardware().empty()) << name;
  }
  // And all together: no name or alias collides across plugins.
  for (const auto& x : registry().rejected()) ADD_FAILURE() << x.path << ": " << x.reason;
  EXPECT_EQ(registry().plugins().size(), names.size());
}

// A profile by name (the test fails where there is none).
const HardwareProfile& profile(const std::string& name) {
  const HardwareProfile* h = registry().find_hardware(name);
  if (!h) throw std::runtime_error("no hardware profile " + name);
  return *h;
}

TEST(Hardware, DatasheetFiguresOfTheBlackwellGpusAndTheirNetworks) {
  // The Blackwell parts Megatron-Bridge's performance tables run on, from the DGX B200, DGX B300,
  // GB200 NVL72 and GB300 NVL72 datasheets: HBM GB/s, dense BF16, FP8 and FP4 TFLOP/s, NVLink
  // GB/s per GPU, the NIC per GPU (400 Gb/s ConnectX-7: 50 GB/s, 800 Gb/s ConnectX-8: 100) and the
  // GPUs one NVLink domain joins (an 8-GPU board, a 72-GPU rack).
  struct Figures {
    const char* name;
    double hbm, bf16, fp8, fp4, link, net;
    std::int64_t node;
    int cc;
  };
  for (const Figures& f : {Figures{"B200", 8000, 2250, 4500, 9000, 1800, 50, 8, 100},
                           Figures{"GB200", 8000, 2500, 5000, 10000, 1800, 50, 72, 100},
                           Figures{"B300", 8000, 2250, 4500, 13500, 1800, 100, 8, 103},
                           Figures{"GB300", 8000, 2500, 5000, 15000, 1800, 100, 72, 103}}) {
    const HardwareProfile& h = profile(f.name);
    EXPECT_DOUBLE_EQ(h.hbm_bandwidth_gbps, f.hbm) << f.name;
    EXPECT_DOUBLE_EQ(h.bf16_tflops, f.bf16) << f.name;
    EXPECT_DOUBLE_EQ(h.fp8_tflops, f.fp8) << f.name;
    EXPECT_DOUBLE_EQ(h.fp4_tflops, f.fp4) << f.name;
    EXPECT_DOUBLE_EQ(h.link_bandwidth_gbps, f.link) << f.name;
    EXPECT_DOUBLE_EQ(h.inter_node_bandwidth_gbps, f.net) << f.name;
    EXPECT_EQ(h.gpus_per_node, f.node) << f.name;
    EXPECT_EQ(h.compute_capability, f.cc) << f.name;
  }
  // GB200 as nvidia-smi reports it; B300 and GB300 the marketed 288 GB (10^9 bytes) in whole MiB.
  EXPECT_EQ(profile("GB200").memory_bytes, 189471 * kMiB);
  EXPECT_EQ(profile("B300").memory_bytes, 288'000'000'000 / kMiB * kMiB);
  EXPECT_EQ(profile("GB300").memory_bytes, 288'000'000'000 / kMiB * kMiB);
  // DGX H100/H200: 8 GPUs, a 400 Gb/s NIC each; DGX A100: 8 GPUs, a 200 Gb/s NIC each.
  EXPECT_EQ(profile("H100").gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(profile("H100").inter_node_bandwidth_gbps, 50);
  EXPECT_DOUBLE_EQ(profile("A100").inter_node_bandwidth_gbps, 25);
  // Their names and aliases.
  for (const auto& [query, name] : std::map<std::string, std::string>{{"GB200", "GB200-186GB"},
                                                                      {"gb200 nvl72", "GB200-186GB"},
                                                                      {"B300", "B300-288GB"},
                                                                      {"GB300", "GB300-288GB"}}) {
    const HardwareProfile* h = registry().find_hardware(query);
    ASSERT_NE(h, nullptr) << query;
    EXPECT_EQ(h->name, name) << query;
  }
}

TEST(Hardware, EveryNameAndAliasResolvesToItsOwnProfileAndNoneCollides) {
  std::map<std::string, std::string> owner;  // normalised name -> profile
  for (const auto& reg : registry().hardware()) {
    const HardwareProfile& h = *reg.object;
    std::vector<std::string> names{h.name};
    names.insert(names.end(), h.aliases.begin(), h.aliases.end());
    for (const auto& n : names) {
      const std::string key = normalize_hardware_name(n);
      ASSERT_FALSE(key.empty()) << h.name << ": alias '" << n << "'";
      const auto [it, inserted] = owner.emplace(key, h.name);
      EXPECT_TRUE(inserted || it->second == h.name) << "'" << n << "' of " << h.name << " collides with " << it->second;
      const HardwareProfile* found = registry().find_hardware(n);
      ASSERT_NE(found, nullptr) << n;
      EXPECT_EQ(found->name, h.name) << n;
    }
  }
  for (const char* unknown : {"H300", "A10", "V100", "a100-120gb"})
    EXPECT_EQ(registry().find_hardware(unknown), nullptr) << unknown;
}

void expect_sane(const HardwareProfile& h) {
  SCOPED_TRACE(h.name);
  EXPECT_FALSE(h.name.empty());
  EXPECT_FALSE(h.vendor.empty());
  EXPECT_FALSE(h.architecture.empty());
  EXPECT_FALSE(h.source.empty()) << "every figure cites its datasheet";
  EXPECT_GT(h.memory_bytes, 0);
  EXPECT_EQ(h.memory_bytes % kMiB, 0) << "drivers report whole MiB";
  EXPECT_GE(h.reserved_bytes, 0);
  EXPECT_LT(h.reserved_bytes, h.memory_bytes);
  EXPECT_LT(h.reserved_bytes, h.memory_bytes / 10) << "the context and NCCL keep a small share";
  EXPECT_EQ(allocatable_bytes(h), h.memory_bytes - h.reserved_bytes);
  EXPECT_GT(h.hbm_bandwidth_gbps, 0);
  EXPECT_GT(h.bf16_tflops, 0);
  EXPECT_GE(h.fp8_tflops, 0);
  EXPECT_GT(h.link_bandwidth_gbps, 0);
  EXPECT_GE(h.inter_node_bandwidth_gbps, 0);
  EXPECT_LT(h.inter_node_bandwidth_gbps, h.link_bandwidth_gbps) << "the network is slower than NVLink";
  EXPECT_GE(h.gpus_per_node, 0);
  EXPECT_GE(h.fp4_tflops, 0);
  if (h.fp4_tflops > 0) {
    EXPECT_GT(h.fp4_tflops, h.fp8_tflops) << "FP4 is the faster format where supported";
  }
  if (h.fp8_tflops > 0) {
    EXPECT_GT(h.fp8_tflops, h.bf16_tflops) << "FP8 is the faster format where supported";
  }
}

TEST(Hardware, EveryProfileHasSaneFigures) {
  ASSERT_GE(registry().hardware().size(), 4u);
  for (const auto& reg : registry().hardware()) expect_sane(*reg.object);
}

// The loadable modules in stage/lib/mme/plugins (what `mme` uses) give the same profiles as
// the static archives, and every profile any built plugin registers is sane.
TEST(Hardware, LoadableModulesMatchTheStaticArchives) {
  Registry loaded;
  load_plugins(loaded, {test::plugin_dir()});
  for (const auto& name : test::builtin_plugin_names("hw_")) {
    bool present = false;
    for (const auto& p : loaded.plugins()) present = present || p.name == name;
    EXPECT_TRUE(present) << name << " was not loaded from " << test::plugin_dir();
  }
  for (const auto& reg : registry().hardware()) {
    const HardwareProfile& a = *reg.object;
    const HardwareProfile* b = loaded.find_hardware(a.name);
    ASSERT_NE(b, nullptr) << a.name;
    EXPECT_EQ(b->name, a.name);
    EXPECT_EQ(b->vendor, a.vendor) << a.name;
    EXPECT_EQ(b->architecture, a.architecture) << a.name;
    EXPECT_EQ(b->aliases, a.aliases) << a.name;
    EXPECT_EQ(b->memory_bytes, a.memory_bytes) << a.name;
    EXPECT_EQ(b->reserved_bytes, a.reserved_bytes) << a.name;
    EXPECT_EQ(b->hbm_bandwidth_gbps, a.hbm_bandwidth_gbps) << a.name;
    EXPECT_EQ(b->bf16_tflops, a.bf16_tflops) << a.name;
    EXPECT_EQ(b->fp8_tflops, a.fp8_tflops) << a.name;
    EXPECT_EQ(b->link_bandwidth_gbps, a.link_bandwidth_gbps) << a.name;
    EXPECT_EQ(b->fp4_tflops, a.fp4_tflops) << a.name;
    EXPECT_EQ(b->inter_node_bandwidth_gbps, a.inter_node_bandwidth_gbps) << a.name;
    EXPECT_EQ(b->gpus_per_node, a.gpus_per_node) << a.name;
    EXPECT_EQ(b->source, a.source) << a.name;
  }
  for (const auto& reg : loaded.hardware()) expect_sane(*reg.object);
}

}  // namespace
}  // namespace mme
