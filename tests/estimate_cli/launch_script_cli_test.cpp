// Launch scripts through `mme estimate --megatron-args-file` (docs/cli.md, "Launch scripts"): a
// script gives the same estimate as the argument list it hands to pretrain_gpt.py with the GPU
// count of its launcher; its options (--set, --script-arg, --script-source, ...); what it
// cannot read is one error line; what it does not know the effect of is a warning in the JSON
// document's `warnings` too.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

using test::run_mme;
using ::testing::HasSubstr;
using ::testing::Not;

// A small GPT: 4 layers of h 256, 8 heads, NullTokenizer's 1000 + 1 entries. The global batch of
// 192 divides by micro-batch 2 x DP for every layout below (DP 4, 6, 8 and 32).
const std::string kModel =
    "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 --max-position-embeddings 512 "
    "--micro-batch-size 2 --global-batch-size 192 --tokenizer-type NullTokenizer --vocab-size 1000 --bf16 ";

nlohmann::json json_of(const test::RunResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

struct Script {
  test::TempDir dir;
  std::string path;
  explicit Script(const std::string& text) : path((dir.path() / "train.sh").string()) { test::write_file(path, text); }
};

TEST(LaunchScriptCli, TheScriptIsTheArgumentListItLaunches) {
  // The shapes of Megatron-LM's example scripts: arrays with comments, variables, arithmetic, an
  // if that appends flags, positional parameters with defaults, torchrun's GPU count.
  const Script s(R"sh(#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
GPUS_PER_NODE=4
NUM_NODES=${NUM_NODES:-2}
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))
CHECKPOINT_PATH=${1:-"checkpoints/tiny"}
TP=2
DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr localhost   # single node for the test
)
MODEL_ARGS=(
    --num-layers 4 --hidden-size 256
    --num-attention-heads 8
    --seq-length 512 --max-position-embeddings 512
)
TRAINING_ARGS=(--micro-batch-size 2 --global-batch-size 192 --tokenizer-type NullTokenizer --vocab-size 1000)
DTYPE=bf16
if [[ "$DTYPE" == "bf16" ]]; then
    TRAINING_ARGS+=(--bf16)
fi
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} "${TRAINING_ARGS[@]}" \
    --tensor-model-parallel-size $TP --sequence-parallel \
    --save $CHECKPOINT_PATH --load $CHECKPOINT_PATH
)sh");
  const auto script = json_of(run_mme({"estimate", "--megatron-args-file", s.path, "--json"}));
  // The same run as flags: 4 GPUs per node x 2 nodes.
  const auto flags =
      json_of(run_mme({"estimate", "--megatron-args", kModel + "--tensor-model-parallel-size 2 --sequence-parallel",
                       "--num-gpus", "8", "--json"}));
  EXPECT_EQ(script["setup"]["num_gpus"], 8);
  EXPECT_EQ(script["setup"]["tp"], 2);
  EXPECT_EQ(script["peak"], flags["peak"]);
  EXPECT_EQ(script["stages"], flags["stages"]);
  // --set gives the environment the script starts with: 3 nodes, 12 GPUs.
  const auto three = json_of(run_mme({"estimate", "--megatron-args-file", s.path, "--set", "NUM_NODES=3", "--json"}));
  EXPECT_EQ(three["setup"]["num_gpus"], 12);
  // --num-gpus says otherwise than the launcher.
  const auto sixteen = json_of(run_mme({"estimate", "--megatron-args-file", s.path, "--num-gpus", "16", "--json"}));
  EXPECT_EQ(sixteen["setup"]["num_gpus"], 16);
}

TEST(LaunchScriptCli, PastedLaunchLines) {
  // torchrun's counts before the entry script; the rest is pretrain_gpt.py's.
  const auto r = json_of(
      run_mme({"estimate", "--megatron-args",
               "torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py " + kModel + "--tensor-model-parallel-size 2",
               "--json"}));
  EXPECT_EQ(r["setup"]["num_gpus"], 64);
  EXPECT_EQ(r["setup"]["tp"], 2);
  // A flags variable of the script: read, not dropped.
  const Script s("GPT_ARGS=\"" + kModel + "\"\npython pretrain_gpt.py $GPT_ARGS --tensor-model-parallel-size 2\n");
  const auto v = json_of(run_mme({"estimate", "--megatron-args-file", s.path, "--num-gpus", "2", "--json"}));
  EXPECT_EQ(v["model"]["num_layers"], 4);
}

