// The registry of the tests that hold the planner's figures to the engine's
// (engine_agreement_test.cpp, peak_stages_test.cpp): the DeepSeek, Moonlight/Kimi and generic
// HF adapters, the layer models and hw_nvidia_hopper, built once.
#pragma once

#include <memory>

#include "deepseek_adapter.hpp"
#include "generic_hf_adapter.hpp"
#include "moonlight_kimi_adapter.hpp"
#include "planner_fixture.hpp"

namespace mme::test {

inline const Registry& agreement_registry() {
  static const std::unique_ptr<Registry> r =
      planner_registry({{"adapter_deepseek", plugins::register_deepseek_adapter},
                        {"adapter_moonlight_kimi", plugins::register_moonlight_kimi_adapter},
                        {"adapter_generic_hf", plugins::register_generic_hf_adapter}});
  return *r;
}

}  // namespace mme::test
