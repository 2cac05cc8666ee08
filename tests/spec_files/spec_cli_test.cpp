// Spec files end to end through the built `mme`: estimate --config equals the equivalent flags
// (mme init templates, --dump-config output, hand-written specs against Megatron-LM flags),
// command-line flags override the file, and bad specs fail with exact messages and exit codes.
#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

using test::run_mme;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

nlohmann::json json_of(const test::RunResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return nlohmann::json::object();
  return nlohmann::json::parse(r.out);
}

// An estimate without what only says where the model came from.
nlohmann::json comparable(nlohmann::json j) {
  for (const char* k : {"name", "source", "adapter", "family", "model_type"}) j["model"].erase(k);
  j.erase("warnings");
  return j;
}

std::string write(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const auto path = dir.path() / name;
  test::write_file(path, text);
  return path.string();
}

struct Case {
  std::string model;
  std::vector<std::string> flags;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"Qwen/Qwen3-8B", {"--tp", "2", "--pp", "2", "--num-gpus", "8"}},
      {"deepseek-ai/DeepSeek-V3",
       {"--tp", "4", "--pp", "4", "--ep", "4", "--num-gpus", "128", "--num-layers-in-last-pipeline-stage", "16"}},
      {"mistralai/Mixtral-8x7B-v0.1",
       {"--tp", "2", "--ep", "4", "--num-gpus", "16", "--recompute-granularity", "full", "--recompute-method", "block",
        "--recompute-num-layers", "2", "--global-batch-size", "64"}},
      {"deepseek-ai/DeepSeek-V2-Lite",
       {"--ep", "8", "--num-gpus", "8", "--recompute-granularity", "selective", "--recompute-modules",
        "core_attn,mla_up_proj", "--seq-length", "8192"}},
      {"meta-llama/Meta-Llama-3-70B",
       {"--tp", "8", "--pp", "4", "--vpp", "5", "--num-gpus", "64", "--precision", "fp8", "--micro-batch-size", "2"}},
      {"Qwen/Qwen2-57B-A14B",
       {"--tp", "2", "--ep", "2", "--etp", "1", "--num-gpus", "8", "--use-precision-aware-optimizer", "--exp-avg-dtype",
        "bf16", "--exp-avg-sq-dtype", "bf16", "--moe-capacity-factor", "1.25", "--gpu", "H200"}},
      {"google/gemma-2-9b-it", {"--tp", "2", "--cp", "2", "--num-gpus", "8", "--cross-entropy-loss-fusion"}},
      {"Qwen/Qwen2.5-7B",
       {"--pp", "2", "--num-gpus", "4", "--no-distributed-optimizer", "--attention-backend", "unfused",
        "--hidden-dropout", "0.1", "--num-layers-per-virtual-pipeline-stage", "7"}},
      {"Qwen/Qwen3-8B", {"--cp", "2", "--cp-comm-type", "a2a", "--num-gpus", "8"}},
      {"Qwen/Qwen3-30B-A3B",
       {"--ep", "4", "--num-gpus", "16", "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads",
        "--megatron-fsdp-main-grads-dtype", "fp32", "--fsdp-double-buffer"}},
      {"meta-llama/Meta-Llama-3-8B",
       {"--num-gpus", "8", "--use-torch-fsdp2", "--torch-fsdp2-no-reshard-after-forward"}},
  };
  return c;
}

