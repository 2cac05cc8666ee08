// Registry: transactional plugin registration (nothing merged on a throw or a duplicate),
// name lookups, adapter choice, and the keep-alive handle every plugin object carries.
#include <cmath>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <mme/engine/registry.hpp>
#include <mme/sdk/error.hpp>

namespace mme {
namespace {

using Log = std::vector<std::string>;

class TestAdapter final : public ConfigAdapter {
 public:
  TestAdapter(std::string name, int score, Log* log = nullptr, bool throws = false)
      : name_(std::move(name)), score_(score), log_(log), throws_(throws) {}
  ~TestAdapter() override {
    if (log_) log_->push_back("adapter " + name_ + " destroyed");
  }
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return "test adapter"; }
  std::vector<std::string> model_types() const override { return {"test"}; }
  int match(const nlohmann::json&) const override {
    if (throws_) throw std::runtime_error("match failed on purpose");
    return score_;
  }
  ModelSpec adapt(const ConfigInput& input) const override {
    ModelSpec s;
    s.name = input.name;
    return s;
  }

 private:
  std::string name_;
  int score_;
  Log* log_;
  bool throws_;
};

class TestLayer final : public LayerMemoryModel {
 public:
  explicit TestLayer(std::string kind, Log* log = nullptr) : kind_(std::move(kind)), log_(log) {}
  ~TestLayer() override {
    if (log_) log_->push_back("layer " + kind_ + " destroyed");
  }
  std::string_view kind() const override { return kind_; }
  BlockRole role() const override { return BlockRole::kAttention; }
  std::string_view description() const override { return "test layer"; }
  void validate_spec(const ModelSpec&, const LayerSpec&, std::size_t) const override {}
  void validate(const BlockContext&) const override {}
  void parameters(const BlockContext&, BlockParams&) const override {}
  void activations(const BlockContext&, BlockActivations&) const override {}
  void costs(const BlockContext&, BlockCosts&) const override {}

