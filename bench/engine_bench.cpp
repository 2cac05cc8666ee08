// In-process engine speed: one DeepSeek-V3 estimate (61 layers, MLA + MoE, MTP, PP 4), with
// and without the named component lists. Target (issue 4): at most 20 microseconds. And the
// Megatron-flag parser on many flags (linear since issue 20).
#include <string>

#include <benchmark/benchmark.h>

#include <mme/engine/estimator.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>

#include "deepseek_adapter.hpp"
#include "dense_mlp.hpp"
#include "gqa.hpp"
#include "language_model.hpp"
#include "mla.hpp"
#include "moe.hpp"

namespace {

struct Fixture {
  mme::Registry registry;
  mme::ModelSpec model;
  mme::TrainingSetup setup;
  Fixture() {
    registry.register_plugin("adapter_deepseek", "bench", "", mme::plugins::register_deepseek_adapter);
    registry.register_plugin("layer_gqa", "bench", "", mme::plugins::register_gqa);
    registry.register_plugin("layer_mla", "bench", "", mme::plugins::register_mla);
    registry.register_plugin("layer_dense_mlp", "bench", "", mme::plugins::register_dense_mlp);
    registry.register_plugin("layer_moe", "bench", "", mme::plugins::register_moe);
    registry.register_plugin("layer_language_model", "bench", "", mme::plugins::register_language_model);
    const std::string path = std::string(MME_SOURCE_DIR) + "/models/deepseek-ai--DeepSeek-V3/config.json";
    model = mme::adapt_config(mme::read_config_file(path), "deepseek-ai/DeepSeek-V3", path, registry);
    // The seed tool's README example.
    setup.parallel.tp = 4;
    setup.parallel.pp = 4;
    setup.parallel.ep = 8;
    setup.parallel.world_size = 128;
    setup.pipeline.last_stage_layers = 16;
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_DeepSeekV3Estimate(benchmark::State& state) {
  auto& f = fixture();
  const mme::Estimator estimator(f.model, f.registry);
  mme::EstimateOptions options;
  options.components = state.range(0) != 0;
  // The device total: the caching allocator replayed over each stage (device_memory.cpp), what
  // `mme estimate` adds to the engine's terms; the planner turns it off.
  options.device_memory = state.range(1) != 0;
  for (auto _ : state) {
    mme::Estimate e = estimator.run(f.setup, options);
    benchmark::DoNotOptimize(e.stages.back().total_bytes);
  }
}
BENCHMARK(BM_DeepSeekV3Estimate)
    ->Args({1, 1})
    ->Args({1, 0})
    ->Args({0, 0})
    ->ArgNames({"components", "device"})
    ->Unit(benchmark::kMicrosecond);

void BM_DeepSeekV3EstimatorConstruction(benchmark::State& state) {
  auto& f = fixture();
  for (auto _ : state) {
    mme::Estimator estimator(f.model, f.registry);
    benchmark::DoNotOptimize(estimator.count_parameters().total);
  }
}
BENCHMARK(BM_DeepSeekV3EstimatorConstruction)->Unit(benchmark::kMicrosecond);

// The Megatron-flag parser on N distinct flags, each given twice (issue 20: quadratic before,
// 25 s for 100 000 flags; docs/reliability.md).
void BM_ParseMegatronArgs(benchmark::State& state) {
  std::string text;
  for (int pass = 0; pass < 2; ++pass)
    for (std::int64_t i = 0; i < state.range(0); ++i)
      text += "--flag-" + std::to_string(i) + " " + std::to_string(pass) + "\n";
  for (auto _ : state) {
    const mme::MegatronArgs a = mme::parse_megatron_args(text, "bench");
    benchmark::DoNotOptimize(a.flags().size());
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_ParseMegatronArgs)->RangeMultiplier(10)->Range(1000, 100000)->Complexity()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
