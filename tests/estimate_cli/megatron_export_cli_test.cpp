// `mme estimate --print-megatron-args`: the launch flags of a model and setup, read back by
// `--megatron-args-file`, describe the same run. The yardstick is independent of the export:
// the Hugging Face adapters' exact parameter counts and the estimate of the model's own route.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mme/inputs/megatron_flags.hpp"

#include "test_support.hpp"

namespace mme {
namespace {

using test::run_mme;
using ::testing::HasSubstr;
using ::testing::Not;

struct Figures {
  std::int64_t total_params = 0, active_params = 0, peak = 0, upper = 0;
  bool operator==(const Figures&) const = default;
};

Figures figures_of(const std::vector<std::string>& args) {
  const auto r = run_mme(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return {};
  const auto j = nlohmann::json::parse(r.out);
  return {j["model"]["total_params"].get<std::int64_t>(), j["model"]["active_params"].get<std::int64_t>(),
          j["peak"]["total_bytes"].get<std::int64_t>(), j["peak"]["upper_bytes"].get<std::int64_t>()};
}

// The words of an export after its entry script are flags of Megatron-LM's parser (the list
// megatron/training/arguments.py gives: framework/src/inputs/megatron_lm_flags.inc) and their
// values; before it, `export NAME=VALUE` and torchrun's launcher.
void expect_only_megatron_flags(const std::string& model, const std::vector<std::string>& print) {
  std::vector<std::string> json = print;
  json.push_back("--json");
  const auto r = run_mme(json);
  ASSERT_EQ(r.exit_code, 0) << model << ": " << r.err;
  const auto words = nlohmann::json::parse(r.out).get<std::vector<std::string>>();
  bool after_entry = false;
  int flags = 0;
  for (const auto& w : words) {
    if (w == "pretrain_gpt.py" || w == "pretrain_hybrid.py") {
      after_entry = true;
      continue;
    }
    if (!after_entry || w.rfind("--", 0) != 0) continue;
    ++flags;
    EXPECT_NE(find_megatron_lm_flag(w.substr(2)), nullptr) << model << ": " << w << " is not Megatron-LM's";
  }
  EXPECT_TRUE(after_entry) << model;
  EXPECT_GE(flags, 10) << model;
}

// Estimates `model` with `layout`, then the printed launch flags alone.
void expect_round_trip(const std::string& model, const std::vector<std::string>& layout) {
  std::vector<std::string> direct{"estimate", model};
  direct.insert(direct.end(), layout.begin(), layout.end());
  std::vector<std::string> print = direct;
  print.push_back("--print-megatron-args");
  expect_only_megatron_flags(model, print);
  const auto printed = run_mme(print);
  ASSERT_EQ(printed.exit_code, 0) << model << ": " << printed.err;
  const test::TempDir dir;
  const auto file = dir.path() / "launch.args";
  test::write_file(file, printed.out);
  direct.push_back("--json");
  EXPECT_EQ(figures_of(direct), figures_of({"estimate", "--megatron-args-file", file.string(), "--json"}))
      << model << "\n"
      << printed.out;
}

std::vector<std::string> bundled_models() {
  const auto r = run_mme({"models", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& m : j.is_array() ? j : j["models"]) out.push_back(m["name"].get<std::string>());
  return out;
}

TEST(MegatronExport, EveryBundledModelReadsBackAsTheSameRun) {
  int exported = 0;
  for (const auto& model : bundled_models()) {
    if (model == "google/gemma-2-9b-it") continue;  // post-norms: refused below
    expect_round_trip(model, {"--num-gpus", "8"});
    ++exported;
  }
  EXPECT_GE(exported, 20);
}

TEST(MegatronExport, LayoutsPipelineSplitsAndKnobsReadBack) {
  // MLA + MoE + MTP with an uneven split, EP and recompute; a dense GQA model with TP, CP, VPP,
  // FP8 and offloading; an all-MoE model with ETP and the flex dispatcher.
  expect_round_trip("deepseek-ai/DeepSeek-V3", {"--tp", "4", "--pp", "8", "--ep", "32", "--num-gpus", "1024",
                                                "--num-layers-in-last-pipeline-stage", "5", "--recompute-granularity",
                                                "selective", "--recompute-modules", "core_attn,mla_up_proj"});
  expect_round_trip("meta-llama/Meta-Llama-3-70B",
                    {"--tp", "8", "--pp", "4", "--vpp", "2", "--cp", "2", "--num-gpus", "128", "--seq-length", "8192",
                     "--precision", "fp8", "--global-batch-size", "64", "--optimizer-cpu-offload-fraction", "0.5",
                     "--use-precision-aware-optimizer"});
  expect_round_trip("Qwen/Qwen3-30B-A3B", {"--tp", "2", "--ep", "8", "--etp", "1", "--num-gpus", "16",
                                           "--moe-token-dispatcher", "flex", "--micro-batch-size", "2"});
  // A hybrid model: its 52 layers over PP 2 x VPP 2 become '|' separators in its pattern
  // (pretrain_hybrid.py takes no VPP flag beside one), and read back as the same chunks.
  expect_round_trip("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
                    {"--tp", "2", "--pp", "2", "--vpp", "2", "--ep", "8", "--num-gpus", "32"});
  const auto hybrid = run_mme({"estimate", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "--pp", "2", "--vpp", "2",
                               "--ep", "8", "--num-gpus", "32", "--print-megatron-args"});
  EXPECT_THAT(hybrid.out, HasSubstr("pretrain_hybrid.py"));
  EXPECT_THAT(hybrid.out,
              HasSubstr("--hybrid-layer-pattern 'MEMEM*EMEMEM*|EMEMEM*EMEMEM|*EMEMEM*EMEME|MEM*EMEMEMEME'"));
  EXPECT_THAT(hybrid.out, Not(HasSubstr("--num-virtual-stages-per-pipeline-rank")));
  // An uneven split with VPP (what `mme plan` may propose) becomes separators at the engine's chunks.
  expect_round_trip("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
                    {"--pp", "2", "--vpp", "4", "--ep", "4", "--num-gpus", "16", "--num-layers-in-first-pipeline-stage",
                     "28", "--num-layers-in-last-pipeline-stage", "24"});
  // A rotary model past its config's 8192 positions: Megatron-LM asserts max_position_embeddings
  // >= seq_length, so the line carries 16384 (RoPE keeps no table of that size: the same run).
  expect_round_trip("meta-llama/Meta-Llama-3-8B", {"--tp", "2", "--num-gpus", "8", "--seq-length", "16384"});
  const auto printed = run_mme({"estimate", "meta-llama/Meta-Llama-3-8B", "--tp", "2", "--num-gpus", "8",
                                "--seq-length", "16384", "--print-megatron-args"});
  EXPECT_THAT(printed.out, HasSubstr("--max-position-embeddings 16384"));
}

TEST(MegatronExport, WhatNoFlagExpressesIsRefused) {
  const auto r = run_mme({"estimate", "google/gemma-2-9b-it", "--print-megatron-args"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("post-attention / post-MLP norms: Megatron-LM has no launch flag for it"));
  EXPECT_EQ(r.out, "");
  const auto both = run_mme({"estimate", "Qwen/Qwen3-0.6B", "--print-megatron-args", "--dump-config"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("--print-megatron-args prints the launch flags instead of the report"));
  // a2a+p2p needs the two levels' sizes (arguments.py), which the setup does not keep.
  const auto a2a_p2p = run_mme({"estimate", "meta-llama/Meta-Llama-3-8B", "--cp", "4", "--cp-comm-type", "a2a+p2p",
                                "--num-gpus", "8", "--print-megatron-args"});
  EXPECT_EQ(a2a_p2p.exit_code, 2);
  EXPECT_THAT(a2a_p2p.err, HasSubstr("Megatron-LM also needs --hierarchical-context-parallel-sizes"));
}

TEST(MegatronExport, JsonIsTheArgumentList) {
  const auto r = run_mme({"estimate", "Qwen/Qwen3-0.6B", "--num-gpus", "2", "--print-megatron-args", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  // Qwen3-0.6B: 28 layers of h 1024, 16 heads in 8 query groups of 128 (config.json).
  const std::vector<std::string> args = j.get<std::vector<std::string>>();
  auto after = [&](const std::string& flag) {
    for (std::size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == flag) return args[i + 1];
    return std::string("(absent)");
  };
  EXPECT_EQ(after("--num-layers"), "28");
  EXPECT_EQ(after("--hidden-size"), "1024");
  EXPECT_EQ(after("--num-query-groups"), "8");
  EXPECT_EQ(after("--kv-channels"), "128");
  // The GPU count is the launcher's: Megatron-LM has no flag for it.
  EXPECT_EQ(std::vector<std::string>(args.begin(), args.begin() + 6),
            (std::vector<std::string>{"torchrun", "--nproc_per_node", "2", "--nnodes", "1", "pretrain_gpt.py"}));
  EXPECT_EQ(std::find(args.begin(), args.end(), "--world-size"), args.end());
}

TEST(MegatronExport, VppOffloadingAndFsdpUseMegatronLmsFlags) {
  // Interleaved VPP as --num-virtual-stages-per-pipeline-rank (8 per node: 2 nodes of 8).
  expect_round_trip("meta-llama/Meta-Llama-3-8B", {"--tp", "2", "--pp", "4", "--vpp", "2", "--num-gpus", "16"});
  // Activation offloading as --cpu-offloading-num-layers (it turns cpu_offloading on in
  // arguments.py), with PP 1 and no recompute as Megatron-LM requires.
  expect_round_trip("Qwen/Qwen3-8B", {"--cpu-offloading-num-layers", "4", "--num-gpus", "8"});
  // Megatron-FSDP and FSDP2.
  expect_round_trip("Qwen/Qwen3-8B", {"--use-megatron-fsdp", "--fsdp-double-buffer", "--num-gpus", "8"});
  // FSDP2 needs untied embedding and output weights (arguments.py): Qwen3-8B's are, Qwen3-0.6B's
  // tied ones are refused.
  expect_round_trip("Qwen/Qwen3-8B", {"--use-torch-fsdp2", "--num-gpus", "4"});
  const auto tied = run_mme({"estimate", "Qwen/Qwen3-0.6B", "--use-torch-fsdp2", "--num-gpus", "4"});
  EXPECT_EQ(tied.exit_code, 4);
  EXPECT_THAT(tied.err, HasSubstr("--untie-embeddings-and-output-weights"));
  const auto vpp = run_mme({"estimate", "meta-llama/Meta-Llama-3-8B", "--pp", "4", "--vpp", "2", "--num-gpus", "4",
                            "--print-megatron-args"});
  EXPECT_THAT(vpp.out, HasSubstr("--num-virtual-stages-per-pipeline-rank 2"));
  const auto offload =
      run_mme({"estimate", "Qwen/Qwen3-8B", "--cpu-offloading-num-layers", "4", "--print-megatron-args"});
  EXPECT_THAT(offload.out, HasSubstr("--cpu-offloading-num-layers 4"));
  EXPECT_THAT(offload.out, ::testing::Not(HasSubstr("--cpu-offloading ")));
  // A setting no Megatron-LM flag expresses is refused by name (cpu_offloading_weights is among
  // the TransformerConfig fields arguments.py gives no flag).
  const auto off = run_mme({"estimate", "Qwen/Qwen3-8B", "--cpu-offloading-num-layers", "4", "--cpu-offloading-weights",
                            "--print-megatron-args"});
  EXPECT_EQ(off.exit_code, 2);
  EXPECT_THAT(off.err, HasSubstr("cpu-offloading-weights true: Megatron-LM has no launch flag for it"));
}

}  // namespace
}  // namespace mme