 private:
  std::string kind_;
  Log* log_;
};

HardwareProfile gpu(std::string name, std::vector<std::string> aliases = {}) {
  HardwareProfile h;
  h.name = std::move(name);
  h.vendor = "Test";
  h.architecture = "test";
  h.aliases = std::move(aliases);
  h.memory_bytes = std::int64_t{80} << 30;
  h.reserved_bytes = std::int64_t{1} << 30;
  return h;
}

// A keep-alive handle standing in for a plugin library: logs when it is released.
std::shared_ptr<void> library_handle(Log& log, const std::string& name) {
  return std::shared_ptr<void>(new int(0), [&log, name](void* p) {
    delete static_cast<int*>(p);
    log.push_back("library " + name + " released");
  });
}

// A registry holding one plugin "base" with adapter "alpha", layer "base_layer" and the GPU
// "Base-GPU-80GB" (alias "bgpu").
void add_base(Registry& r) {
  ASSERT_TRUE(r.register_plugin("base", "1.0", "", [](Registrar& s) {
    s.add_adapter(std::make_shared<TestAdapter>("alpha", 10));
    s.add_layer_model(std::make_shared<TestLayer>("base_layer"));
    s.add_hardware(gpu("Base-GPU-80GB", {"bgpu", "Base GPU"}));
  }));
}

struct Sizes {
  std::size_t adapters, layers, hardware, plugins;
  bool operator==(const Sizes&) const = default;
};
Sizes sizes(const Registry& r) {
  return {r.adapters().size(), r.layer_models().size(), r.hardware().size(), r.plugins().size()};
}

// Registers a plugin expected to be rejected; checks that nothing of it was merged and
// returns the recorded reason.
std::string rejected_reason(Registry& r, const std::string& name, const std::function<void(Registrar&)>& fn) {
  const Sizes before = sizes(r);
  const std::size_t rejected_before = r.rejected().size();
  EXPECT_FALSE(r.register_plugin(name, "0.1", "", fn)) << name;
  EXPECT_EQ(sizes(r), before) << name << ": something was merged";
  EXPECT_EQ(r.rejected().size(), rejected_before + 1);
  if (r.rejected().size() != rejected_before + 1) return {};
  EXPECT_EQ(r.rejected().back().path, name);  // no path: the plugin is named instead
  return r.rejected().back().reason;
}

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' lacks '" << (needle) << "'"

TEST(Registry, RegisterPluginMergesEverythingAndRecordsThePlugin) {
  Registry r;
  add_base(r);
  ASSERT_EQ(r.plugins().size(), 1u);
  const PluginRecord& p = r.plugins().front();
  EXPECT_EQ(p.name, "base");
  EXPECT_EQ(p.version, "1.0");
  EXPECT_EQ(p.path, "");
  EXPECT_EQ(p.adapters, std::vector<std::string>{"alpha"});
  EXPECT_EQ(p.layer_models, std::vector<std::string>{"base_layer"});
  EXPECT_EQ(p.hardware, std::vector<std::string>{"Base-GPU-80GB"});
  ASSERT_EQ(r.adapters().size(), 1u);
  EXPECT_EQ(r.adapters().front().plugin, "base");
  EXPECT_EQ(r.layer_models().front().plugin, "base");
  EXPECT_EQ(r.hardware().front().plugin, "base");
  EXPECT_TRUE(r.rejected().empty());
}

TEST(Registry, ThrowingRegistrationMergesNothing) {
  Registry r;
  add_base(r);
  const std::string reason = rejected_reason(r, "thrower", [](Registrar& s) {
    s.add_adapter(std::make_shared<TestAdapter>("new_adapter", 50));
    s.add_layer_model(std::make_shared<TestLayer>("new_layer"));
    s.add_hardware(gpu("New-GPU"));
    throw std::runtime_error("registration exploded");
  });
  EXPECT_CONTAINS(reason, "thrower");
  EXPECT_CONTAINS(reason, "threw");
  EXPECT_CONTAINS(reason, "registration exploded");
  EXPECT_EQ(r.find_adapter("new_adapter"), nullptr);
  EXPECT_EQ(r.find_layer_model("new_layer"), nullptr);
  EXPECT_EQ(r.find_hardware("New-GPU"), nullptr);
  // A rejected plugin's name is free again.
  EXPECT_TRUE(r.register_plugin("thrower", "0.2", "", [](Registrar& s) { s.add_hardware(gpu("New-GPU")); }));
  EXPECT_NE(r.find_hardware("new gpu"), nullptr);
}

TEST(Registry, NonStandardExceptionIsCaught) {
  Registry r;
  const std::string reason = rejected_reason(r, "int_thrower", [](Registrar&) { throw 7; });
  EXPECT_CONTAINS(reason, "non-standard exception");
}

TEST(Registry, InvalidObjectsAreRefusedByTheAddFunctions) {
  Registry r;
  EXPECT_THROW(r.add_adapter(nullptr), PluginError);
  EXPECT_THROW(r.add_layer_model(nullptr), PluginError);
  EXPECT_THROW(r.add_hardware(gpu("")), PluginError);
  auto no_memory = gpu("NoMemory");
  no_memory.memory_bytes = 0;
  EXPECT_THROW(r.add_hardware(no_memory), PluginError);
  auto all_reserved = gpu("AllReserved");
  all_reserved.reserved_bytes = all_reserved.memory_bytes;
  EXPECT_THROW(r.add_hardware(all_reserved), PluginError);
  auto negative = gpu("Negative");
  negative.reserved_bytes = -1;
  EXPECT_THROW(r.add_hardware(negative), PluginError);
  // Issue 32: a throughput figure is 0 (unknown) or within [1, 10^6], for compiled plugins as
  // for hardware files (hardware_profile.hpp, kThroughputFigures).
  auto tiny = gpu("Tiny");
  tiny.hbm_bandwidth_gbps = 1e-300;
  EXPECT_THROW(r.add_hardware(tiny), PluginError);
  auto huge = gpu("Huge");
  huge.bf16_tflops = 1e308;
  EXPECT_THROW(r.add_hardware(huge), PluginError);
  auto nan = gpu("NotANumber");
  nan.link_bandwidth_gbps = std::nan("");
  EXPECT_THROW(r.add_hardware(nan), PluginError);
  auto unknown = gpu("Unknown");  // every figure 0: not given
  EXPECT_NO_THROW(r.add_hardware(unknown));

  const std::string reason = rejected_reason(r, "bad_profile", [all_reserved](Registrar& s) {
    s.add_hardware(gpu("Fine-GPU"));
    s.add_hardware(all_reserved);
  });
  EXPECT_CONTAINS(reason, "reserves more memory than it has");
  EXPECT_EQ(r.find_hardware("Fine-GPU"), nullptr);
}

TEST(Registry, DuplicateAdapterNameIsRejectedIgnoringCase) {
  Registry r;
  add_base(r);
  const std::string reason = rejected_reason(r, "dup_adapter", [](Registrar& s) {
    s.add_hardware(gpu("Other-GPU"));
    s.add_adapter(std::make_shared<TestAdapter>("ALPHA", 99));
  });
  EXPECT_CONTAINS(reason, "config adapter 'ALPHA' is already registered");
  EXPECT_EQ(r.find_hardware("Other-GPU"), nullptr);
  EXPECT_EQ(r.best_adapter(nlohmann::json::object())->name(), "alpha");
}

TEST(Registry, DuplicateLayerKindIsRejected) {
  Registry r;
  add_base(r);
  const std::string reason = rejected_reason(r, "dup_layer", [](Registrar& s) {
    s.add_adapter(std::make_shared<TestAdapter>("beta", 1));
    s.add_layer_model(std::make_shared<TestLayer>("Base_Layer"));
  });
  EXPECT_CONTAINS(reason, "layer model 'Base_Layer' is already registered");
  EXPECT_EQ(r.find_adapter("beta"), nullptr);
}

TEST(Registry, DuplicatesWithinOnePluginAreRejected) {
  Registry r;
  EXPECT_CONTAINS(rejected_reason(r, "twice_adapter",
                                  [](Registrar& s) {
                                    s.add_adapter(std::make_shared<TestAdapter>("same", 1));
                                    s.add_adapter(std::make_shared<TestAdapter>("Same", 2));
                                  }),
                  "config adapter 'Same' is already registered");
  EXPECT_CONTAINS(rejected_reason(r, "twice_layer",
                                  [](Registrar& s) {
                                    s.add_layer_model(std::make_shared<TestLayer>("k"));
                                    s.add_layer_model(std::make_shared<TestLayer>("k"));
                                  }),
                  "layer model 'k' is already registered");
}

// Issue 20: a taken hardware name used to reject the whole plugin; profiles are values, so now
// only that name goes, with a warning naming its owner.
class CapturedWarnings {
 public:
  CapturedWarnings() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_));
    logger->set_pattern("%v");
    spdlog::set_default_logger(logger);
  }
  ~CapturedWarnings() { spdlog::set_default_logger(previous_); }
  std::string text() const { return log_.str(); }

 private:
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(Registry, DuplicateHardwareNamesWithinOnePluginDropOnlyTheLaterName) {
  Registry r;
  CapturedWarnings warnings;
  // One profile's alias is another profile's canonical name, in another spelling.
  ASSERT_TRUE(r.register_plugin("twice_hw", "1", "", [](Registrar& s) {
    s.add_hardware(gpu("X-100"));
    s.add_hardware(gpu("Y-200", {"x_100", "y2"}));
  }));
  EXPECT_TRUE(r.rejected().empty());
  EXPECT_EQ(r.find_hardware("x_100")->name, "X-100");
  EXPECT_EQ(r.find_hardware("y2")->name, "Y-200");
  EXPECT_EQ(r.find_hardware("Y-200")->aliases, std::vector<std::string>{"y2"});
  EXPECT_EQ(warnings.text(),
            "plugin twice_hw: hardware alias 'x_100' of profile 'Y-200' dropped: it is already a name of this "
            "plugin's profile 'X-100'\n");
}

