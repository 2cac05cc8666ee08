// `mme estimate` end to end: the JSON contract, the seed tool's text layout, the seed's
// DeepSeek-V3 example, Megatron flags as input, and invalid layouts.
#include <set>
#include <string>

#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mme/sdk/units.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

using test::run_mme;

const std::vector<std::string> kSeedExample = {"estimate",
                                               "deepseek-ai/DeepSeek-V3",
                                               "--tp",
                                               "4",
                                               "--pp",
                                               "4",
                                               "--ep",
                                               "4",
                                               "--num-gpus",
                                               "128",
                                               "--num-layers-in-last-pipeline-stage",
                                               "16"};

std::vector<std::string> with(std::vector<std::string> args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(EstimateCli, SeedDeepSeekExampleHasFourStagesAndPeakIsTheLargest) {
  auto r = run_mme(with(kSeedExample, {"--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["stages"].size(), 4u);
  const int expected_layers[] = {15, 15, 15, 16};
  std::int64_t largest = 0;
  int largest_rank = -1;
  for (int i = 0; i < 4; ++i) {
    const auto& st = j["stages"][static_cast<std::size_t>(i)];
    EXPECT_EQ(st["pp_rank"], i);
    EXPECT_EQ(st["layers"], expected_layers[i]);
    const auto total = st["total_bytes"].get<std::int64_t>();
    if (total > largest) largest = total, largest_rank = i;
  }
  EXPECT_EQ(j["stages"][3]["mtp_layers"], 1);  // DeepSeek-V3's MTP layer sits on the last stage
  EXPECT_EQ(j["peak"]["pp_rank"], largest_rank);
  EXPECT_EQ(j["peak"]["total_bytes"], largest);
}

TEST(EstimateCli, JsonCarriesTheDocumentedSchema) {
  auto r = run_mme({"estimate", "Qwen/Qwen3-8B", "--tp", "2", "--pp", "2", "--num-gpus", "8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // exactly one document
  EXPECT_EQ(j["schema_version"], 1);
  for (const char* k : {"name", "family", "adapter", "total_params", "active_params"})
    EXPECT_TRUE(j["model"].contains(k)) << k;
  for (const char* k : {"tp", "pp", "ep", "etp", "cp", "vpp", "dp", "expert_dp", "num_gpus", "sequence_parallel",
                        "micro_batch_size", "seq_length", "distributed_optimizer", "recompute_granularity"})
    EXPECT_TRUE(j["setup"].contains(k)) << k;
  EXPECT_EQ(j["setup"]["dp"], 2);
  EXPECT_EQ(j["setup"]["etp"], 1);  // the seed's default (tests/seed_readme: --megatron-args keeps ETP = TP)
  EXPECT_EQ(j["setup"]["sequence_parallel"], true);
  for (const auto& st : j["stages"]) {
    for (const char* k :
         {"pp_rank", "layers", "parameters", "weight_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes",
          "other_bytes", "total_bytes", "inflight_microbatches", "components", "parameters_b", "activation_b",
          "weight_grad_gb", "weight_grad_optim_gb", "activation_gb", "total_gb"})
      EXPECT_TRUE(st.contains(k)) << k;
    EXPECT_EQ(st["total_bytes"].get<std::int64_t>(),
              st["weight_bytes"].get<std::int64_t>() + st["gradient_bytes"].get<std::int64_t>() +
                  st["optimizer_bytes"].get<std::int64_t>() + st["activation_bytes"].get<std::int64_t>() +
                  st["other_bytes"].get<std::int64_t>());
    std::int64_t sum = 0;
    for (const auto& [name, bytes] : st["components"].items()) sum += bytes.get<std::int64_t>();
    EXPECT_EQ(sum, st["total_bytes"].get<std::int64_t>());
  }
  ASSERT_FALSE(j["fits"].empty());
  for (const auto& f : j["fits"])
    for (const char* k : {"hardware", "capacity_bytes", "usable_bytes", "fits", "headroom_bytes"})
      EXPECT_TRUE(f.contains(k)) << k;
  EXPECT_TRUE(j["assumptions"].is_array());
}

TEST(EstimateCli, TextReportFollowsTheSeedLayout) {
  auto r = run_mme({"estimate", "Qwen/Qwen3-8B", "--tp", "2", "--num-gpus", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"CONFIGURATION SUMMARY", "MEMORY ESTIMATION RESULTS", "Pipeline Stage 0:", "Parameters:",
                        "Memory Breakdown:", "- Weights + Gradients:", "- Weights + Gradients + Optimizer:",
                        "- Activations:", "- Total:", "Peak Memory per GPU:", "GiB"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  EXPECT_EQ(r.out.find("\033["), std::string::npos) << "no colour when stdout is not a terminal";
  EXPECT_EQ(r.out.find("Hybrid layers:"), std::string::npos);
}

// A hybrid model's report counts its one-block layers by kind (Nemotron 3 Nano's pattern: 23 M,
// 6 *, 23 E), in the text and the HTML picture.
TEST(EstimateCli, HybridModelsSayTheirLayerKinds) {
  auto r = run_mme({"estimate", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "--ep", "8", "--num-gpus", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr(
                         "\nHybrid layers: 23 Mamba (64 heads of 64, 8 groups of state 128), 6 attention, 23 MoE\n"));
}

TEST(EstimateCli, WarningsBeforeThePluginsLoadGoToStderrNotIntoTheJson) {
  // --megatron-args is read before the plugins load; its warnings must not land on stdout.
  const auto r = run_mme({"estimate", "--megatron-args",
                          "--num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 128 "
                          "--max-position-embeddings 128 --vocab-size 1000 --micro-batch-size 1 --enable-experimental",
                          "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out.substr(0, 200);
  EXPECT_NE(r.err.find("memory effect mme does not know, taken to have none: --enable-experimental"), std::string::npos)
      << r.err;
}

TEST(EstimateCli, GpuVerdictForOneProfile) {
  auto r = run_mme({"estimate", "Qwen/Qwen3-8B", "--num-gpus", "8", "--gpu", "h100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["fits"].size(), 1u);
  EXPECT_EQ(j["fits"][0]["hardware"], "H100-SXM-80GB");
  const auto f = j["fits"][0];
  EXPECT_EQ(f["fits"].get<bool>(), f["headroom_bytes"].get<std::int64_t>() >= 0);
}

TEST(EstimateCli, MegatronFlagsAsInput) {
  auto r = run_mme({"estimate", "--megatron-args",
                    "python pretrain_gpt.py --num-layers 12 --hidden-size 512 --num-attention-heads 8 "
                    "--seq-length 1024 --micro-batch-size 4 --global-batch-size 32 --bf16 "
                    "--use-distributed-optimizer --tensor-model-parallel-size 2",
                    "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["adapter"], "megatron_args");
  EXPECT_EQ(j["setup"]["tp"], 2);
  EXPECT_EQ(j["setup"]["dp"], 4);
  EXPECT_EQ(j["setup"]["sequence_parallel"], false);  // Megatron-LM's default
  EXPECT_EQ(j["setup"]["num_micro_batches"], 2);
  // Megatron's defaults: 50257 GPT-2 tokens padded to 128 x TP.
  EXPECT_EQ(j["model"]["padded_vocab_size"], 50432);
}

// --megatron-args takes the recompute flags as Megatron-LM does: full recompute names its method
// and layer count (transformer_config.py), selective takes neither (arguments.py,
// transformer_config.py), and --recompute-activations makes it selective whatever
// --recompute-granularity says (arguments.py). mme's own flags default them (docs/cli.md).
// (estimate_small_launch: an 8-layer launch line with `flags` added, as JSON.)
test::RunResult estimate_small_launch(const std::string& flags) {
  return run_mme({"estimate", "--megatron-args",
                  "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                  "--micro-batch-size 1 --global-batch-size 16 " +
                      flags,
                  "--num-gpus", "8", "--json"});
}

TEST(EstimateCli, MegatronArgsTakeTheRecomputeFlagsAsMegatronDoes) {
  // (The refused combinations are in MegatronArgsRefuseTheSettingsMegatronRefuses' table.)
  auto run = [](const std::string& extra) { return estimate_small_launch("--bf16 " + extra); };
  const auto full = run("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_EQ(nlohmann::json::parse(full.out)["setup"]["recompute_granularity"], "full");
  // --recompute-activations wins: selective, and then the full flags' method is refused.
  const auto activations = run("--recompute-activations --recompute-granularity full");
  ASSERT_EQ(activations.exit_code, 0) << activations.err;
  EXPECT_EQ(nlohmann::json::parse(activations.out)["setup"]["recompute_granularity"], "selective");
  EXPECT_NE(run("--recompute-activations --recompute-granularity full --recompute-method uniform "
                "--recompute-num-layers 1")
                .exit_code,
            0);
}

// arguments.py validate_args: one of --bf16 and --fp16, fp32 main gradients when
// --accumulate-allreduce-grads-in-fp32 asks for fp32 accumulation, and the prerequisites of the
// parameter all-gather overlapped with the optimizer step, the hierarchical sizes of a2a+p2p context
// parallelism, delayed weight gradients only with TE, saved activations distributed over TP only
// with full recompute and without SP (transformer_config.py too), the interleaved schedule without
// p2p overlap only over more than 2 stages; transformer_config.py: delayed weight gradients only
// with the expert-parallel overlap (the flags not modelled are named as assumptions, their
// prerequisites checked).
TEST(EstimateCli, MegatronArgsRefuseTheSettingsMegatronRefuses) {
  const std::pair<const char*, const char*> refused[] = {
      {"--bf16 --recompute-granularity full --recompute-num-layers 1",
       "--recompute-granularity full without --recompute-method"},
      {"--bf16 --recompute-granularity full --recompute-method uniform", "without --recompute-num-layers"},
      {"--bf16 --recompute-granularity selective --recompute-method uniform",
       "--recompute-method with selective recompute"},
      {"--bf16 --recompute-granularity selective --recompute-num-layers 2",
       "--recompute-num-layers with selective recompute"},
      {"--bf16 --fp16", "--bf16 and --fp16 together: Megatron-LM refuses it"},
      {"--bf16 --accumulate-allreduce-grads-in-fp32 --main-grads-dtype bf16", "--main-grads-dtype can only be fp32"},
      {"--bf16 --num-experts 8 --disable-bias-linear --delay-wgrad-compute",
       "--delay-wgrad-compute without --overlap-moe-expert-parallel-comm"},
      {"--bf16 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
       "--overlap-param-gather-with-optimizer-step",
       "needs the distributed optimizer, --overlap-param-gather and the interleaved schedule"},
      {"--bf16 --context-parallel-size 4 --cp-comm-type a2a+p2p",
       "--cp-comm-type a2a+p2p without --hierarchical-context-parallel-sizes"},
      {"--bf16 --context-parallel-size 4 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 4",
       "--hierarchical-context-parallel-sizes 2 4 multiply to 8, not the context parallel size 4"},
      {"--bf16 --transformer-impl local --delay-wgrad-compute",
       "--delay-wgrad-compute with --transformer-impl local: Megatron-LM refuses it"},
      {"--bf16 --distribute-saved-activations --recompute-granularity full --recompute-method uniform "
       "--recompute-num-layers 1",
       "--distribute-saved-activations needs --tensor-model-parallel-size > 1"},
      {"--bf16 --tensor-model-parallel-size 2 --distribute-saved-activations",
       "--distribute-saved-activations needs --tensor-model-parallel-size > 1 and --recompute-granularity full"},
      {"--bf16 --tensor-model-parallel-size 2 --sequence-parallel --distribute-saved-activations "
       "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
       "--distribute-saved-activations with --sequence-parallel: Megatron-LM refuses it"},
      {"--bf16 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
       "--no-overlap-p2p-communication",
       "--no-overlap-p2p-communication with virtual pipeline stages over --pipeline-model-parallel-size 2"},
      {"--bf16 --optimizer lion", "--optimizer lion: Megatron-LM's emerging optimizer lion is not modelled"},
      {"--bf16 --batch-size 4", "--batch-size: Megatron-LM refuses it (arguments.py: --batch-size is no longer valid"},
      {"--bf16 --checkpoint-activations", "--checkpoint-activations: Megatron-LM refuses it"},
      {"--bf16 --optimizer soap", "--optimizer soap: Megatron-LM's emerging optimizer soap is not modelled"}};
  for (const auto& [flags, why] : refused) {
    const auto r = estimate_small_launch(flags);
    EXPECT_EQ(r.exit_code, 2) << flags;
    EXPECT_NE(r.err.find(why), std::string::npos) << flags << ": " << r.err;
  }
  for (const char* flags : {"--bf16 --accumulate-allreduce-grads-in-fp32", "--bf16 --grad-reduce-in-bf16",
                            "--bf16 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
                            "--overlap-param-gather-with-optimizer-step --pipeline-model-parallel-size 2 "
                            "--num-virtual-stages-per-pipeline-rank 2",
                            "--bf16 --context-parallel-size 4 --cp-comm-type a2a+p2p "
                            "--hierarchical-context-parallel-sizes 2 2",
                            "--bf16 --tensor-model-parallel-size 2 --distribute-saved-activations "
                            "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
                            "--bf16 --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                            "--no-overlap-p2p-communication",
                            "--bf16 --pipeline-model-parallel-size 2 --no-overlap-p2p-communication"}) {
    const auto r = estimate_small_launch(flags);
    EXPECT_EQ(r.exit_code, 0) << flags << ": " << r.err;
  }
}

// arguments.py validate_args: the deprecated --optimizer dist_muon is Muon with the layer-wise
// distributed optimizer, the run `--optimizer muon --use-distributed-optimizer` describes: the same
// setup and the same bytes, which differ from Muon without the distributed optimizer.
TEST(EstimateCli, MegatronArgsReadDistMuonAsMuonWithTheDistributedOptimizer) {
  const auto dist = estimate_small_launch("--bf16 --optimizer dist_muon");
  const auto muon = estimate_small_launch("--bf16 --optimizer muon --use-distributed-optimizer");
  const auto plain = estimate_small_launch("--bf16 --optimizer muon");
  for (const auto* r : {&dist, &muon, &plain}) ASSERT_EQ(r->exit_code, 0) << r->err;
  const auto d = nlohmann::json::parse(dist.out), m = nlohmann::json::parse(muon.out),
             p = nlohmann::json::parse(plain.out);
  EXPECT_EQ(d["setup"]["optimizer"], "muon");
  EXPECT_EQ(d["setup"]["distributed_optimizer"], true);
  EXPECT_EQ(p["setup"]["distributed_optimizer"], false);
  EXPECT_EQ(d["stages"][0]["optimizer_bytes"], m["stages"][0]["optimizer_bytes"]);
  EXPECT_EQ(d["peak"], m["peak"]);
  EXPECT_NE(d["stages"][0]["optimizer_bytes"], p["stages"][0]["optimizer_bytes"]);
}

// Two launch-line readings of arguments.py and transformer_config.py: layers per virtual stage
// count the embedding and the loss as a layer each under --account-for-*-in-pipeline-split
// ((30 + 2) / 4 ranks = 8 a rank, 4 a virtual stage: VPP 2, the same run as
// --num-virtual-stages-per-pipeline-rank 2); a negative --moe-expert-capacity-factor is no
// capacity factor (dropless).
TEST(EstimateCli, MegatronArgsReadVirtualStagesAndCapacityAsMegatronDoes) {
  const std::string base =
      "--num-layers 30 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 --micro-batch-size 1 "
      "--global-batch-size 64 --bf16 --pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split "
      "--account-for-loss-in-pipeline-split ";
  const auto per_stage = run_mme(
      {"estimate", "--megatron-args", base + "--num-layers-per-virtual-pipeline-stage 4", "--num-gpus", "4", "--json"});
  const auto count = run_mme(
      {"estimate", "--megatron-args", base + "--num-virtual-stages-per-pipeline-rank 2", "--num-gpus", "4", "--json"});
  ASSERT_EQ(per_stage.exit_code, 0) << per_stage.err;
  ASSERT_EQ(count.exit_code, 0) << count.err;
  EXPECT_EQ(nlohmann::json::parse(per_stage.out)["stages"], nlohmann::json::parse(count.out)["stages"]);

  const std::string moe =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 --micro-batch-size 1 --bf16 "
      "--num-experts 8 --moe-router-topk 2 ";
  const auto negative =
      run_mme({"estimate", "--megatron-args", moe + "--moe-expert-capacity-factor -1", "--num-gpus", "8", "--json"});
  const auto dropless = run_mme({"estimate", "--megatron-args", moe, "--num-gpus", "8", "--json"});
  ASSERT_EQ(negative.exit_code, 0) << negative.err;
  ASSERT_EQ(dropless.exit_code, 0) << dropless.err;
  const auto jn = nlohmann::json::parse(negative.out), jd = nlohmann::json::parse(dropless.out);
  EXPECT_TRUE(jn["setup"]["moe_capacity_factor"].is_null());
  EXPECT_EQ(jn["stages"], jd["stages"]);
  EXPECT_EQ(
      run_mme({"estimate", "--megatron-args", moe + "--moe-expert-capacity-factor 1.5", "--num-gpus", "8"}).exit_code,
      0);
}

// --tp-comm-overlap with the local implementation: Megatron-LM asks only for sequence
// parallelism (arguments.py) and initialize.py creates TE's userbuffers all the same; the local
// linears never use them. The upper bound takes them: 4096 tokens x 4096 hidden x (8 all-gather
// buffers x 2 B + 4 reduce-scatter buffers x 2 B) = 402,653,184 B (communication_buffers.cpp
// userbuffer_bytes); the point estimate is the NCCL path's either way.
TEST(EstimateCli, TpCommOverlapWithTheLocalImplementationKeepsUnusedUserbuffers) {
  auto stage = [](bool overlap) {
    std::vector<std::string> args{"estimate", "Qwen/Qwen3-8B",      "--tp",  "2",     "--num-gpus",
                                  "2",        "--transformer-impl", "local", "--json"};
    if (overlap) args.push_back("--tp-comm-overlap");
    const auto r = run_mme(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  };
  const auto off = stage(false), on = stage(true);
  ASSERT_TRUE(on.contains("stages") && off.contains("stages"));
  EXPECT_EQ(on["stages"][0]["total_bytes"], off["stages"][0]["total_bytes"]);
  EXPECT_EQ(on["stages"][0]["upper_bytes"].get<std::int64_t>() - off["stages"][0]["upper_bytes"].get<std::int64_t>(),
            402'653'184);
  EXPECT_NE(on.dump().find("--tp-comm-overlap with --transformer-impl local"), std::string::npos);
}

// The dataloader's attention mask: Megatron-LM creates it unless told not to
// (--no-create-attention-mask-in-dataloader), mme's own flags only when asked. Under core_attn
// recompute the checkpoints keep one bool [1, 1, 8192, 8192] (64 MiB) per micro-batch in flight:
// 2 on the first of 2 stages, 1 on the last.
TEST(EstimateCli, TheDataloaderAttentionMaskFollowsMegatronsDefaultOnLaunchLines) {
  const std::string line =
      "--num-layers 8 --hidden-size 1024 --num-attention-heads 8 --seq-length 8192 --max-position-embeddings 8192 "
      "--micro-batch-size 1 --global-batch-size 16 --bf16 --pipeline-model-parallel-size 2 --recompute-activations ";
  auto masks = [](const test::RunResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::int64_t> out;
    if (r.exit_code != 0) return out;
    const auto j = nlohmann::json::parse(r.out);
    for (const auto& st : j["stages"]) {
      const auto& c = st["components"];
      out.push_back(c.value("activations/embedding/dataloader_attention_mask", std::int64_t{0}) +
                    c.value("activations/dataloader_attention_mask", std::int64_t{0}));
    }
    return out;
  };
  const std::int64_t mask = std::int64_t{8192} * 8192;
  EXPECT_EQ(masks(run_mme({"estimate", "--megatron-args", line, "--num-gpus", "2", "--json"})),
            (std::vector<std::int64_t>{2 * mask, mask}));
  EXPECT_EQ(masks(run_mme({"estimate", "--megatron-args", line + "--no-create-attention-mask-in-dataloader",
                           "--num-gpus", "2", "--json"})),
            (std::vector<std::int64_t>{0, 0}));
  const std::vector<std::string> own{"estimate",
                                     "Qwen/Qwen3-0.6B",
                                     "--pp",
                                     "2",
                                     "--num-gpus",
                                     "2",
                                     "--seq-length",
                                     "8192",
                                     "--micro-batch-size",
                                     "1",
                                     "--global-batch-size",
                                     "16",
                                     "--recompute-granularity",
                                     "selective",
                                     "--json"};
  EXPECT_EQ(masks(run_mme(own)), (std::vector<std::int64_t>{0, 0}));
  auto asked = own;
  asked.push_back("--create-attention-mask-in-dataloader");
  EXPECT_EQ(masks(run_mme(asked)), (std::vector<std::int64_t>{2 * mask, mask}));
}

// recompute.py's block loop checkpoints the first --recompute-num-layers layers of a chunk: with 0
// it checkpoints none, so the run stores what a run without recompute stores (launchers write
// "full block 0" to switch recompute off). Its uniform loop would never advance with 0: refused.
TEST(EstimateCli, FullBlockRecomputeOfZeroLayersRecomputesNothing) {
  const std::string base =
      "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --micro-batch-size 2 "
      "--global-batch-size 16 --bf16 --use-distributed-optimizer --pipeline-model-parallel-size 2 ";
  const auto none = run_mme({"estimate", "--megatron-args", base, "--num-gpus", "8", "--json"});
  const auto zero = run_mme({"estimate", "--megatron-args",
                             base + "--recompute-granularity full --recompute-method block --recompute-num-layers 0",
                             "--num-gpus", "8", "--json"});
  const auto one = run_mme({"estimate", "--megatron-args",
                            base + "--recompute-granularity full --recompute-method block --recompute-num-layers 1",
                            "--num-gpus", "8", "--json"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  ASSERT_EQ(zero.exit_code, 0) << zero.err;
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto jn = nlohmann::json::parse(none.out), jz = nlohmann::json::parse(zero.out),
             j1 = nlohmann::json::parse(one.out);
  for (std::size_t st = 0; st < 2; ++st) {
    EXPECT_EQ(jz["stages"][st]["activation_bytes"], jn["stages"][st]["activation_bytes"]) << st;
    EXPECT_EQ(jz["stages"][st]["total_bytes"], jn["stages"][st]["total_bytes"]) << st;
    EXPECT_LT(j1["stages"][st]["activation_bytes"], jn["stages"][st]["activation_bytes"]) << st;
  }
  const auto uniform = run_mme({"estimate", "--megatron-args",
                                base + "--recompute-granularity full --recompute-method uniform "
                                       "--recompute-num-layers 0",
                                "--num-gpus", "8"});
  EXPECT_EQ(uniform.exit_code, 4);
  EXPECT_NE(uniform.err.find("--recompute-method block"), std::string::npos) << uniform.err;
}

// --breakdown: each stage's memory as a tree (category, block, term; each node the sum of its
// leaves) and its modules: the runs of layers of one kind per chunk with the parameters and
// activations of layer_kinds x the run's length, MTP on the last stage. The figures are the
// JSON document's.
TEST(EstimateCli, BreakdownTreePerStage) {
  const std::vector<std::string> args = {"estimate",
                                         "deepseek-ai/DeepSeek-V3",
                                         "--tp",
                                         "4",
                                         "--pp",
                                         "4",
                                         "--ep",
                                         "8",
                                         "--num-gpus",
                                         "128",
                                         "--num-layers-in-last-pipeline-stage",
                                         "16"};
  auto with = [&](const char* flag) {
    auto a = args;
    a.push_back(flag);
    return a;
  };
  const auto text = run_mme(with("--breakdown"));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const auto json = run_mme(with("--json"));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  // The report comes first, unchanged.
  const auto plain = run_mme(args);
  EXPECT_EQ(text.out.rfind(plain.out, 0), 0u);
  const std::string tree = text.out.substr(plain.out.size());
  auto line_with = [&](const std::string& label, std::int64_t bytes) {
    return fmt::format("{:<60} {:>12}\n", label, format_bytes(bytes));
  };
  // DeepSeek-V3: 3 dense layers (first_k_dense_replace), then MoE; one MTP layer.
  const auto& kinds = j["layer_kinds"];
  ASSERT_EQ(kinds.size(), 3u);
  ASSERT_EQ(kinds[0]["mlp"], "dense");
  ASSERT_EQ(kinds[0]["layers"], 3);
  ASSERT_EQ(kinds[1]["mlp"], "moe");
  ASSERT_EQ(kinds[2]["mtp"], true);
  auto run_line = [&](const std::string& what, const nlohmann::json& k, std::int64_t n) {
    const std::int64_t p = k["parameters"], a = k["activation_bytes_per_microbatch"];
    return fmt::format("{}: {} x {} + {}, {} parameters, {} activations ({} and {} per layer)\n", what, n,
                       k["attention"].get<std::string>(), k["mlp"].get<std::string>(), format_count(p * n),
                       format_bytes(a * n), format_count(p), format_bytes(a));
  };
  std::size_t from = 0;
  for (const auto& st : j["stages"]) {
    const std::int64_t rank = st["pp_rank"];
    SCOPED_TRACE(rank);
    const std::string head = fmt::format("\nPipeline Stage {}: {} peak", rank, format_bytes(st["total_bytes"]));
    const std::size_t at = tree.find(head, from);
    ASSERT_NE(at, std::string::npos) << tree;
    const std::size_t end = tree.find("\nPipeline Stage ", at + 1);
    const std::string block = tree.substr(at, end == std::string::npos ? std::string::npos : end - at);
    from = at + 1;
    // The category sums are the stage's own figures.
    EXPECT_NE(block.find(line_with("  ├─ weights", st["weight_bytes"])), std::string::npos) << block;
    EXPECT_NE(block.find(line_with("  ├─ gradients", st["gradient_bytes"])), std::string::npos) << block;
    EXPECT_NE(block.find(line_with("  ├─ optimizer", st["optimizer_bytes"])), std::string::npos) << block;
    EXPECT_NE(block.find(line_with("  ├─ activations", st["activation_bytes"])), std::string::npos) << block;
    EXPECT_NE(block.find(line_with("  └─ other", st["other_bytes"])), std::string::npos) << block;
    // A block's sum and one of its terms.
    std::int64_t attention = 0;
    for (const auto& [name, bytes] : st["components"].items())
      if (name.rfind("activations/attention/", 0) == 0) attention += bytes.get<std::int64_t>();
    EXPECT_NE(block.find(line_with("  │  ├─ attention", attention)), std::string::npos) << block;
    EXPECT_NE(block.find(line_with("  │  │  ├─ kv", st["components"]["activations/attention/kv"])), std::string::npos)
        << block;
    // The modules: the chunk, its runs of layers, the chunk's activations.
    const auto& ch = st["chunks"][0];
    const std::int64_t first = ch["first_layer"], n = ch["num_layers"], last = first + n - 1;
    EXPECT_NE(block.find(fmt::format("  └─ chunk 0: layers {}-{}, {} micro-batch(es) in flight\n", first, last,
                                     ch["inflight_microbatches"].get<std::int64_t>())),
              std::string::npos)
        << block;
    if (first < 3) {
      EXPECT_NE(block.find(run_line(fmt::format("layers {}-2", first), kinds[0], 3 - first)), std::string::npos)
          << block;
      EXPECT_NE(block.find(run_line(fmt::format("layers 3-{}", last), kinds[1], last - 2)), std::string::npos) << block;
    } else {
      EXPECT_NE(block.find(run_line(fmt::format("layers {}-{}", first, last), kinds[1], n)), std::string::npos)
          << block;
    }
    EXPECT_EQ(block.find("MTP: ") != std::string::npos, st["mtp_layers"] == 1) << block;
    if (st["mtp_layers"] == 1) {
      EXPECT_NE(block.find(run_line("MTP", kinds[2], 1)), std::string::npos) << block;
    }
    EXPECT_EQ(block.find("embedding (word embedding") != std::string::npos, ch["embedding"].get<bool>()) << block;
    EXPECT_EQ(block.find("output layer and loss") != std::string::npos, ch["loss"].get<bool>()) << block;
    EXPECT_NE(block.find(fmt::format("└─ activations of the chunk: {} per micro-batch\n",
                                     format_bytes(ch["activation_bytes_per_microbatch"]))),
              std::string::npos)
        << block;
  }
  const auto both = run_mme({"estimate", "Qwen/Qwen3-8B", "--breakdown", "--json"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_EQ(both.out, "");
}

// `mme compare`: every combination of the lists, each row what `mme estimate` says for its flags
// (peak stage, peak, bound, the fit on --gpu); a refused layout is a row with the reason.
TEST(EstimateCli, CompareRowsAreWhatEstimateSays) {
  const auto r = run_mme({"compare", "Qwen/Qwen3-8B", "--tp", "1,2,3", "--pp=1,2", "--gpu", "H100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["layouts"].size(), 6u);
  std::size_t i = 0;
  for (const char* tp : {"1", "2", "3"})
    for (const char* pp : {"1", "2"}) {
      const auto& row = j["layouts"][i++];
      SCOPED_TRACE(row.dump().substr(0, 200));
      EXPECT_EQ(row["varied"], nlohmann::json({"--tp", tp, "--pp", pp}));
      const auto e = run_mme({"estimate", "Qwen/Qwen3-8B", "--tp", tp, "--pp", pp, "--gpu", "H100", "--json"});
      if (std::string(tp) == "3") {
        EXPECT_EQ(e.exit_code, 4);
        EXPECT_NE(row["error"].get<std::string>().find("--tp must be one of 1, 2, 4, 8, 16 or 32"), std::string::npos);
        continue;
      }
      ASSERT_EQ(e.exit_code, 0) << e.err;
      const auto est = nlohmann::json::parse(e.out);
      const auto& peak = est["stages"][est["peak"]["pp_rank"].get<std::size_t>()];
      EXPECT_TRUE(row["error"].is_null());
      EXPECT_EQ(row["peak_bytes"], est["peak"]["total_bytes"]);
      EXPECT_EQ(row["upper_bytes"], est["peak"]["upper_bytes"]);
      EXPECT_EQ(row["peak_pp_rank"], est["peak"]["pp_rank"]);
      for (const char* k : {"weight_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes", "other_bytes"})
        EXPECT_EQ(row[k], peak[k]) << k;
      EXPECT_EQ(row["num_gpus"], est["setup"]["num_gpus"]);
      ASSERT_EQ(row["fits"].size(), 1u);
      EXPECT_EQ(row["fits"][0]["fits"], est["fits"][0]["fits"]);
      EXPECT_EQ(row["fits"][0]["headroom_bytes"], est["fits"][0]["headroom_bytes"]);
    }
  // The text: one row per layout, its figures in GiB.
  const auto text = run_mme({"compare", "Qwen/Qwen3-8B", "--tp", "1,2,3", "--pp=1,2", "--gpu", "H100"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const auto& two = j["layouts"][3];  // --tp 2 --pp 2
  const double gib = 1024.0 * 1024.0 * 1024.0;
  EXPECT_NE(
      text.out.find(fmt::format("\n--tp 2 --pp 2 {:>6} {:>5} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f}  ✓ ",
                                8, two["peak_pp_rank"].get<int>(),
                                (two["weight_bytes"].get<double>() + two["gradient_bytes"].get<double>()) / gib,
                                two["optimizer_bytes"].get<double>() / gib, two["activation_bytes"].get<double>() / gib,
                                two["other_bytes"].get<double>() / gib, two["peak_bytes"].get<double>() / gib,
                                two["upper_bytes"].get<double>() / gib)),
      std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("\n--tp 3 --pp 1 refused: "), std::string::npos) << text.out;
  // Nothing valid: the layout error's exit code; too many layouts, an empty item: usage errors.
  const auto none = run_mme({"compare", "Qwen/Qwen3-8B", "--tp", "3,5"});
  EXPECT_EQ(none.exit_code, 4);
  EXPECT_EQ(none.out, "");
  EXPECT_NE(none.err.find("none of the 2 layouts is valid"), std::string::npos) << none.err;
  const auto many = run_mme({"compare", "Qwen/Qwen3-8B", "--tp", "1,2,4,8", "--pp", "1,2,3,4", "--cp", "1,2,4,8,16"});
  EXPECT_EQ(many.exit_code, 2);
  EXPECT_NE(many.err.find("more than 64 layouts"), std::string::npos) << many.err;
  const auto empty = run_mme({"compare", "Qwen/Qwen3-8B", "--tp", "1,,2"});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("--tp: an empty value in the list '1,,2'"), std::string::npos) << empty.err;
}

TEST(EstimateCli, MegatronFlagsFromAFileWithCommentsAndContinuations) {
  test::TempDir dir;
  // A bare argument file (flags over several lines) and an array handed to the entry script.
  const std::string flags =
      "--num-layers 4 \\\n  --hidden-size 256  # width\n"
      "  --num-attention-heads 4\n  --swiglu --normalization RMSNorm\n";
  test::write_file(dir.path() / "args.txt", "# model\n" + flags);
  test::write_file(dir.path() / "launch.sh",
                   "#!/bin/bash\n# model\nGPT_ARGS=(\n" + flags + ")\npython pretrain_gpt.py \"${GPT_ARGS[@]}\"\n");
  for (const char* file : {"args.txt", "launch.sh"}) {
    auto r = run_mme({"estimate", "--megatron-args-file", (dir.path() / file).string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << file << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["model"]["num_layers"], 4);
    EXPECT_EQ(j["model"]["hidden_size"], 256);
  }
  // An array nothing launches is no run.
  test::write_file(dir.path() / "array.sh", "GPT_ARGS=(\n" + flags + ")\n");
  const auto none = run_mme({"estimate", "--megatron-args-file", (dir.path() / "array.sh").string()});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, ::testing::HasSubstr("no command launches a Megatron-LM entry script"));
}

struct BadLayout {
  const char* name;
  std::vector<std::string> args;
  const char* expect;  // part of the one stderr line
};

// GoogleTest prints a parameter with this instead of its bytes (pointers included), which CTest
// would put into the test's name.
void PrintTo(const BadLayout& c, std::ostream* os) { *os << c.name; }

class EstimateInvalidLayout : public ::testing::TestWithParam<BadLayout> {};

TEST_P(EstimateInvalidLayout, OneLineOnStderrNothingOnStdout) {
  const BadLayout& c = GetParam();
  std::vector<std::string> args{"estimate", "Qwen/Qwen3-8B"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  for (bool json : {false, true}) {
    auto a = args;
    if (json) a.push_back("--json");
    auto r = run_mme(a);
    EXPECT_EQ(r.exit_code, 4) << c.name << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.name;
    EXPECT_EQ(count_lines(r.err), 1) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos);
  }
}

// Qwen3-8B: 36 layers, 32 heads, 8 KV heads, 151936 vocab.
INSTANTIATE_TEST_SUITE_P(
    Validation, EstimateInvalidLayout,
    ::testing::Values(
        BadLayout{"heads_by_tp", {"--tp", "3", "--num-gpus", "3"}, "32 attention heads are not divisible by --tp 3"},
        BadLayout{"world_by_tp_pp_cp",
                  {"--tp", "2", "--pp", "2", "--num-gpus", "6"},
                  "--num-gpus 6 is not divisible by TP x PP x CP = 2 x 2 x 1 = 4"},
        BadLayout{"layers_by_pp", {"--pp", "5", "--num-gpus", "5"}, "--num-layers-in-last-pipeline-stage"},
        BadLayout{"more_stages_than_layers", {"--pp", "37", "--num-gpus", "37"}, "more pipeline stages than"},
        BadLayout{"seq_by_cp", {"--cp", "2", "--num-gpus", "2", "--seq-length", "4098"}, "2 x CP"},
        BadLayout{"experts_on_dense", {"--ep", "2", "--num-gpus", "2"}, "needs a mixture-of-experts model"},
        BadLayout{"global_batch",
                  {"--num-gpus", "8", "--global-batch-size", "12"},
                  "--global-batch-size 12 is not divisible"},
        BadLayout{"first_last_overflow",
                  {"--pp", "2", "--num-gpus", "2", "--num-layers-in-first-pipeline-stage", "30",
                   "--num-layers-in-last-pipeline-stage", "30"},
                  "take more layers"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// Qwen3-8B (32 heads, 8 KV heads) at TP 16: Megatron-LM takes a TP that is a multiple of the
// query groups (transformer_config.py) and gives each rank one group's K and V and 32 / 16 query
// heads (attention.py, SelfAttention). Against TP 8 (also one group a rank) the saved K and V are
// the same bytes and Q half of them, through the whole engine.
TEST(EstimateCli, MoreTensorParallelRanksThanQueryGroupsKeepOneGroupEach) {
  auto components = [](const char* tp) {
    const auto r = run_mme({"estimate", "Qwen/Qwen3-8B", "--tp", tp, "--num-gpus", tp, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["stages"][0]["components"] : nlohmann::json::object();
  };
  const auto tp8 = components("8"), tp16 = components("16");
  ASSERT_TRUE(tp8.contains("activations/attention/kv") && tp16.contains("activations/attention/q"));
  // 36 layers x 2 x 4096 tokens x 128 x 2 B, one group either way.
  EXPECT_EQ(tp8["activations/attention/kv"], 36 * 2 * 4096 * 128 * 2);
  EXPECT_EQ(tp16["activations/attention/kv"], tp8["activations/attention/kv"]);
  // 36 layers x 4096 tokens x 2 heads x 128 x 2 B at TP 16, 4 heads at TP 8.
  EXPECT_EQ(tp16["activations/attention/q"], 36 * 4096 * 2 * 128 * 2);
  EXPECT_EQ(tp8["activations/attention/q"], 36 * 4096 * 4 * 128 * 2);
}

TEST(EstimateCli, UsageErrorsExitTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"estimate", "Qwen/Qwen3-8B", "--tp", "zero"},
           {"estimate", "Qwen/Qwen3-8B", "--tp", "0"},
           {"estimate", "Qwen/Qwen3-8B", "--tp", "-2"},
           {"estimate", "Qwen/Qwen3-8B", "--no-such-flag"},
           {"estimate", "Qwen/Qwen3-8B", "--gpu", "Z9000"},
           {"estimate"},
       }) {
    auto r = run_mme(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
    EXPECT_TRUE(r.out.empty());
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
  }
}

}  // namespace
}  // namespace mme

namespace mme {
namespace {

const std::string kTinyLaunch =
    "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 "
    "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --vocab-size 1000 --tokenizer-type "
    "NullTokenizer --bf16 ";

// The flags of a launch line that are neither settings nor the model's: those whose memory
// effect mme does not know in one warning (also in the JSON `warnings`), those mme does not model
// in the assumptions, the ones without a memory effect nowhere (issue 15: they used to vanish
// silently, all alike); a flag Megatron-LM's parser lacks is an error (issue 30).
TEST(EstimateCli, MegatronFlagsMmeDoesNotKnowAreOneWarning) {
  const auto r =
      run_mme({"estimate", "--megatron-args",
               kTinyLaunch + "--lr 3e-4 --save /ckpt --log-interval 10 --enable-experimental --tp-comm-overlap-cfg "
                             "ub.yaml --lazy-mpu-init",
               "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "mme: warning: --megatron-args: 2 Megatron-LM flags whose memory effect mme does not know, taken to have "
            "none: --enable-experimental, --lazy-mpu-init\n");
  const auto made_up = run_mme({"estimate", "--megatron-args", kTinyLaunch + "--made-up-flag 3"});
  EXPECT_EQ(made_up.exit_code, 2);
  EXPECT_THAT(made_up.err, ::testing::HasSubstr("--made-up-flag"));
  const auto j = nlohmann::json::parse(r.out);
  bool named = false;
  for (const auto& a : j["assumptions"]) {
    const std::string text = a.get<std::string>();
    named = named || text.rfind("--tp-comm-overlap-cfg is not modelled", 0) == 0;
    EXPECT_EQ(text.find("--lr"), std::string::npos) << text;
  }
  EXPECT_TRUE(named) << j["assumptions"].dump();
  // A launch line of known flags only: no warning at all.
  const auto clean = run_mme({"estimate", "--megatron-args", kTinyLaunch + "--lr 3e-4 --train-iters 10", "--json"});
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_EQ(clean.err, "");
}

// A flag mme does not model, at the value where Megatron-LM's feature is off (its default:
// softmax_type "vanilla", mlp_chunks_for_training 1, glu_linear_offset 0.0, patch_dim 16,
// moe_dispatch_fwd_dtype "bf16", inference_max_seq_length 2560), has no memory effect: no
// assumption and no warning, a number equal as a number (0.0 for 0). At another value each is
// named, --inference-max-seq-length by its own entry ahead of the inference- prefix's.
TEST(EstimateCli, NotModelledFlagsAtTheirNeutralValueAreSilent) {
  auto named = [](const std::string& extra) {
    const auto r = run_mme({"estimate", "--megatron-args", kTinyLaunch + extra, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "") << extra;
    const auto j = nlohmann::json::parse(r.out);
    std::set<std::string> flags;
    for (const auto& a : j["assumptions"]) {
      const std::string text = a.get<std::string>();
      if (const auto at = text.find(" is not modelled"); at != std::string::npos) flags.insert(text.substr(0, at));
    }
    return flags;
  };
  EXPECT_EQ(named("--mlp-chunks-for-training 1 --num-channels 3 --patch-dim 16 "
                  "--moe-dispatch-fwd-dtype bf16 --inference-max-seq-length 2560"),
            std::set<std::string>{});
  EXPECT_EQ(named("--mlp-chunks-for-training 2 --num-channels 4 --patch-dim 14 "
                  "--moe-dispatch-fwd-dtype mxfp8 --inference-max-seq-length 4096"),
            (std::set<std::string>{"--mlp-chunks-for-training", "--num-channels", "--patch-dim",
                                   "--moe-dispatch-fwd-dtype", "--inference-max-seq-length"}));
  // A flag without a neutral value (Megatron-LM's default None) is named at any value.
  EXPECT_EQ(named("--moe-input-jitter-eps 0"), std::set<std::string>{"--moe-input-jitter-eps"});
}

// --megatron-args with an FP8 recipe (issue 16): accepted, no longer listed as not modelled, and
// the estimate moves by what the recipe's tensors take (docs/memory-model.md, "Low-precision
// recipes"). kTinyLaunch: 4 layers, h 256, 8 heads, FFN 4h = 1024 (GELU), T = 1024 tokens, DP 8.
TEST(EstimateCli, MegatronFp8RecipeIsModelled) {
  auto estimate = [](const std::string& extra) {
    const auto r = run_mme({"estimate", "--megatron-args", kTinyLaunch + "--fp8-format hybrid " + extra, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    return nlohmann::json::parse(r.out);
  };
  const auto delayed = estimate("");
  const auto blockwise = estimate("--fp8-recipe blockwise");
  EXPECT_EQ(blockwise["setup"]["fp8_recipe"], "blockwise");
  EXPECT_EQ(blockwise["setup"]["fp8_format"], "hybrid");
  EXPECT_EQ(delayed["setup"]["fp8_recipe"], "delayed");  // Megatron-LM's default
  for (const auto& a : blockwise["assumptions"])
    EXPECT_EQ(a.get<std::string>().find("not modelled"), std::string::npos) << a;
  // Per layer, the four saved GEMM inputs [1024, K] (K = 256 for qkv, proj, fc1; 1024 for fc2)
  // carry fp32 1x128 scales [ceil(1024 / 128), round_up(K, 4)]: 4 x 8 x (3 x 256 + 1024) = 57,344
  // B, against one 4-byte scale_inv each under delayed scaling: 4 x (57,344 - 16) = 229,312 B.
  // The weight cache adds the 128x128 block scales of its two copies, 8 B per 16384 of the
  // 4 x 12 x 256^2 GEMM weights: 1,536 B; delayed scaling's state goes: 16 GEMMs x 5 x 4 B x 2.
  const std::int64_t expected = 229312 + 1536 - 16 * 5 * 4 * 2;
  EXPECT_EQ(blockwise["stages"][0]["forward_backward_bytes"].get<std::int64_t>() -
                delayed["stages"][0]["forward_backward_bytes"].get<std::int64_t>(),
            expected);
  EXPECT_FALSE(blockwise["stages"][0]["components"].contains("other/fp8_scaling_state"));
  EXPECT_EQ(delayed["stages"][0]["components"]["other/fp8_scaling_state"], 640);
}

// An unknown value of a known flag: exit 2 (a flag) or 3 (a spec field), naming the flag and
// the values it takes, on every path.
TEST(EstimateCli, UnknownValuesOfKnownFlagsNameTheFlagAndTheValues) {
  const auto flag = run_mme({"estimate", "Qwen/Qwen3-8B", "--main-grads-dtype", "fp64"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_EQ(flag.err, "mme: error: --main-grads-dtype: unknown value 'fp64' (fp32, bf16, fp16)\n");
  const auto megatron = run_mme({"estimate", "--megatron-args", kTinyLaunch + "--exp-avg-dtype fp64"});
  EXPECT_EQ(megatron.exit_code, 2);
  EXPECT_EQ(megatron.err, "mme: error: --exp-avg-dtype: unknown value 'fp64' (fp32, fp16, bf16, fp8)\n");
  const auto modules = run_mme({"estimate", "--megatron-args", kTinyLaunch + "--recompute-modules attn"});
  EXPECT_EQ(modules.exit_code, 2);
  EXPECT_NE(modules.err.find("--recompute-modules: unknown recompute module 'attn'"), std::string::npos) << modules.err;
  const auto fp8 = run_mme({"estimate", "--megatron-args", kTinyLaunch + "--fp8-format e5m2"});
  EXPECT_EQ(fp8.exit_code, 2);
  EXPECT_EQ(fp8.err, "mme: error: --fp8-format: unknown value 'e5m2' (e4m3, hybrid)\n");
  test::TempDir dir;
  test::write_file(dir.path() / "s.yaml", "training:\n  moe_token_dispatcher_type: deepep\n");
  const auto spec = run_mme({"estimate", "Qwen/Qwen3-8B", "--config", (dir.path() / "s.yaml").string()});
  EXPECT_EQ(spec.exit_code, 3);
  EXPECT_NE(spec.err.find("s.yaml:2: training.moe_token_dispatcher_type: expected alltoall, allgather or flex, got "
                          "\"deepep\""),
            std::string::npos)
      << spec.err;
}

// --dump-config keeps every knob: the Megatron-LM switches without a spec field before (the
// softmax, wgrad deferral, determinism) now read back into the same estimate. (The wgrad
// deferral needs gradient accumulation fusion: model_parallel_config.py.)
TEST(EstimateCli, DumpConfigKeepsEveryKnob) {
  const std::string launch = kTinyLaunch +
                             "--pipeline-model-parallel-size 2 --transformer-impl local --no-masked-softmax-fusion "
                             "--apply-query-key-layer-scaling --defer-embedding-wgrad-compute --wgrad-deferral-limit 2 "
                             "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te --deterministic-mode "
                             "--use-distributed-optimizer";
  const auto direct = run_mme({"estimate", "--megatron-args", launch, "--json"});
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  const auto dumped = run_mme({"estimate", "--megatron-args", launch, "--dump-config"});
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  test::TempDir dir;
  test::write_file(dir.path() / "run.yaml", dumped.out);
  const auto again = run_mme({"estimate", "--config", (dir.path() / "run.yaml").string(), "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto a = nlohmann::json::parse(direct.out), b = nlohmann::json::parse(again.out);
  EXPECT_EQ(a["setup"], b["setup"]);
  EXPECT_EQ(a["stages"], b["stages"]);
}

}  // namespace
}  // namespace mme