TEST(LaunchScriptCli, WarningsReachTheJsonDocument) {
  // --enable-experimental is Megatron-LM's (arguments.py), but mme does not know its memory effect.
  const auto r = run_mme({"estimate", "--megatron-args", kModel + "--enable-experimental", "--json"});
  const auto j = json_of(r);
  bool found = false;
  for (const auto& w : j["warnings"])
    found = found || w.get<std::string>().find("--enable-experimental") != std::string::npos;
  EXPECT_TRUE(found) << j["warnings"].dump();
  EXPECT_THAT(r.err, HasSubstr("--enable-experimental"));
  // A launch without a GPU count: said in both places.
  const auto none = run_mme({"estimate", "--megatron-args", "python pretrain_gpt.py " + kModel, "--json"});
  EXPECT_THAT(json_of(none)["warnings"].dump(), HasSubstr("does not say how many GPUs"));
}

// A launch whose GPU count its own layout does not divide (Megatron-LM's example scripts default
// to one node): the error says the count is the launch's, from where, and how to give another.
TEST(LaunchScriptCli, ALaunchCountTheLayoutDoesNotDivideSaysWhereItCameFrom) {
  const Script s("NUM_NODES=${NUM_NODES:-1}\ntorchrun --nproc_per_node 4 --nnodes $NUM_NODES pretrain_gpt.py " +
                 kModel + "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4\n");
  const auto r = run_mme({"estimate", "--megatron-args-file", s.path});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("the launch runs 4 GPUs (torchrun --nproc_per_node 4"));
  EXPECT_THAT(r.err, HasSubstr("need a multiple of 8"));
  EXPECT_THAT(r.err, HasSubstr("--set NAME=VALUE"));
  // Two nodes: 8 GPUs, DP 1.
  const auto two = json_of(run_mme({"estimate", "--megatron-args-file", s.path, "--set", "NUM_NODES=2", "--json"}));
  EXPECT_EQ(two["setup"]["num_gpus"], 8);
}