TEST(Registry, EmptyNamesAreRejected) {
  Registry r;
  EXPECT_CONTAINS(rejected_reason(r, "", [](Registrar&) {}), "empty name");
  EXPECT_CONTAINS(
      rejected_reason(r, "empty_adapter", [](Registrar& s) { s.add_adapter(std::make_shared<TestAdapter>("", 1)); }),
      "config adapter with an empty name");
  EXPECT_CONTAINS(
      rejected_reason(r, "empty_layer", [](Registrar& s) { s.add_layer_model(std::make_shared<TestLayer>("")); }),
      "layer model with an empty kind");
}

TEST(Registry, ATakenHardwareAliasIsDroppedAfterNormalisationAndThePluginLoads) {
  Registry r;
  add_base(r);
  CapturedWarnings warnings;
  // "B-G_P U" normalises to "bgpu", the alias of Base-GPU-80GB.
  ASSERT_TRUE(r.register_plugin("dup_alias", "1", "", [](Registrar& s) {
    s.add_layer_model(std::make_shared<TestLayer>("fresh_layer"));
    s.add_hardware(gpu("Fresh-GPU", {"fresh", "B-G_P U"}));
    s.add_hardware(gpu("Second-GPU", {"second"}));
  }));
  EXPECT_TRUE(r.rejected().empty());
  EXPECT_EQ(warnings.text(),
            "plugin dup_alias: hardware alias 'B-G_P U' of profile 'Fresh-GPU' dropped: it is already a name of "
            "profile 'Base-GPU-80GB' of plugin 'base'\n");
  // The alias keeps finding its first owner; the new profile keeps its other names, and the
  // plugin's other objects load.
  EXPECT_EQ(r.find_hardware("bgpu")->name, "Base-GPU-80GB");
  EXPECT_EQ(r.find_hardware("fresh")->name, "Fresh-GPU");
  EXPECT_EQ(r.find_hardware("Fresh-GPU")->aliases, std::vector<std::string>{"fresh"});
  EXPECT_EQ(r.find_hardware("second")->name, "Second-GPU");
  EXPECT_NE(r.find_layer_model("fresh_layer"), nullptr);
  ASSERT_EQ(r.plugins().size(), 2u);
  EXPECT_EQ(r.plugins().back().hardware, (std::vector<std::string>{"Fresh-GPU", "Second-GPU"}));
}

