#include "fuzz_support.hpp"

#include <algorithm>
#include <functional>
#include <memory>

#include "amd_cdna.hpp"
#include "deepseek_adapter.hpp"
#include "dense_mlp.hpp"
#include "generic_hf_adapter.hpp"
#include "gpt_oss_adapter.hpp"
#include "gqa.hpp"
#include "hybrid.hpp"
#include "json_profiles.hpp"
#include "language_model.hpp"
#include "megatron_args_adapter.hpp"
#include "mla.hpp"
#include "moe.hpp"
#include "moonlight_kimi_adapter.hpp"
#include "nemotron_h_adapter.hpp"
#include "nvidia_ampere.hpp"
#include "nvidia_blackwell.hpp"
#include "nvidia_hopper.hpp"
#include "qwen_adapter.hpp"
#include "spec_file_adapter.hpp"
#include <sanitizer/common_interface_defs.h>

namespace mme::fuzz {

std::vector<commands::BuiltinPlugin> all_plugins() {
  struct Entry {
    const char* name;
    void (*fn)(Registrar&);
  };
  // The names of the loadable modules, in the loader's order (file names sorted).
  static const Entry kPlugins[] = {
      {"adapter_deepseek", plugins::register_deepseek_adapter},
      {"adapter_generic_hf", plugins::register_generic_hf_adapter},
      {"adapter_gpt_oss", plugins::register_gpt_oss_adapter},
      {"adapter_megatron_args", plugins::register_megatron_args},
      {"adapter_moonlight_kimi", plugins::register_moonlight_kimi_adapter},
      {"adapter_nemotron_h", plugins::register_nemotron_h_adapter},
      {"adapter_qwen", plugins::register_qwen_adapter},
      {"adapter_spec_file", plugins::register_spec_file_adapter},
      {"hw_amd_cdna", plugins::register_amd_cdna},
      {"hw_nvidia_ampere", plugins::register_nvidia_ampere},
      {"hw_nvidia_blackwell", plugins::register_nvidia_blackwell},
      {"hw_nvidia_hopper", plugins::register_nvidia_hopper},
      {"json_profiles", plugins::register_json_profiles},
      {"layer_dense_mlp", plugins::register_dense_mlp},
      {"layer_gqa", plugins::register_gqa},
      {"layer_hybrid", plugins::register_hybrid_layers},
      {"layer_mla", plugins::register_mla},
      {"layer_moe", plugins::register_moe},
      {"layer_language_model", plugins::register_language_model},
  };
  std::vector<commands::BuiltinPlugin> out;
  for (const auto& p : kPlugins) out.push_back({p.name, "fuzz", p.fn});
  return out;
}

void register_all_plugins(Registry& r) {
  for (const auto& p : all_plugins()) r.register_plugin(p.name, p.version, "", p.register_plugin);
}

const Registry& registry() {
  static const std::unique_ptr<Registry> r = [] {
    auto out = std::make_unique<Registry>();
    register_all_plugins(*out);
    return out;
  }();
  return *r;
}

void finding(const char* target, const std::string& what) {
  // Through the sanitizers' report stream: libFuzzer keeps it when -close_fd_mask silences the
  // target's own stderr.
  const std::string line = std::string("mme fuzz finding (") + target + "): " + what;
  __sanitizer_report_error_summary(line.c_str());
  std::abort();
}

void check_estimates_agree(const char* target, const Estimate& with, const Estimate& without) {
  if (with.stages.size() != without.stages.size() || with.peak_stage != without.peak_stage)
    finding(target, "the estimate differs with and without components");
  for (std::size_t i = 0; i < with.stages.size(); ++i) {
    const auto& s = with.stages[i];
    if (s.total_bytes != without.stages[i].total_bytes)
      finding(target, "a stage total differs with and without components");
    for (std::int64_t v :
         {s.weight_bytes, s.gradient_bytes, s.optimizer_bytes, s.activation_bytes, s.other_bytes, s.parameters})
      if (v < 0) finding(target, "a negative byte or parameter count");
    // The peak is the larger of the two phases of a step (estimator.hpp StageEstimate).
    if (s.weight_bytes + s.gradient_bytes + s.optimizer_bytes + s.other_bytes != s.static_bytes ||
        s.step_only_bytes < 0 || s.step_only_bytes > s.optimizer_bytes ||
        s.forward_backward_bytes != s.static_bytes - s.step_only_bytes + s.activation_bytes ||
        s.step_transient_bytes < 0 || s.optimizer_step_bytes != s.static_bytes + s.step_transient_bytes ||
        s.total_bytes != std::max(s.forward_backward_bytes, s.optimizer_step_bytes))
      finding(target, "the stage's parts do not add up to its total");
    if (s.upper_bytes < s.total_bytes) finding(target, "the upper bound is below the estimate");
  }
}

}  // namespace mme::fuzz