// `mme init MODEL FLAGS` written to a file and estimated gives what `mme estimate MODEL FLAGS`
// gives, on several models and layouts (YAML, and JSON for some).
TEST(spec_cli, InitTemplateEstimatesLikeTheFlags) {
  test::TempDir dir;
  int n = 0;
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.model);
    const auto direct = json_of(run_mme(cat(cat({"estimate", c.model}, c.flags), {"--json"})));
    const auto init = run_mme(cat({"init", c.model}, c.flags));
    ASSERT_EQ(init.exit_code, 0) << init.err;
    // The editors' schema line first (tests/contracts checks where it points), then the header.
    EXPECT_THAT(init.out, StartsWith("# yaml-language-server: $schema=file://"));
    EXPECT_THAT(init.out, HasSubstr("\n# mme spec file (docs/spec-files.md)"));
    const std::string path = write(dir, fmt::format("spec{}.yaml", n++), init.out);
    const auto via_spec = json_of(run_mme({"estimate", "--config", path, "--json"}));
    EXPECT_EQ(comparable(via_spec), comparable(direct));
    EXPECT_EQ(via_spec["model"]["name"], direct["model"]["name"]);
    if (c.model == "google/gemma-2-9b-it") {
      EXPECT_THAT(init.out, HasSubstr("\nmodel:\n  hf: google/gemma-2-9b-it "));
    } else {
      EXPECT_EQ(via_spec["model"]["adapter"], "spec_file");
    }
    if (n <= 3) {
      const auto init_json = run_mme(cat(cat({"init", c.model}, c.flags), {"--json"}));
      ASSERT_EQ(init_json.exit_code, 0) << init_json.err;
      const std::string jpath = write(dir, fmt::format("spec{}.json", n), init_json.out);
      EXPECT_EQ(comparable(json_of(run_mme({"estimate", "--config", jpath, "--json"}))), comparable(direct));
    }
  }
}