TEST(Registry, AProfileWhoseNameIsTakenIsSkippedAndTheRestLoads) {
  Registry r;
  add_base(r);
  CapturedWarnings warnings;
  // A canonical name equal to another profile's alias: that profile goes, the other stays.
  ASSERT_TRUE(r.register_plugin("dup_canonical", "1", "", [](Registrar& s) {
    s.add_hardware(gpu("BGPU", {"only-mine"}));
    s.add_hardware(gpu("Kept-GPU"));
  }));
  EXPECT_TRUE(r.rejected().empty());
  EXPECT_EQ(warnings.text(),
            "plugin dup_canonical: hardware profile 'BGPU' skipped: its name is already a name of profile "
            "'Base-GPU-80GB' of plugin 'base'\n");
  EXPECT_EQ(r.find_hardware("BGPU")->name, "Base-GPU-80GB");
  EXPECT_EQ(r.find_hardware("only-mine"), nullptr);
  EXPECT_EQ(r.find_hardware("kept gpu")->name, "Kept-GPU");
  EXPECT_EQ(r.plugins().back().hardware, std::vector<std::string>{"Kept-GPU"});
}

TEST(Registry, ProfileMayRepeatItsOwnNameAsAnAlias) {
  Registry r;
  EXPECT_TRUE(r.register_plugin("self_alias", "1", "", [](Registrar& s) {
    s.add_hardware(gpu("Z-300", {"z300", "Z 300", "zed"}));
  }));
  EXPECT_TRUE(r.rejected().empty());
  EXPECT_EQ(r.find_hardware("zed")->name, "Z-300");
}

