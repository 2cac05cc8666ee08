// An out-of-tree plugin for the Python tests, loaded through plugin_dirs= (the loader and
// libmme_sdk shared with the extension): one hardware profile, and a config adapter that takes
// configs with "pytest_plugin_error": true and refuses them with a PluginError (exit code 5),
// which the estimator's other inputs never raise with the built-in plugins.
#include <memory>

#include <nlohmann/json.hpp>

#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/hardware_profile.hpp>
#include <mme/sdk/plugin.hpp>

namespace {

class RefusingAdapter final : public mme::ConfigAdapter {
 public:
  std::string_view name() const override { return "pytest_refuses"; }
  std::string_view description() const override { return "refuses its configs (tests/python)"; }
  std::vector<std::string> model_types() const override { return {"pytest"}; }
  int match(const nlohmann::json& config) const override {
    return config.is_object() && config.value("pytest_plugin_error", false) ? 1000 : 0;
  }
  mme::ModelSpec adapt(const mme::ConfigInput& input) const override {
    throw mme::PluginError(input.source + ": the pytest_gpu plugin refuses this config (a test of exit code 5)");
  }
};

void register_pytest_gpu(mme::Registrar& r) {
  mme::HardwareProfile h;
  h.name = "PyTest-GPU-48GB";
  h.vendor = "Test";
  h.architecture = "hopper";
  h.aliases = {"pytest-gpu"};
  h.memory_bytes = std::int64_t{48} << 30;
  h.reserved_bytes = std::int64_t{1} << 30;
  h.hbm_bandwidth_gbps = 1000;
  h.bf16_tflops = 100;
  h.link_bandwidth_gbps = 100;
  h.source = "tests/python/plugin/pytest_gpu.cpp";
  h.compute_capability = 90;
  r.add_hardware(h);
  r.add_adapter(std::make_shared<RefusingAdapter>());
}

}  // namespace

MME_PLUGIN("pytest_gpu", "1.0.0", register_pytest_gpu)
