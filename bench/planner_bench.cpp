// Planner speed (issue 6): layouts judged per second per core on DeepSeek-V3, the search on
// one thread and on every core, and the engine call the search is made of. Figures go to
// docs/performance.md (Planner). Targets: 1,000,000 layouts/s/core; `mme plan
// deepseek-ai/DeepSeek-V3 --num-gpus 1024 --gpu H100` under 2 s on 2 cores (hyperfine).
#include <thread>

#include <benchmark/benchmark.h>

#include <mme/engine/estimator.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>
#include <mme/planner/planner.hpp>

#include "deepseek_adapter.hpp"
#include "dense_mlp.hpp"
#include "gqa.hpp"
#include "language_model.hpp"
#include "mla.hpp"
#include "moe.hpp"
#include "nvidia_hopper.hpp"

namespace {

struct Fixture {
  mme::Registry registry;
  mme::ModelSpec model;
  Fixture() {
    registry.register_plugin("adapter_deepseek", "bench", "", mme::plugins::register_deepseek_adapter);
    registry.register_plugin("layer_gqa", "bench", "", mme::plugins::register_gqa);
    registry.register_plugin("layer_mla", "bench", "", mme::plugins::register_mla);
    registry.register_plugin("layer_dense_mlp", "bench", "", mme::plugins::register_dense_mlp);
    registry.register_plugin("layer_moe", "bench", "", mme::plugins::register_moe);
    registry.register_plugin("layer_language_model", "bench", "", mme::plugins::register_language_model);
    registry.register_plugin("hw_nvidia_hopper", "bench", "", mme::plugins::register_nvidia_hopper);
    const std::string path = std::string(MME_SOURCE_DIR) + "/models/deepseek-ai--DeepSeek-V3/config.json";
    model = mme::adapt_config(mme::read_config_file(path), "deepseek-ai/DeepSeek-V3", path, registry);
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

mme::PlanOptions options(std::int64_t gpus, unsigned threads) {
  mme::PlanOptions o;
  o.num_gpus = gpus;
  o.gpu = fixture().registry.find_hardware("H100");
  o.threads = threads;
  return o;
}

// The whole search; items = layouts judged, and the engine calls among them.
void run_search(benchmark::State& state, std::int64_t gpus, unsigned threads, bool stream) {
  const mme::Planner planner(fixture().model, fixture().registry);
  mme::PlanOptions o = options(gpus, threads);
  std::uint64_t rows = 0;
  if (stream) o.on_valid = [&rows](const mme::Plan&) { ++rows; };
  std::uint64_t evaluated = 0, estimated = 0;
  for (auto _ : state) {
    const mme::PlanResult r = planner.run(o);
    evaluated += r.evaluated;
    estimated += r.estimated;
    benchmark::DoNotOptimize(r.plans.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(evaluated));
  state.counters["estimated/s"] = benchmark::Counter(static_cast<double>(estimated), benchmark::Counter::kIsRate);
  state.counters["layouts"] = static_cast<double>(evaluated / static_cast<std::uint64_t>(state.iterations()));
  benchmark::DoNotOptimize(rows);
}

// Rates are per CPU second of the whole process (MeasureProcessCPUTime): per core, and
// steady on a machine shared with other jobs, where wall time is not.

// One worker thread.
void BM_PlanDeepSeekV3OneThread(benchmark::State& state) { run_search(state, state.range(0), 1, false); }
BENCHMARK(BM_PlanDeepSeekV3OneThread)
    ->Arg(256)
    ->Arg(1024)
    ->ArgName("gpus")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();

// Every layout estimated (the --csv path: nothing is skipped).
void BM_PlanDeepSeekV3Streamed(benchmark::State& state) { run_search(state, state.range(0), 1, true); }
BENCHMARK(BM_PlanDeepSeekV3Streamed)->Arg(256)->ArgName("gpus")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

// Every core.
void BM_PlanDeepSeekV3AllCores(benchmark::State& state) { run_search(state, state.range(0), 0, false); }
BENCHMARK(BM_PlanDeepSeekV3AllCores)
    ->Arg(1024)
    ->ArgName("gpus")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();

// The enumeration alone (no engine): what the planner adds per candidate.
void BM_EnumerateDeepSeekV3(benchmark::State& state) {
  const mme::Planner planner(fixture().model, fixture().registry);
  const mme::PlanOptions o = options(state.range(0), 1);
  std::uint64_t n = 0;
  for (auto _ : state) planner.enumerate(o, [&n](const mme::PlanLayout& l) { n += static_cast<std::uint64_t>(l.dp); });
  benchmark::DoNotOptimize(n);
  state.SetItemsProcessed(static_cast<std::int64_t>(planner.count_candidates(o)) * state.iterations());
}
BENCHMARK(BM_EnumerateDeepSeekV3)->Arg(1024)->ArgName("gpus")->Unit(benchmark::kMillisecond);

// The engine call the search makes per estimated candidate, on a mix of DeepSeek-V3 layouts.
void BM_EngineOnPlannerLayouts(benchmark::State& state) {
  const mme::Planner planner(fixture().model, fixture().registry);
  const mme::PlanOptions o = options(1024, 1);
  std::vector<mme::TrainingSetup> setups;
  std::uint64_t i = 0;
  planner.enumerate(o, [&](const mme::PlanLayout& l) {
    if (i++ % 997 == 0) setups.push_back(planner.setup_for(l, o));
  });
  mme::EstimateOptions eo;
  eo.compute_capability = 90;
  eo.components = false;
  eo.bound_terms = false;
  std::size_t k = 0;
  for (auto _ : state) {
    const mme::Estimate e = planner.estimator().run(setups[k], eo);
    benchmark::DoNotOptimize(e.stages.back().total_bytes);
    if (++k == setups.size()) k = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EngineOnPlannerLayouts)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