TEST(Registry, DuplicatePluginNameIsRejected) {
  Registry r;
  add_base(r);
  const std::string reason = rejected_reason(r, "base", [](Registrar& s) { s.add_hardware(gpu("Another-GPU")); });
  EXPECT_CONTAINS(reason, "a plugin named 'base' is already loaded from the executable");
  EXPECT_EQ(r.find_hardware("Another-GPU"), nullptr);

  ASSERT_TRUE(r.register_plugin("from_file", "1", "/some/where/p.so", [](Registrar&) {}));
  EXPECT_FALSE(r.register_plugin("from_file", "2", "/else/where/p.so", [](Registrar&) {}));
  EXPECT_EQ(r.rejected().back().path, "/else/where/p.so");
  EXPECT_CONTAINS(r.rejected().back().reason, "already loaded from /some/where/p.so");
}

TEST(Registry, FindHardwareIgnoresCaseDashesUnderscoresAndSpaces) {
  Registry r;
  add_base(r);
  for (const char* query : {"Base-GPU-80GB", "base-gpu-80gb", "BASE_GPU_80GB", "base gpu 80gb", "BaseGPU80GB",
                            " base--gpu__80 gb ", "bgpu", "B-G-P-U", "base gpu", "BASE_GPU"}) {
    const HardwareProfile* h = r.find_hardware(query);
    ASSERT_NE(h, nullptr) << query;
    EXPECT_EQ(h->name, "Base-GPU-80GB") << query;
  }
  for (const char* query : {"", " ", "-_ -", "base-gpu-80", "bgpu2", "Base.GPU"})
    EXPECT_EQ(r.find_hardware(query), nullptr) << "'" << query << "'";
  EXPECT_EQ(normalize_hardware_name("H100 SXM_80-GB"), "h100sxm80gb");
  EXPECT_EQ(normalize_hardware_name("--"), "");
}

TEST(Registry, FindAdapterAndLayerModelIgnoreCase) {
  Registry r;
  add_base(r);
  ASSERT_NE(r.find_adapter("ALPHA"), nullptr);
  EXPECT_EQ(r.find_adapter("ALPHA")->name(), "alpha");
  ASSERT_NE(r.find_layer_model("BASE_LAYER"), nullptr);
  EXPECT_EQ(r.find_layer_model("base_layer")->kind(), "base_layer");
  EXPECT_EQ(r.find_adapter("alph"), nullptr);
  EXPECT_EQ(r.find_layer_model("base"), nullptr);
}

TEST(Registry, BestAdapterTakesTheHighestPositiveScoreAndTiesGoToTheFirstRegistered) {
  Registry r;
  ASSERT_TRUE(r.register_plugin("adapters_a", "1", "", [](Registrar& s) {
    s.add_adapter(std::make_shared<TestAdapter>("zero", 0));
    s.add_adapter(std::make_shared<TestAdapter>("negative", -5));
    s.add_adapter(std::make_shared<TestAdapter>("thrower", 1000, nullptr, /*throws=*/true));
    s.add_adapter(std::make_shared<TestAdapter>("generic_first", 10));
  }));
  const nlohmann::json config{{"model_type", "anything"}};
  ASSERT_NE(r.best_adapter(config), nullptr);
  EXPECT_EQ(r.best_adapter(config)->name(), "generic_first");  // the throwing one is skipped

  ASSERT_TRUE(r.register_plugin("adapters_b", "1", "", [](Registrar& s) {
    s.add_adapter(std::make_shared<TestAdapter>("generic_second", 10));  // ties with generic_first
  }));
  EXPECT_EQ(r.best_adapter(config)->name(), "generic_first");

  ASSERT_TRUE(r.register_plugin("adapters_c", "1", "", [](Registrar& s) {
    s.add_adapter(std::make_shared<TestAdapter>("family", 100));
    s.add_adapter(std::make_shared<TestAdapter>("family_twin", 100));
  }));
  EXPECT_EQ(r.best_adapter(config)->name(), "family");  // a later, higher score wins; then the tie
}

