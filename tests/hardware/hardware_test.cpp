// The built-in hardware plugins together (every plugin named hw_*, discovered: each plugin's own
// figures are tested in its folder, plugins/hardware/<vendor_generation>/tests): none is
// rejected alone or beside the others, no name or alias collides, every figure is sane, and the
// loadable modules `mme` uses give the same profiles as the static archives.
#include <map>
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
    EXPECT_EQ(b->source, a.source) << a.name;
  }
  for (const auto& reg : loaded.hardware()) expect_sane(*reg.object);
}

}  // namespace
}  // namespace mme