TEST(spec_cli, InitWithoutModelIsAnExampleShapedLikeLlama3_8B) {
  test::TempDir dir;
  const auto init = run_mme({"init"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_THAT(init.out, HasSubstr("\n  name: my-model"));
  EXPECT_THAT(init.out, HasSubstr("\n  num_experts: null "));
  EXPECT_THAT(init.out, HasSubstr("\n  # moe_router_topk: 2"));
  EXPECT_THAT(init.out, HasSubstr("\n  # kv_lora_rank: 512"));
  const std::string path = write(dir, "example.yaml", init.out);
  const auto via_spec = json_of(run_mme({"estimate", "--config", path, "--json"}));
  EXPECT_EQ(via_spec["model"]["name"], "my-model");
  EXPECT_EQ(comparable(via_spec), comparable(json_of(run_mme({"estimate", "meta-llama/Meta-Llama-3-8B", "--json"}))));
}

const std::string kSmall = R"(model:
  name: small
  num_layers: 8
  hidden_size: 1024
  num_attention_heads: 16
  num_query_groups: 4
  ffn_hidden_size: 2816
  vocab_size: 32000
  max_position_embeddings: 4096
parallelism:
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
training:
  micro_batch_size: 1
  seq_length: 2048
infrastructure:
  world_size: 8
)";

std::string with(std::string text, const std::string& old, const std::string& replacement) {
  const auto pos = text.find(old);
  if (pos == std::string::npos) throw std::runtime_error("not in the text: " + old);
  return text.replace(pos, old.size(), replacement);
}

TEST(spec_cli, CommandLineFlagsOverrideTheFile) {
  test::TempDir dir;
  const std::string base = write(dir, "small.yaml", kSmall);
  std::string edited = with(kSmall, "tensor_model_parallel_size: 1", "tensor_model_parallel_size: 2");
  edited = with(edited, "micro_batch_size: 1", "micro_batch_size: 2");
  const std::string same = write(dir, "small-tp2.yaml", edited);
  const auto overridden =
      json_of(run_mme({"estimate", "--config", base, "--tp", "2", "--micro-batch-size", "2", "--json"}));
  EXPECT_EQ(overridden["setup"]["tp"], 2);
  EXPECT_EQ(overridden["setup"]["micro_batch_size"], 2);
  EXPECT_EQ(overridden["setup"]["sequence_parallel"], false);  // the file's (the guide's default), not the CLI's
  const auto written = json_of(run_mme({"estimate", "--config", same, "--json"}));
  // Same model name and file-derived fields except the source path.
  auto a = overridden, b = written;
  a["model"].erase("source");
  b["model"].erase("source");
  EXPECT_EQ(a, b);
  // The Megatron-LM alias spelling overrides as well.
  EXPECT_EQ(json_of(run_mme({"estimate", "--config", base, "--tensor-model-parallel-size", "2", "--micro-batch-size",
                             "2", "--json"}))["stages"],
            written["stages"]);
}

// The same model and layout, once as a spec file and once as Megatron-LM flags.
TEST(spec_cli, HandWrittenSpecMatchesMegatronFlags) {
  test::TempDir dir;
  const std::string spec = write(dir, "moe.yaml", R"yaml(model:
  num_layers: 8
  hidden_size: 1024
  num_attention_heads: 16
  num_query_groups: 4
  ffn_hidden_size: 2816
  num_experts: 8
  moe_router_topk: 2
  moe_ffn_hidden_size: 704
  moe_shared_expert_intermediate_size: 1408
  moe_layer_freq: "([0]*2+[1]*6)"
  vocab_size: 32000
  max_position_embeddings: 4096
parallelism:
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 2
  expert_model_parallel_size: 2
training:
  micro_batch_size: 1
  seq_length: 2048
  sequence_parallel: true
infrastructure:
  world_size: 8
)yaml");
  const std::string megatron =
      "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --group-query-attention --num-query-groups 4 "
      "--ffn-hidden-size 2816 --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 704 "
      "--moe-shared-expert-intermediate-size 1408 --moe-layer-freq '([0]*2+[1]*6)' --vocab-size 32000 "
      "--max-position-embeddings 4096 --swiglu --normalization RMSNorm --position-embedding-type rope "
      "--disable-bias-linear --untie-embeddings-and-output-weights --hidden-dropout 0 --attention-dropout 0 "
      "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --expert-model-parallel-size 2 "
      "--expert-tensor-parallel-size 1 --micro-batch-size 1 --seq-length 2048 --sequence-parallel "
      "--use-distributed-optimizer --bf16 --moe-token-dispatcher-type alltoall --moe-grouped-gemm "
      "--no-create-attention-mask-in-dataloader";  // Megatron-LM creates it by default, mme's spec files do not
  const auto via_spec = json_of(run_mme({"estimate", "--config", spec, "--json"}));
  const auto via_flags = json_of(run_mme({"estimate", "--megatron-args", megatron, "--num-gpus", "8", "--json"}));
  EXPECT_EQ(comparable(via_spec), comparable(via_flags));
  EXPECT_EQ(via_spec["setup"]["ep"], 2);
  EXPECT_EQ(via_spec["setup"]["etp"], 1);
}

// --dump-config prints what was estimated; reading it back gives the same estimate.
TEST(spec_cli, DumpConfigRoundTrips) {
  test::TempDir dir;
  const std::string base = write(dir, "small.yaml", kSmall);
  const std::vector<std::string> flags = {"--tp", "2", "--pp", "2", "--recompute-granularity", "full"};
  const auto expected = json_of(run_mme(cat(cat({"estimate", "--config", base}, flags), {"--json"})));
  const auto dumped = run_mme(cat(cat({"estimate", "--config", base}, flags), {"--dump-config"}));
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  EXPECT_THAT(dumped.out, HasSubstr("\n  tensor_model_parallel_size: 2 "));
  EXPECT_THAT(dumped.out, HasSubstr("\n  recompute_granularity: full "));
  EXPECT_THAT(dumped.out, HasSubstr("\n  recompute_method: uniform "));
  EXPECT_THAT(dumped.out, HasSubstr("\n  expert_tensor_parallel_size: 1 "));
  const std::string again = write(dir, "dumped.yaml", dumped.out);
  EXPECT_EQ(comparable(json_of(run_mme({"estimate", "--config", again, "--json"}))), comparable(expected));
  // As JSON.
  const auto dumped_json = run_mme(cat(cat({"estimate", "--config", base}, flags), {"--dump-config", "--json"}));
  ASSERT_EQ(dumped_json.exit_code, 0) << dumped_json.err;
  const auto doc = nlohmann::json::parse(dumped_json.out);
  EXPECT_EQ(doc["parallelism"]["pipeline_model_parallel_size"], 2);
  EXPECT_EQ(doc["training"]["recompute_num_layers"], 1);
  const std::string again_json = write(dir, "dumped.json", dumped_json.out);
  EXPECT_EQ(comparable(json_of(run_mme({"estimate", "--config", again_json, "--json"}))), comparable(expected));
  // From flags alone (no --config) too.
  const auto from_flags =
      run_mme({"estimate", "Qwen/Qwen3-30B-A3B", "--tp", "2", "--ep", "4", "--num-gpus", "8", "--dump-config"});
  ASSERT_EQ(from_flags.exit_code, 0) << from_flags.err;
  const std::string qwen = write(dir, "qwen.yaml", from_flags.out);
  EXPECT_EQ(comparable(json_of(run_mme({"estimate", "--config", qwen, "--json"}))),
            comparable(json_of(
                run_mme({"estimate", "Qwen/Qwen3-30B-A3B", "--tp", "2", "--ep", "4", "--num-gpus", "8", "--json"}))));
}

TEST(spec_cli, HfBaseWithOverridesAndItsDump) {
  test::TempDir dir;
  const std::string setup = kSmall.substr(kSmall.find("parallelism:"));
  const std::string spec = write(dir, "qwen4.yaml", "model:\n  hf: Qwen/Qwen3-8B\n  num_layers: 4\n" + setup);
  const auto est = json_of(run_mme({"estimate", "--config", spec, "--json"}));
  EXPECT_EQ(est["model"]["num_layers"], 4);
  EXPECT_EQ(est["model"]["name"], "Qwen/Qwen3-8B");
  EXPECT_EQ(est["model"]["adapter"], "qwen");
  // Dumped, the model is written out in full and estimates the same.
  const auto dumped = run_mme({"estimate", "--config", spec, "--dump-config"});
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  EXPECT_THAT(dumped.out, Not(HasSubstr("  hf:")));
  EXPECT_THAT(dumped.out, HasSubstr("\n  num_layers: 4 "));
  const std::string full = write(dir, "full.yaml", dumped.out);
  EXPECT_EQ(comparable(json_of(run_mme({"estimate", "--config", full, "--json"}))), comparable(est));
  // A base that cannot be written field by field keeps `hf:` and the overrides.
  const std::string gemma =
      write(dir, "gemma.yaml", "model:\n  hf: google/gemma-2-9b-it\n  num_layers: 10\n  vocab_size: 200000\n" + setup);
  const auto gemma_est = json_of(run_mme({"estimate", "--config", gemma, "--json"}));
  EXPECT_EQ(gemma_est["model"]["num_layers"], 10);
  const auto gemma_dump = run_mme({"estimate", "--config", gemma, "--dump-config"});
  ASSERT_EQ(gemma_dump.exit_code, 0) << gemma_dump.err;
  EXPECT_THAT(gemma_dump.out, HasSubstr("\nmodel:\n  hf: google/gemma-2-9b-it"));
  EXPECT_THAT(gemma_dump.out, HasSubstr("\n  num_layers: 10"));
  const std::string gemma2 = write(dir, "gemma2.yaml", gemma_dump.out);
  EXPECT_EQ(comparable(json_of(run_mme({"estimate", "--config", gemma2, "--json"}))), comparable(gemma_est));
}

// A spec that changes the layer count of an hf: base names the change: one warning on stderr,
// in the JSON warnings and in the text report's notes (the report still says "Qwen/Qwen3-8B").
TEST(spec_cli, HfBaseLayerOverrideIsNamed) {
  test::TempDir dir;
  const std::string setup = kSmall.substr(kSmall.find("parallelism:"));
  const std::string spec = write(dir, "qwen4.yaml", "model:\n  hf: Qwen/Qwen3-8B\n  num_layers: 4\n" + setup);
  // Qwen3-8B has 36 layers (models/Qwen--Qwen3-8B/config.json: num_hidden_layers); line 3 of the file.
  const std::string note = "num_layers 4 (" + spec + ":3) overrides the 36 layers of Qwen/Qwen3-8B";
  const auto text = run_mme({"estimate", "--config", spec});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.err, "mme: warning: " + note + "\n");
  EXPECT_THAT(text.out, HasSubstr("\nArchitecture: 4L-4096H\n"));
  EXPECT_THAT(text.out, HasSubstr("\nNotes:\n  - " + note + "\n"));
  const auto json = run_mme({"estimate", "--config", spec, "--json"});
  EXPECT_EQ(json_of(json)["warnings"], nlohmann::json::array({note}));
  // The base's own count is no override: nothing to say.
  const std::string same = write(dir, "qwen36.yaml", "model:\n  hf: Qwen/Qwen3-8B\n  num_layers: 36\n" + setup);
  const auto unchanged = run_mme({"estimate", "--config", same});
  ASSERT_EQ(unchanged.exit_code, 0) << unchanged.err;
  EXPECT_EQ(unchanged.err, "");
  EXPECT_THAT(unchanged.out, Not(HasSubstr("Notes:")));
}

