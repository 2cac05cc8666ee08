// The setting planner_test and knobs_test share: a registry of the DeepSeek, Qwen and generic
// Hugging Face adapters with the layer models and the H100 profile (the programs link those
// plugin archives), the bundled configs adapted through it, and the options both start from.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <mme/engine/estimator.hpp>
#include <mme/planner/planner.hpp>

#include "deepseek_adapter.hpp"
#include "generic_hf_adapter.hpp"
#include "planner_fixture.hpp"
#include "qwen_adapter.hpp"

namespace mme::test::planner_zoo {

inline const Registry& registry() {
  static const std::unique_ptr<Registry> r =
      planner_registry({{"adapter_deepseek", plugins::register_deepseek_adapter},
                        {"adapter_qwen", plugins::register_qwen_adapter},
                        {"adapter_generic_hf", plugins::register_generic_hf_adapter}});
  return *r;
}

inline ModelSpec bundled(const std::string& id) { return bundled_model(id, registry()); }

inline const HardwareProfile& h100() { return *registry().find_hardware("H100"); }

// `gpus` H100s, two worker threads, every other option at its default.
inline PlanOptions options_for(std::int64_t gpus) {
  PlanOptions o;
  o.num_gpus = gpus;
  o.gpu = &h100();
  o.threads = 2;
  return o;
}

// What the planner asks the engine on Hopper: no component lists, no device total (the planner
// judges by the fixed rule and never replays the allocator).
inline EstimateOptions hopper() {
  EstimateOptions eo;
  eo.compute_capability = 90;
  eo.components = false;
  eo.device_memory = false;
  return eo;
}

}  // namespace mme::test::planner_zoo
