// What the hardware plugins' own tests share (plugins/hardware/<vendor_generation>/tests): a
// registry holding one plugin alone, a profile against its datasheet, aliases that resolve.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include <mme/engine/registry.hpp>
#include <mme/sdk/hardware_profile.hpp>

namespace mme::test {

// The plugin registered alone, the way the loader registers it; it must not be rejected.
inline std::unique_ptr<Registry> hardware_plugin(const char* name, void (*register_fn)(Registrar&)) {
  auto r = std::make_unique<Registry>();
  EXPECT_TRUE(r->register_plugin(name, "test", "", register_fn)) << name;
  for (const auto& x : r->rejected()) ADD_FAILURE() << x.path << ": " << x.reason;
  EXPECT_FALSE(r->hardware().empty()) << name;
  return r;
}

// A GPU as its datasheet and the driver give it: capacity in MiB as nvidia-smi / rocm-smi report
// it, HBM GB/s, dense BF16 and FP8 TFLOP/s (0: no FP8), GPU-to-GPU link GB/s per GPU.
struct Datasheet {
  const char* name;
  std::int64_t mib;
  double hbm, bf16, fp8, link;
};

inline void expect_datasheet(const Registry& r, const Datasheet& d) {
  const HardwareProfile* h = r.find_hardware(d.name);
  ASSERT_NE(h, nullptr) << d.name;
  EXPECT_EQ(h->name, d.name);
  EXPECT_EQ(h->memory_bytes, d.mib * 1024 * 1024) << d.name;
  EXPECT_DOUBLE_EQ(h->hbm_bandwidth_gbps, d.hbm) << d.name;
  EXPECT_DOUBLE_EQ(h->bf16_tflops, d.bf16) << d.name;
  EXPECT_DOUBLE_EQ(h->fp8_tflops, d.fp8) << d.name;
  EXPECT_DOUBLE_EQ(h->link_bandwidth_gbps, d.link) << d.name;
}

// Every profile of the plugin has this vendor and architecture.
inline void expect_family(const Registry& r, const std::string& vendor, const std::string& architecture) {
  for (const auto& reg : r.hardware()) {
    EXPECT_EQ(reg.object->vendor, vendor) << reg.object->name;
    EXPECT_EQ(reg.object->architecture, architecture) << reg.object->name;
  }
}

// What users type -> the canonical name it resolves to.
inline void expect_aliases(const Registry& r, const std::map<std::string, std::string>& expected) {
  for (const auto& [query, name] : expected) {
    const HardwareProfile* h = r.find_hardware(query);
    ASSERT_NE(h, nullptr) << query;
    EXPECT_EQ(h->name, name) << query;
  }
}

}  // namespace mme::test