TEST(spec_cli, SetupOnlyFileWithModelOnTheCommandLine) {
  test::TempDir dir;
  std::string setup = kSmall.substr(kSmall.find("parallelism:"));
  setup = with(setup, "tensor_model_parallel_size: 1", "tensor_model_parallel_size: 2");
  const std::string path = write(dir, "setup.yaml", setup);
  // The file's defaults are the guide's: no sequence parallelism, ETP 1.
  EXPECT_EQ(json_of(run_mme({"estimate", "Qwen/Qwen3-8B", "--config", path, "--json"})),
            json_of(run_mme({"estimate", "Qwen/Qwen3-8B", "--tp", "2", "--seq-length", "2048", "--num-gpus", "8",
                             "--no-sequence-parallel", "--etp", "1", "--json"})));
  const auto twice = run_mme({"estimate", "Qwen/Qwen3-8B", "--config", write(dir, "small.yaml", kSmall)});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_EQ(twice.err, "mme: error: the model is given twice: MODEL 'Qwen/Qwen3-8B' and the model section of " +
                           (dir.path() / "small.yaml").string() + " (line 1); drop one\n");
  const auto none = run_mme({"estimate", "--config", path});
  EXPECT_EQ(none.exit_code, 3);
  EXPECT_EQ(none.err,
            "mme: error: " + path + ": the file has no model section, and no MODEL is given on the command line\n");
}