TEST(LaunchScriptCli, RefusalsAreOneErrorLine) {
  auto refused = [](const std::vector<std::string>& args) {
    const auto r = run_mme(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    return r.err;
  };
  EXPECT_THAT(refused({"estimate", "--megatron-args", "torchrun pretrain_bert.py " + kModel}),
              HasSubstr("pretrain_bert.py trains BERT models, which mme does not model"));
  EXPECT_THAT(refused({"estimate", "--megatron-args", kModel + "--tensor-model-parallel-size 2 ${EXTRA_ARGS}"}),
              HasSubstr("$EXTRA_ARGS stands where a flag of Megatron-LM would"));
  EXPECT_THAT(refused({"estimate", "--megatron-args", kModel + "--world-size 8"}),
              HasSubstr("--world-size (torchrun sets the world size"));
  EXPECT_THAT(refused({"estimate", "--megatron-args", kModel + "--virtual-pipeline-model-parallel-size 2"}),
              HasSubstr("--virtual-pipeline-model-parallel-size (Megatron-LM sets it from "
                        "--num-virtual-stages-per-pipeline-rank"));
  EXPECT_THAT(refused({"estimate", "--megatron-args", "torchrun --nproc_per_node $GPUS pretrain_gpt.py " + kModel}),
              HasSubstr("the GPU count: --nproc_per_node $GPUS: line 1: GPUS is not set in the script"));
  EXPECT_THAT(refused({"estimate", "Qwen/Qwen3-0.6B", "--set", "A=1"}), HasSubstr("--set applies to a launch script"));
  // A refusal of Megatron-LM's own flag checks names the file, as the script reader's errors do
  // (arguments.py validate_args refuses a batch-size schedule with a global batch size).
  const Script schedule("python pretrain_gpt.py " + kModel + "--step-batch-size-schedule 0:16\n");
  const std::string err = refused({"estimate", "--megatron-args-file", schedule.path});
  EXPECT_EQ(err.rfind("mme: error: " + schedule.path + ": --step-batch-size-schedule and --global-batch-size", 0), 0u)
      << err;
  EXPECT_THAT(refused({"estimate", "--megatron-args", kModel + "--step-batch-size-schedule 0:16"}),
              Not(HasSubstr("--megatron-args: --step")));
  // --num-gpus answers the launcher's unknown count.
  EXPECT_EQ(run_mme({"estimate", "--megatron-args", "torchrun --nproc_per_node $GPUS pretrain_gpt.py " + kModel,
                     "--num-gpus", "4", "--json"})
                .exit_code,
            0);
}

TEST(LaunchScriptCli, ScriptArgumentsSourcesAndEntryScriptFlags) {
  const test::TempDir dir;
  test::write_file(dir.path() / "model.sh", "MODEL_ARGS=\"" + kModel + "\"\n");
  test::write_file(dir.path() / "train.sh",
                   "source ./model.sh\nTP=${1:?give TP}\n"
                   "python pretrain_gpt.py $MODEL_ARGS --tensor-model-parallel-size $TP --my-own-flag 3\n");
  const std::string path = (dir.path() / "train.sh").string(), model = (dir.path() / "model.sh").string();
  EXPECT_THAT(run_mme({"estimate", "--megatron-args-file", path}).err, HasSubstr("--script-source ./model.sh"));
  const auto r = run_mme({"estimate", "--megatron-args-file", path, "--script-source", model, "--script-arg", "2",
                          "--extra-megatron-flag", "my-own-flag", "--num-gpus", "2", "--json"});
  const auto j = json_of(r);
  EXPECT_EQ(j["setup"]["tp"], 2);
  EXPECT_THAT(j["warnings"].dump(), HasSubstr("--my-own-flag: not a flag of Megatron-LM's parser"));
}

TEST(LaunchScriptCli, MegatronFsdpWithFp8ParamsAtLlama3Size) {
  // Megatron-LM's Megatron-FSDP example (Llama-3-8B, --fp8-param-gather) once overflowed 64 bits:
  // a count of ~8e9 parameters times ~7e9 FP8 ones. Every weight buffer keeps its FP8 share at
  // 1 byte instead of 2: fp8 = bf16 x (2 - G / P) / 2, with G the GEMM weights of the 32 layers,
  // 32 x (4096 x (4096 + 2 x 1024) [q, k, v] + 4096 x 4096 [o] + 3 x 4096 x 14336 [MLP])
  // = 6,979,321,856, and P the stage's parameters (the vocabulary padded: NullTokenizer's
  // 128256 + 1 entries to 128384).
  const std::string llama =
      "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention "
      "--num-query-groups 8 --kv-channels 128 --swiglu --disable-bias-linear --untie-embeddings-and-output-weights "
      "--tokenizer-type NullTokenizer --vocab-size 128256 --seq-length 1024 --max-position-embeddings 1024 "
      "--micro-batch-size 1 --bf16 --use-megatron-fsdp ";
  const auto bf16 = json_of(run_mme({"estimate", "--megatron-args", llama, "--num-gpus", "8", "--json"}));
  const auto fp8 = json_of(run_mme(
      {"estimate", "--megatron-args", llama + "--fp8-format hybrid --fp8-param-gather", "--num-gpus", "8", "--json"}));
  const double G = 6979321856.0, P = fp8["stages"][0]["parameters"].get<double>();
  const double expected = bf16["stages"][0]["weight_bytes"].get<double>() * (2 - G / P) / 2;
  EXPECT_NEAR(fp8["stages"][0]["weight_bytes"].get<double>(), expected, 1e-6 * expected);
}

}  // namespace
}  // namespace mme