TEST(Registry, BestAdapterIsNullWhenNoScoreIsPositive) {
  Registry r;
  EXPECT_EQ(r.best_adapter(nlohmann::json::object()), nullptr);
  ASSERT_TRUE(r.register_plugin("none_match", "1", "", [](Registrar& s) {
    s.add_adapter(std::make_shared<TestAdapter>("zero", 0));
    s.add_adapter(std::make_shared<TestAdapter>("negative", -1));
    s.add_adapter(std::make_shared<TestAdapter>("thrower", 5, nullptr, true));
  }));
  EXPECT_EQ(r.best_adapter(nlohmann::json::object()), nullptr);
}

TEST(Registry, ObjectsOutliveTheRegistryAndHoldTheirLibrary) {
  Log log;
  std::shared_ptr<const ConfigAdapter> adapter;
  std::shared_ptr<const LayerMemoryModel> layer;
  {
    Registry r;
    ASSERT_TRUE(r.register_plugin(
        "pinned", "1", "/fake/pinned.so",
        [&log](Registrar& s) {
          s.add_adapter(std::make_shared<TestAdapter>("pinned_adapter", 3, &log));
          s.add_layer_model(std::make_shared<TestLayer>("pinned_layer", &log));
          s.add_hardware(gpu("Pinned-GPU"));
        },
        library_handle(log, "pinned")));
    adapter = r.adapters().front().object;
    layer = r.layer_models().front().object;
  }
  EXPECT_TRUE(log.empty()) << log.front();  // the registry is gone, the objects and library are not
  EXPECT_EQ(adapter->match({}), 3);
  EXPECT_EQ(layer->kind(), "pinned_layer");
  layer.reset();
  EXPECT_EQ(log, (Log{"layer pinned_layer destroyed"}));
  adapter.reset();
  EXPECT_EQ(log, (Log{"layer pinned_layer destroyed", "adapter pinned_adapter destroyed", "library pinned released"}));
}

TEST(Registry, DestroyingTheRegistryDestroysObjectsBeforeTheLibrary) {
  Log log;
  {
    Registry r;
    ASSERT_TRUE(r.register_plugin(
        "ordered", "1", "/fake/ordered.so",
        [&log](Registrar& s) {
          s.add_layer_model(std::make_shared<TestLayer>("ordered_layer", &log));
          s.add_adapter(std::make_shared<TestAdapter>("ordered_adapter", 1, &log));
        },
        library_handle(log, "ordered")));
    EXPECT_TRUE(log.empty());
  }
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log.back(), "library ordered released");
}

TEST(Registry, RejectedPluginObjectsDieBeforeItsLibraryIsReleased) {
  Log log;
  Registry r;
  add_base(r);
  {
    auto handle = library_handle(log, "rejected");
    EXPECT_FALSE(r.register_plugin(
        "rejected", "1", "/fake/rejected.so",
        [&log](Registrar& s) {
          s.add_layer_model(std::make_shared<TestLayer>("base_layer", &log));  // a duplicate
        },
        handle));
    // The registry kept nothing: the staged object is gone, only our handle remains.
    EXPECT_EQ(log, (Log{"layer base_layer destroyed"}));
    EXPECT_EQ(handle.use_count(), 1);
  }
  EXPECT_EQ(log, (Log{"layer base_layer destroyed", "library rejected released"}));
}

TEST(Registry, MovedRegistryKeepsItsPlugins) {
  Log log;
  Registry a;
  ASSERT_TRUE(a.register_plugin(
      "movable", "1", "/fake/movable.so",
      [&log](Registrar& s) { s.add_layer_model(std::make_shared<TestLayer>("movable_layer", &log)); },
      library_handle(log, "movable")));
  Registry b(std::move(a));
  ASSERT_NE(b.find_layer_model("movable_layer"), nullptr);
  Registry c;
  add_base(c);
  c = std::move(b);
  EXPECT_NE(c.find_layer_model("movable_layer"), nullptr);
  EXPECT_EQ(c.find_layer_model("base_layer"), nullptr);
  EXPECT_TRUE(log.empty());
}

}  // namespace
}  // namespace mme