TEST(spec_cli, RequiredFieldsMayComeFromTheCommandLine) {
  test::TempDir dir;
  const std::string path = write(dir, "nogpus.yaml", with(kSmall, "infrastructure:\n  world_size: 8\n", ""));
  const auto missing = run_mme({"estimate", "--config", path});
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "mme: error: " + path +
                             ": infrastructure.world_size: required field is missing (the file has no infrastructure "
                             "section; give it in the file or --num-gpus on the command line)\n");
  const auto given = json_of(run_mme({"estimate", "--config", path, "--num-gpus", "16", "--json"}));
  EXPECT_EQ(given["setup"]["num_gpus"], 16);
  EXPECT_EQ(json_of(run_mme({"estimate", "--config", path, "--world-size", "16", "--json"}))["stages"],
            given["stages"]);
}

TEST(spec_cli, BadSpecsFailWithExactMessages) {
  test::TempDir dir;
  auto run = [&](const std::string& name, const std::string& text, std::vector<std::string> extra = {}) {
    const std::string path = write(dir, name, text);
    auto r = run_mme(cat({"estimate", "--config", path}, extra));
    EXPECT_EQ(r.out, "");
    return std::make_pair(path, r);
  };
  {
    auto [path, r] = run("unknown.yaml", with(kSmall, "  num_layers: 8", "  num_layer: 8"));
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_EQ(r.err, "mme: error: " + path + ":3: model.num_layer: unknown field (did you mean 'num_layers'?)\n");
  }
  {
    auto [path, r] = run("type.json", R"({
  "model": {"name": "x", "num_layers": "eight"}
})");
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_EQ(r.err, "mme: error: " + path + ":2: model.num_layers: expected a positive integer, got \"eight\"\n");
  }
  {
    auto [path, r] = run("world.yaml", with(with(kSmall, "world_size: 8", "world_size: 6"),
                                            "tensor_model_parallel_size: 1", "tensor_model_parallel_size: 4"));
    EXPECT_EQ(r.exit_code, 4);
    EXPECT_EQ(r.err, "mme: error: " + path +
                         ":17: infrastructure.world_size: must satisfy the parallelism constraint world_size = pp x tp "
                         "x cp x dp, and 6 is not divisible by pp x tp x cp = 1 x 4 x 1 = 4\n");
  }
  {
    // A command-line value is named as such.
    // (24 heads, 6 query groups: TP 4 divides the heads, and is neither a divisor nor a multiple
    // of the groups, transformer_config.py's rule.)
    const std::string groups6 = with(kSmall, "num_attention_heads: 16\n  num_query_groups: 4",
                                     "num_attention_heads: 24\n  num_query_groups: 6\n  kv_channels: 64");
    auto [path, r] = run("heads.yaml", groups6, {"--tp", "4", "--num-gpus", "8"});
    EXPECT_EQ(r.exit_code, 4);
    EXPECT_EQ(r.err,
              "mme: error: " + path +
                  ": parallelism.tensor_model_parallel_size (--tp on the command line): num_query_groups must be "
                  "a multiple or a divisor of tensor_model_parallel_size (6 query groups on line 6, "
                  "tensor_model_parallel_size 4)\n");
  }
  {
    // What only the engine checks still names the file.
    auto [path, r] = run("ffn.yaml", with(with(kSmall, "ffn_hidden_size: 2816", "ffn_hidden_size: 2817"),
                                          "tensor_model_parallel_size: 1", "tensor_model_parallel_size: 2"));
    EXPECT_EQ(r.exit_code, 4);
    EXPECT_EQ(r.err, "mme: error: " + path + ": ffn_hidden_size 2817 is not divisible by --tp 2\n");
  }
  {
    auto [path, r] = run("gpu.yaml", kSmall + "  gpu: Z100\n");
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_THAT(r.err, StartsWith("mme: error: " + path + ":18: infrastructure.gpu: unknown GPU 'Z100' (known: "));
  }
  {
    const std::string path = (dir.path() / "absent.yaml").string();
    const auto r = run_mme({"estimate", "--config", path});
    EXPECT_EQ(r.exit_code, 6);
    EXPECT_EQ(r.err, "mme: error: " + path + ": no such file\n");
  }
  {
    auto [path, r] = run("both.yaml", kSmall, {"--megatron-args", "--num-layers 2"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "mme: error: give --config or Megatron-LM flags (--megatron-args), not both\n");
  }
}

