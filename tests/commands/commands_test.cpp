// The command layer in process (framework/include/mme/commands/): what the page offers
// (layout_choices) against what commands::estimate accepts, value by value, and two threads
// whose requests carry different hardware files, each seeing only its own GPU.
#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <mme/commands/estimate.hpp>
#include <mme/commands/layout_choices.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/report/next_steps.hpp>
#include <mme/sdk/error.hpp>

#include "test_support.hpp"

namespace {

using namespace mme;
using mme::test::TempDir;

// The built plugins and bundled models, no download, the log lines dropped.
commands::Context context() {
  commands::Context c;
  c.plugins.dirs = {mme::test::plugin_dir()};
  c.plugins.install_dir = false;
  c.environment.sources.bundled_dir = mme::test::models_dir();
  c.offline = true;
  c.log = [](std::string_view, std::string_view) {};
  c.log_level = "off";
  return c;
}

// Whether `mme estimate MODEL --FLAG VALUE ...` runs: the estimate is the independent judge of
// what the page may offer (the GPU count left to the estimate's default, the smallest the layout
// allows).
bool accepted(const std::string& model, const std::vector<std::pair<std::string, std::string>>& flags) {
  commands::EstimateRequest r;
  r.input.model = model;
  for (const auto& [name, value] : flags) r.setup.set(name, value);
  r.components = false;
  r.judge = false;
  r.advice = false;
  try {
    (void)commands::estimate(r, context());
    return true;
  } catch (const LayoutError&) {
    return false;
  }
}

std::vector<std::int64_t> offered(const commands::LayoutChoices& c, const std::string& field) {
  for (const auto& [name, values] : c.values)
    if (name == field) return values;
  ADD_FAILURE() << "no field " << field;
  return {};
}

TEST(commands, LayoutChoicesAreTheValuesTheEstimateAccepts) {
  // Qwen2.5-7B: 28 layers, 28 heads in 4 query groups, MLP width 18944.
  const std::string name = "Qwen/Qwen2.5-7B";
  const auto registry = commands::load_registry(context());
  const ModelSpec model = load_model(name, *registry, commands::source_options(context()));
  const commands::BlockLimits limits = commands::block_limits(model, *registry);
  auto want = [&](const char* flag, std::int64_t lo, std::int64_t hi,
                  std::vector<std::pair<std::string, std::string>> more = {}) {
    std::vector<std::int64_t> out;
    for (std::int64_t v = lo; v <= hi; ++v) {
      auto flags = more;
      flags.emplace_back(flag, std::to_string(v));
      if (accepted(name, flags)) out.push_back(v);
    }
    return out;
  };
  auto within = [](std::vector<std::int64_t> values, std::int64_t lo, std::int64_t hi) {
    std::erase_if(values, [&](std::int64_t v) { return v < lo || v > hi; });
    return values;
  };
  commands::SetupFlags form;
  const commands::LayoutChoices base = commands::layout_choices(model, limits, form);
  // TP must divide the 4 query groups (and the heads and widths): 1, 2, 4.
  EXPECT_EQ(offered(base, "tp"), (std::vector<std::int64_t>{1, 2, 4}));
  EXPECT_EQ(offered(base, "tp"), want("tp", 1, 28));
  // PP with an even split of 28 layers: its divisors.
  EXPECT_EQ(within(offered(base, "pp"), 1, 30), want("pp", 1, 30));
  EXPECT_EQ(offered(base, "pp"), (std::vector<std::int64_t>{1, 2, 4, 7, 14, 28}));
  // The last stage's layers with PP 3 (28 = first + middle + last, each a whole number).
  form.set("pp", "3");
  const commands::LayoutChoices pp3 = commands::layout_choices(model, limits, form);
  EXPECT_EQ(within(offered(pp3, "last"), 0, 29), want("num-layers-in-last-pipeline-stage", 0, 29, {{"pp", "3"}}));
}

TEST(commands, ConcurrentRequestsKeepTheirOwnHardwareFiles) {
  const TempDir dir;
  const auto a = dir.path() / "a.json", b = dir.path() / "b.json";
  mme::test::write_file(a, R"({"name": "Lab-A-24GB", "memory_gib": 24, "architecture": "hopper"})");
  mme::test::write_file(b, R"({"name": "Lab-B-96GB", "memory_gib": 96, "architecture": "hopper"})");
  std::atomic<int> failures{0};
  auto run = [&](const std::filesystem::path& own, const char* mine, const char* theirs) {
    commands::Context c = context();
    c.hardware_files = {own};
    for (int i = 0; i < 10; ++i) {
      commands::EstimateRequest r;
      r.input.model = "Qwen/Qwen3-0.6B";
      r.gpu = mine;
      if (commands::estimate(r, c).gpu->name != mine) ++failures;
      r.gpu = theirs;
      try {
        (void)commands::estimate(r, c);
        ++failures;  // the other thread's GPU is not in this request's registry
      } catch (const UsageError&) {
      }
    }
  };
  std::thread first(run, a, "Lab-A-24GB", "Lab-B-96GB");
  std::thread second(run, b, "Lab-B-96GB", "Lab-A-24GB");
  first.join();
  second.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(commands, LaunchScriptOptionsReachEveryFrontEndThroughTheRequest) {
  // A launch script whose TP and node count come from the environment: --set in the request's
  // ScriptInput decides them, as on the command line (TP 2, 2 nodes x 4 GPUs = 8).
  commands::EstimateRequest r;
  r.input.megatron_args =
      "TP=${TP:-1}\n"
      "torchrun --nproc_per_node 4 --nnodes ${NODES:-1} pretrain_gpt.py --num-layers 2 --hidden-size 256 "
      "--num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 "
      "--tensor-model-parallel-size $TP\n";
  r.input.script.set = {"TP=2", "NODES=2"};
  r.judge = false;
  const commands::EstimateResult e = commands::estimate(r, context());
  EXPECT_EQ(e.estimate.setup.parallel.tp, 2);
  EXPECT_EQ(e.estimate.setup.parallel.world_size, 8);
  // A --set that is no NAME=VALUE, and the script options without a script: one UsageError each.
  r.input.script.set = {"TP"};
  EXPECT_THROW((void)commands::estimate(r, context()), UsageError);
  commands::EstimateRequest bare;
  bare.input.model = "Qwen/Qwen3-0.6B";
  bare.input.script.assume_gpt_entry = true;
  EXPECT_THROW((void)commands::estimate(bare, context()), UsageError);
}

// A next step's predicted step-time cost as the text says it: a whole percentage with its sign,
// and under half a percent either way (which would round to "+0 %" or "-0 %") in words.
TEST(commands, NextStepsSayAStepTimeCostUnderHalfAPercentInWords) {
  cli::NextStep s{"--optimizer-cpu-offload-fraction 1", 80LL << 30, "H100-SXM-80GB", false, 1.053};
  EXPECT_EQ(cli::next_step_text(s, true),
            "--optimizer-cpu-offload-fraction 1 brings the upper bound to 80.00 GiB: fits H100-SXM-80GB; step time "
            "+5 % (predicted)");
  s.step_ratio = 0.996;
  EXPECT_NE(cli::next_step_text(s, true).find("; step time unchanged to within 0.5 % (predicted)"), std::string::npos);
  s.step_ratio = 0.99;
  EXPECT_NE(cli::next_step_text(s, false).find("to 80.00 GiB: fits H100-SXM-80GB; step time -1 % (predicted)"),
            std::string::npos);
  s.free = true;
  EXPECT_NE(cli::next_step_text(s, false).find("; costs no step time"), std::string::npos);
}

}  // namespace
