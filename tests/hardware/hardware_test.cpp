// The built-in hardware profiles: the GPUs the fit verdict must know, their capacities as
// nvidia-smi reports them, aliases that resolve and never collide, and sane figures.
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <mme/engine/plugin_loader.hpp>
#include <mme/engine/registry.hpp>
#include <mme/sdk/hardware_profile.hpp>
#include <mme/sdk/version.hpp>

#include "amd_cdna.hpp"
#include "nvidia_ampere.hpp"
#include "nvidia_blackwell.hpp"
#include "nvidia_hopper.hpp"
#include "test_support.hpp"

namespace mme {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

struct BuiltIn {
  const char* plugin;
  void (*register_fn)(Registrar&);
  const char* vendor;
  std::set<std::string> architectures;
};

const std::vector<BuiltIn>& builtins() {
  static const std::vector<BuiltIn> list = {
      {"hw_nvidia_ampere", plugins::register_nvidia_ampere, "NVIDIA", {"ampere"}},
      {"hw_nvidia_hopper", plugins::register_nvidia_hopper, "NVIDIA", {"hopper"}},
      {"hw_nvidia_blackwell", plugins::register_nvidia_blackwell, "NVIDIA", {"blackwell"}},
      {"hw_amd_cdna", plugins::register_amd_cdna, "AMD", {"cdna3"}},
  };
  return list;
}

// All built-in hardware plugins, registered the way the loader does (transactionally).
Registry& registry() {
  static Registry r = [] {
    Registry reg;
    for (const auto& b : builtins()) reg.register_plugin(b.plugin, MME_VERSION_STRING, "", b.register_fn);
    return reg;
  }();
  return r;
}

const HardwareProfile& profile(const std::string& name) {
  const HardwareProfile* h = registry().find_hardware(name);
  if (!h) throw std::runtime_error("no hardware profile " + name);
  return *h;
}

TEST(Hardware, EveryBuiltInPluginRegistersWithoutRejection) {
  for (const auto& b : builtins()) {
    Registry alone;  // each on its own
    EXPECT_TRUE(alone.register_plugin(b.plugin, "1", "", b.register_fn)) << b.plugin;
    EXPECT_FALSE(alone.hardware().empty()) << b.plugin;
  }
  // And all together: no name or alias collides across plugins.
  for (const auto& x : registry().rejected()) ADD_FAILURE() << x.path << ": " << x.reason;
  EXPECT_EQ(registry().plugins().size(), builtins().size());
}

TEST(Hardware, RequiredGpusHaveTheCapacityNvidiaSmiReports) {
  struct Required {
    const char* name;
    std::int64_t mib;
    const char* architecture;
  };
  for (const Required& r : {Required{"A100-SXM-40GB", 40960, "ampere"}, Required{"A100-SXM-80GB", 81920, "ampere"},
                            Required{"H100-SXM-80GB", 81559, "hopper"}, Required{"H200-SXM-141GB", 143771, "hopper"}}) {
    const HardwareProfile* h = registry().find_hardware(r.name);
    ASSERT_NE(h, nullptr) << r.name;
    EXPECT_EQ(h->name, r.name);
    EXPECT_EQ(h->memory_bytes, r.mib * kMiB) << r.name;
    EXPECT_EQ(h->vendor, "NVIDIA") << r.name;
    EXPECT_EQ(h->architecture, r.architecture) << r.name;
  }
}

TEST(Hardware, DatasheetFiguresOfTheRequiredGpus) {
  // The figures the plugins cite (NVIDIA A100/H100/H200 datasheets): HBM GB/s, dense BF16 and
  // FP8 TFLOP/s, NVLink GB/s per GPU.
  struct Figures {
    const char* name;
    double hbm, bf16, fp8, link;
  };
  for (const Figures& f :
       {Figures{"A100-SXM-40GB", 1555, 312, 0, 600}, Figures{"A100-SXM-80GB", 2039, 312, 0, 600},
        Figures{"H100-SXM-80GB", 3350, 989, 1979, 900}, Figures{"H200-SXM-141GB", 4800, 989, 1979, 900}}) {
    const HardwareProfile& h = profile(f.name);
    EXPECT_DOUBLE_EQ(h.hbm_bandwidth_gbps, f.hbm) << f.name;
    EXPECT_DOUBLE_EQ(h.bf16_tflops, f.bf16) << f.name;
    EXPECT_DOUBLE_EQ(h.fp8_tflops, f.fp8) << f.name;
    EXPECT_DOUBLE_EQ(h.link_bandwidth_gbps, f.link) << f.name;
  }
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
}

TEST(Hardware, AliasesResolve) {
  const std::map<std::string, std::string> expected = {
      {"A100", "A100-SXM-80GB"},        {"a100-80gb", "A100-SXM-80GB"},
      {"A100 80GB", "A100-SXM-80GB"},   {"a100_sxm_80gb", "A100-SXM-80GB"},
      {"A100-40GB", "A100-SXM-40GB"},   {"a100-40g", "A100-SXM-40GB"},
      {"A100 40GB", "A100-SXM-40GB"},   {"H100", "H100-SXM-80GB"},
      {"h100", "H100-SXM-80GB"},        {"h100-80gb", "H100-SXM-80GB"},
      {"H100 80GB", "H100-SXM-80GB"},   {"H100_SXM", "H100-SXM-80GB"},
      {"h100-pcie", "H100-PCIe-80GB"},  {"H200", "H200-SXM-141GB"},
      {"h200-141gb", "H200-SXM-141GB"}, {"H200 141GB", "H200-SXM-141GB"},
      {"H800", "H800-SXM-80GB"},        {"H20", "H20-96GB"},
      {"B200", "B200-180GB"},           {"mi300x", "MI300X-192GB"},
      {"GB200", "GB200-186GB"},         {"gb200 nvl72", "GB200-186GB"},
      {"B300", "B300-288GB"},           {"GB300", "GB300-288GB"},
  };
  for (const auto& [query, name] : expected) {
    const HardwareProfile* h = registry().find_hardware(query);
    ASSERT_NE(h, nullptr) << query;
    EXPECT_EQ(h->name, name) << query;
  }
  for (const char* unknown : {"H300", "A10", "V100", "a100-120gb"})
    EXPECT_EQ(registry().find_hardware(unknown), nullptr) << unknown;
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

TEST(Hardware, VendorAndArchitectureFollowThePlugin) {
  for (const auto& reg : registry().hardware()) {
    const HardwareProfile& h = *reg.object;
    bool found = false;
    for (const auto& b : builtins()) {
      if (reg.plugin != b.plugin) continue;
      found = true;
      EXPECT_EQ(h.vendor, b.vendor) << h.name;
      EXPECT_TRUE(b.architectures.count(h.architecture)) << h.name << ": " << h.architecture;
    }
    EXPECT_TRUE(found) << h.name << " from " << reg.plugin;
  }
  // FP8 tensor cores arrived with Hopper: Ampere profiles must not claim them.
  for (const auto& reg : registry().hardware())
    if (reg.object->architecture == "ampere") {
      EXPECT_EQ(reg.object->fp8_tflops, 0) << reg.object->name;
    }
}

// The loadable modules in stage/lib/mme/plugins (what `mme` uses) give the same profiles as
// the static archives, and every profile any built plugin registers is sane.
TEST(Hardware, LoadableModulesMatchTheStaticArchives) {
  Registry loaded;
  load_plugins(loaded, {test::plugin_dir()});
  for (const auto& b : builtins()) {
    bool present = false;
    for (const auto& p : loaded.plugins()) present = present || p.name == b.plugin;
    EXPECT_TRUE(present) << b.plugin << " was not loaded from " << test::plugin_dir();
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