TEST(spec_cli, GpuFromTheFileAndFromTheCommandLine) {
  test::TempDir dir;
  const std::string path = write(dir, "gpu.yaml", kSmall + "  gpu: H100\n");
  const auto j = json_of(run_mme({"estimate", "--config", path, "--json"}));
  ASSERT_EQ(j["fits"].size(), 1u);
  EXPECT_EQ(j["fits"][0]["hardware"], "H100-SXM-80GB");
  const auto k = json_of(run_mme({"estimate", "--config", path, "--gpu", "A100-SXM-80GB", "--json"}));
  ASSERT_EQ(k["fits"].size(), 1u);
  EXPECT_EQ(k["fits"][0]["hardware"], "A100-SXM-80GB");
  const auto dumped = run_mme({"estimate", "--config", path, "--dump-config"});
  EXPECT_THAT(dumped.out, HasSubstr("\n  gpu: H100-SXM-80GB "));
}

// The guide's "61 layers with PP=4" example, end to end.
TEST(spec_cli, GuideUnevenPipelineExample) {
  test::TempDir dir;
  std::string text = with(kSmall, "num_layers: 8", "num_layers: 61");
  text = with(text, "pipeline_model_parallel_size: 1",
              "pipeline_model_parallel_size: 4\n  num_layers_in_last_pipeline_stage: 16");
  const auto j = json_of(run_mme({"estimate", "--config", write(dir, "uneven.yaml", text), "--json"}));
  std::vector<int> layers;
  for (const auto& s : j["stages"]) layers.push_back(s["layers"].get<int>());
  EXPECT_EQ(layers, (std::vector<int>{15, 15, 15, 16}));
}

// examples/specs: each hand-written spec estimates like its bundled model with the same layout.
TEST(spec_cli, ExampleSpecsMatchTheBundledModels) {
  const auto dir = test::source_dir() / "examples" / "specs";
  struct Example {
    std::string file, model;
    std::vector<std::string> flags;
  };
  const std::vector<Example> examples = {
      {"llama3-8b.yaml",
       "meta-llama/Meta-Llama-3-8B",
       {"--tp", "2", "--pp", "2", "--etp", "1", "--num-gpus", "16", "--seq-length", "8192", "--recompute-granularity",
        "selective"}},  // ETP 1: the guide's default and the seed-style flags' (--megatron-args: TP)
      {"deepseek-v2-lite.yaml", "deepseek-ai/DeepSeek-V2-Lite", {"--ep", "8", "--num-gpus", "8"}},
      {"mixtral-8x7b.json",
       "mistralai/Mixtral-8x7B-v0.1",
       {"--tp", "2", "--ep", "4", "--etp", "2", "--num-gpus", "16", "--recompute-granularity", "full"}},
  };
  for (const auto& e : examples) {
    SCOPED_TRACE(e.file);
    const auto via_spec = json_of(run_mme({"estimate", "--config", (dir / e.file).string(), "--json"}));
    EXPECT_EQ(comparable(via_spec), comparable(json_of(run_mme(cat(cat({"estimate", e.model}, e.flags), {"--json"})))));
  }
  const auto proxy = json_of(run_mme({"estimate", "--config", (dir / "qwen3-8b-4-layers.yaml").string(), "--json"}));
  EXPECT_EQ(proxy["model"]["name"], "qwen3-8b-4-layers");
  EXPECT_EQ(proxy["model"]["num_layers"], 4);
  ASSERT_EQ(proxy["fits"].size(), 1u);
  EXPECT_EQ(proxy["fits"][0]["hardware"], "H100-SXM-80GB");
}

TEST(spec_cli, InitHelpAndErrors) {
  const auto help = run_mme({"help"});
  EXPECT_THAT(help.out, HasSubstr("\n  init      a commented spec file"));
  const auto init_help = run_mme({"init", "--help"});
  EXPECT_EQ(init_help.exit_code, 0);
  EXPECT_THAT(init_help.out, StartsWith("Usage: mme init [MODEL]"));
  const auto bad = run_mme({"init", "Qwen/Qwen3-8B", "--tp", "3", "--num-gpus", "3"});
  EXPECT_EQ(bad.exit_code, 4);
  EXPECT_EQ(bad.out, "");
  const auto html = run_mme({"estimate", "Qwen/Qwen3-8B", "--dump-config", "--html", "x.html"});
  EXPECT_EQ(html.exit_code, 2);
  EXPECT_EQ(html.err, "mme: error: --dump-config prints the spec instead of the report; drop --html / --svg\n");
}

}  // namespace
}  // namespace mme
