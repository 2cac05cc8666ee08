// The bad-input catalogue (docs/reliability.md): one row per class of bad input, run through the
// real `mme`. Every row asserts the documented exit code (docs/cli.md), exactly one line on
// stderr, "mme: error: ..." naming the problem (no "terminate called", no sanitizer report,
// no stack trace), and nothing at all on stdout, also when --json asks for a document.
#include <cctype>
#include <filesystem>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace mme {
namespace {

namespace fs = std::filesystem;

struct Row {
  const char* name;                               // the class of bad input
  std::vector<std::string> args;                  // "{dir}" is replaced by the row's scratch folder
  int exit_code;                                  // docs/cli.md
  std::string message;                            // a part of the error line naming the problem
  bool json = true;                               // the command takes --json: run it both ways
  std::map<std::string, std::string> files = {};  // relative path -> content, written first
};

const char* const kLlama = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
  "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
  "tie_word_embeddings": false, "hidden_act": "silu"})";

// `text` (a JSON object) with one key's value replaced by `value` (JSON text).
std::string with(std::string text, const std::string& key, const std::string& value) {
  const std::string needle = "\"" + key + "\": ";
  const auto at = text.find(needle);
  if (at == std::string::npos) throw std::logic_error("the test config has no key " + key);
  const auto start = at + needle.size();
  const auto end = text.find_first_of(",}", start);
  return text.substr(0, start) + value + text.substr(end);
}

// The Llama config with one key replaced.
std::string llama_with(const std::string& key, const std::string& value) { return with(kLlama, key, value); }

const std::string kTiny =
    "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 4096 "
    "--micro-batch-size 1 --vocab-size 1000 --tokenizer-type NullTokenizer ";

// One measured case in the format of bench/accuracy/megatron_functional_test_memory.csv.
const std::string kCases =
    "model,test_case,golden,max_alloc_GiB_max,alloc_GiB_median,nodes_gpus,num-layers,hidden-size,"
    "num-attention-heads,seq-length,max-position-embeddings,micro-batch-size,vocab-size,tokenizer-type\n"
    "gpt,tiny,dgx_h100,2.5,1.5,1x8,4,256,8,1024,4096,1,1000,NullTokenizer\n";

std::vector<Row> catalogue() {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  return {
      // The config file.
      {"empty file", {"estimate", "{dir}/config.json"}, 3, "the file is empty", true, {{"config.json", ""}}},
      {"JSON array",
       {"estimate", "{dir}/config.json"},
       3,
       "expected a JSON object, got array",
       true,
       {{"config.json", "[1, 2, 3]\n"}}},
      {"truncated JSON",
       {"estimate", "{dir}/config.json"},
       3,
       "invalid JSON: parse error",
       true,
       {{"config.json", std::string(kLlama).substr(0, 120)}}},
      {"NUL bytes",
       {"estimate", "{dir}/config.json"},
       3,
       "contains NUL bytes",
       true,
       {{"config.json", std::string("{\"hidden_size\": 4096,") + '\0' + "\"x\": 1}"}}},
      {"deeply nested arrays",
       {"estimate", "{dir}/config.json"},
       3,
       "nested more than 64 levels",
       true,
       {{"config.json", llama_with("hidden_size", deep)}}},
      {"a string where an integer belongs",
       {"estimate", "{dir}/config.json"},
       3,
       "hidden_size: expected a positive integer, got \"4096\"",
       true,
       {{"config.json", llama_with("hidden_size", "\"4096\"")}}},
      {"a float where an integer belongs",
       {"params", "{dir}/config.json"},
       3,
       "num_hidden_layers: expected a positive integer, got 32.5",
       true,
       {{"config.json", llama_with("num_hidden_layers", "32.5")}}},
      {"a negative size",
       {"estimate", "{dir}/config.json"},
       3,
       "intermediate_size: expected a positive integer, got -1",
       true,
       {{"config.json", llama_with("intermediate_size", "-1")}}},
      {"a zero size",
       {"estimate", "{dir}/config.json"},
       3,
       "num_attention_heads: expected a positive integer, got 0",
       true,
       {{"config.json", llama_with("num_attention_heads", "0")}}},
      {"an absurd size (1e30)",
       {"estimate", "{dir}/config.json"},
       3,
       "vocab_size: 1e+30 is larger than 16777216, which no real model has",
       true,
       {{"config.json", llama_with("vocab_size", "1e30")}}},
      {"a number beyond double (1e400)",
       {"params", "{dir}/config.json"},
       3,
       "invalid JSON: number overflow parsing '1e400'",
       true,
       {{"config.json", llama_with("hidden_size", "1e400")}}},
      {"sizes whose products overflow 64 bits (HF config)",
       {"params", "{dir}/config.json"},
       3,
       "more than 1e+15, which no real model comes near",
       true,
       {{"config.json", with(with(llama_with("hidden_size", "16777216"), "intermediate_size", "16777216"),
                             "num_hidden_layers", "512")}}},
      {"sizes whose products overflow 64 bits (Megatron flags)",
       {"estimate", "--megatron-args",
        "--num-layers 512 --hidden-size 16777216 --ffn-hidden-size 16777216 --num-attention-heads 1 "
        "--kv-channels 16777216 --seq-length 4096"},
       3,
       "does not fit in 64 bits; no real model and layout is that large"},
      // Issue 20 item 15: 2^20 layers were accepted, and an estimate of them took 14.5 GB.
      {"more layers than mme accepts (HF config)",
       {"params", "{dir}/config.json"},
       3,
       "num_hidden_layers: 513 layers is more than mme accepts (at most 512; the deepest real models have about 130",
       true,
       {{"config.json", llama_with("num_hidden_layers", "513")}}},
      {"more layers than mme accepts (Megatron flags)",
       {"estimate", "--megatron-args",
        "--num-layers 1048576 --hidden-size 1024 --num-attention-heads 16 --seq-length 4096"},
       3,
       "--num-layers: 1048576 layers is more than mme accepts (at most 512;"},
      {"more MTP layers than mme accepts (Megatron flags)",
       {"estimate", "--megatron-args",
        "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 4096 --mtp-num-layers 100000"},
       3,
       "--mtp-num-layers: 100000 layers is more than mme accepts (at most 512;"},
      {"more layers than mme accepts (spec file)",
       {"estimate", "--config", "{dir}/s.yaml"},
       3,
       "s.yaml:2: model.num_layers: 1048576 layers is more than mme accepts (at most 512;",
       true,
       {{"s.yaml",
         "model:\n  num_layers: 1048576\n  hidden_size: 1024\n  num_attention_heads: 16\n"
         "  ffn_hidden_size: 4096\n  vocab_size: 32000\n  max_position_embeddings: 4096\n"
         "parallelism:\n  tensor_model_parallel_size: 1\n  pipeline_model_parallel_size: 1\n"
         "training:\n  micro_batch_size: 1\n  seq_length: 4096\ninfrastructure:\n  world_size: 8\n"}}},
      {"more pipeline chunks than the model fills",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--pp", "4", "--vpp", "32", "--num-layers-in-first-pipeline-stage",
        "0", "--num-layers-in-last-pipeline-stage", "32", "--num-gpus", "4"},
       4,
       "--pp 4 x --vpp 32 = 128 pipeline chunks is more than the model's 32 layers plus the embedding and the loss: "
       "at least one pipeline chunk would hold nothing"},
      {"tokens per micro-batch beyond any run",
       {"estimate", "{dir}/config.json", "--seq-length", "16777216", "--micro-batch-size", "16777216"},
       4,
       "--seq-length 16777216 x --micro-batch-size 16777216 = 281474976710656 tokens per micro-batch is more than "
       "4294967296",
       true,
       {{"config.json", kLlama}}},
      // Where the model comes from.
      {"a folder without config.json",
       {"estimate", "{dir}/model"},
       6,
       "the folder has no config.json",
       true,
       {{"model/README.md", "no config here\n"}}},
      {"a missing file", {"estimate", "{dir}/missing/config.json"}, 6, "no such file or folder"},
      {"an unknown hub id offline",
       {"params", "nobody-org/no-such-model"},
       6,
       "not bundled and not in the Hugging Face cache"},
      // Parallel sizes.
      {"a zero parallel size",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--tp", "0"},
       2,
       "--tp: expected a positive integer, got 0"},
      {"a negative parallel size",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--pp", "-2"},
       2,
       "--pp: expected a positive integer, got -2"},
      {"a non-numeric parallel size",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--ep", "four"},
       2,
       "--ep: expected an integer, got 'four'"},
      {"a parallel size beyond 64 bits",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--cp", "99999999999999999999"},
       2,
       "--cp: 99999999999999999999 is too large (at most 1048576)"},
      {"a layout that does not divide the heads",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--tp", "3", "--num-gpus", "3"},
       4,
       "32 attention heads are not divisible by --tp 3"},
      {"a layout that does not divide the GPUs",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--tp", "16", "--num-gpus", "8"},
       4,
       "--num-gpus 8 is not divisible by TP x PP x CP = 16 x 1 x 1 = 16"},
      {"query groups neither a divisor nor a multiple of TP (the GPU count follows the layout)",
       {"estimate", "Qwen/Qwen2.5-7B", "--tp", "14"},
       4,
       "4 query groups (KV heads) are neither a multiple nor a divisor of --tp 14 (Megatron-LM's rule, "
       "transformer_config.py); --tp must be one of 1, 2 or 4"},
      {"a pipeline layout that does not match the model",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--pp", "4", "--pipeline-layout", "Et*3|(tt|)*6mL"},
       4,
       "--pipeline-layout has 15 decoder layers 't' but the model has 32"},
      {"a malformed pipeline layout",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--pipeline-layout", "Et*|tL"},
       4,
       "--pipeline-layout: '*' must be followed by a count"},
      {"more pipeline stages than layers",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--pp", "64", "--num-gpus", "64"},
       4,
       "--pp 64 is more pipeline stages than the model's 32 layers"},
      {"more pipeline chunks than any run",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--pp", "32", "--vpp", "1048576", "--num-gpus", "32"},
       4,
       "--pp 32 x --vpp 1048576 = 33554432 pipeline chunks is more than 1048576"},
      // Flags and names.
      {"an unknown flag",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--tensor-paralel", "2"},
       2,
       "unknown option --tensor-paralel (`mme help estimate` lists the options)"},
      {"an unknown GPU name",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--gpu", "Z900"},
       2,
       "--gpu: unknown GPU 'Z900'"},
      {"an unknown flag holding a message token",
       {"plugins", "--plugin%canonical_option%-dir", "x"},
       2,
       "unknown option --plugin%canonical_option%-dir (`mme help plugins` lists the options)"},
      {"a misused flag holding a message token",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--json=%value%"},
       2,
       "invalid use of option '--json' or its value",
       false},
      {"an unknown command",
       {"estimat", "meta-llama/Meta-Llama-3-8B"},
       2,
       "unknown command 'estimat'; did you mean 'estimate'?",
       false},
      {"plan --num-gpus 0",
       {"plan", "meta-llama/Meta-Llama-3-8B", "--num-gpus", "0"},
       2,
       "--num-gpus: expected a positive integer, got 0"},
      {"plan --num-gpus beyond 64 bits",
       {"plan", "meta-llama/Meta-Llama-3-8B", "--num-gpus", "18446744073709551616"},
       2,
       "--num-gpus: 18446744073709551616 is too large (at most 1099511627776)"},
      {"cuBLAS workspaces adding up beyond 64 bits",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--cublas-workspace-config",
        [] {
          std::string s;
          for (int i = 0; i < 40; ++i) s += ":16777216:16777216";
          return s;
        }()},
       2,
       "the workspaces add up to more than 2^62 bytes"},
      // `validate` row filters (libstdc++'s regex compiler overflows on long numbers).
      {"a regex back-reference beyond 64 bits",
       {"validate", "{dir}/cases.csv", "--golden", "a\\44444444444444444444"},
       2,
       "--golden: invalid regular expression: back-references are not supported",
       true,
       {{"cases.csv", kCases}}},
      {"a regex repeat count beyond any need",
       {"validate", "{dir}/cases.csv", "--case", "a{99999999}"},
       2,
       "--case: a repeat count of",
       true,
       {{"cases.csv", kCases}}},
      {"an invalid regex",
       {"validate", "{dir}/cases.csv", "--case", "(tp2"},
       2,
       "--case: invalid regular expression",
       true,
       {{"cases.csv", kCases}}},
      // `validate` inputs: a CSV of neither format, a training log without usable memory lines.
      {"a CSV of neither validate format",
       {"validate", "{dir}/cols.csv"},
       3,
       "unknown set of columns (name, value)",
       true,
       {{"cols.csv", "name,value\na,1\n"}}},
      {"a log without memory lines",
       {"validate", "--from-log", "{dir}/train.log", "--megatron-args", kTiny},
       3,
       "no memory lines found",
       true,
       {{"train.log", "iteration 1 | lm loss: 3.0\n"}}},
      {"a log memory value that is not a number",
       {"validate", "--from-log", "{dir}/train.log", "--megatron-args", kTiny},
       3,
       "every memory line is refused (1); the first, line 1: '1e999' after 'max allocated:' is not a positive amount",
       true,
       {{"train.log", "[Rank 0] (after 1 iterations) memory (MB) | allocated: 1 | max allocated: 1e999\n"}}},
      {"a log rank beyond the world size",
       {"validate", "--from-log", "{dir}/train.log", "--megatron-args", kTiny},
       3,
       "rank 4294967296 is beyond the world size of 8 GPUs",
       true,
       {{"train.log", "[Rank 4294967296] (after 1 iterations) memory (MB) | allocated: 1 | max allocated: 2\n"}}},
      // Issue 20 (reliability, second pass).
      {"a YAML alias that contains itself",
       {"estimate", "--config", "{dir}/s.yaml"},
       3,
       "a YAML alias refers to a node that contains it (a cycle)",
       true,
       {{"s.yaml", "a: &a [*a]\n"}}},
      {"a YAML alias bomb",
       {"estimate", "--config", "{dir}/s.yaml"},
       3,
       "more than 100000 values once YAML aliases are expanded",
       true,
       {{"s.yaml",
         [] {
           std::string s = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
           for (int i = 1; i < 9; ++i) {
             const std::string prev = "*a" + std::to_string(i - 1);
             s += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + prev;
             for (int k = 1; k < 10; ++k) s += ", " + prev;
             s += "]\n";
           }
           return s;
         }()}}},
      {"a YAML text on which yaml-cpp never stops",
       {"estimate", "--config", "{dir}/s.yaml"},
       3,
       "not valid YAML: 16 or more documents",
       true,
       {{"s.yaml", ", "}}},
      {"a YAML spec nested beyond the limit",
       {"estimate", "--config", "{dir}/s.yaml"},
       3,
       "YAML nested more than 64 levels deep",
       true,
       {{"s.yaml",
         [] {
           std::string s = "model:\n";
           for (int i = 1; i <= 100; ++i) s += std::string(static_cast<std::size_t>(i), ' ') + "k:\n";
           return s;
         }()}}},
      {"a JSON spec nested 100 000 deep",
       {"estimate", "--config", "{dir}/s.json"},
       3,
       "JSON nested more than 64 levels deep",
       true,
       {{"s.json", "{\"model\": " + std::string(100000, '[') + std::string(100000, ']') + "}"}}},
      {"a folder as --megatron-args-file",
       {"estimate", "--megatron-args-file", "{dir}/args"},
       6,
       "is a folder, not a Megatron-LM argument file",
       true,
       {{"args/README", "x\n"}}},
      {"a Megatron argument file beyond the size cap",
       {"estimate", "--megatron-args-file", "{dir}/args.txt"},
       3,
       "bytes is more than the 1048576 bytes a Megatron-LM argument file may have",
       true,
       {{"args.txt", kTiny + std::string(2 << 20, ' ')}}},
      {"a folder as the validate CSV",
       {"validate", "{dir}/cases"},
       6,
       "is a folder, not a CSV of measured cases",
       true,
       {{"cases/README", "x\n"}}},
      {"a folder as the validate log",
       {"validate", "--from-log", "{dir}/log", "--megatron-args", kTiny},
       6,
       "is a folder, not a training log",
       true,
       {{"log/README", "x\n"}}},
      {"33 heads for hidden 4096 in Megatron flags",
       {"estimate", "--megatron-args",
        "--num-layers 2 --hidden-size 4096 --num-attention-heads 33 --seq-length 1024 --max-position-embeddings 1024 "
        "--micro-batch-size 1 --vocab-size 1000"},
       3,
       "--num-attention-heads 33 does not divide --hidden-size 4096"},
      {"--html and --svg naming one file in two spellings",
       {"estimate", "meta-llama/Meta-Llama-3-8B", "--html", "{dir}/./x.html", "--svg", "{dir}/x.html"},
       2,
       "--html and --svg name the same file"},
      // Megatron-LM flags.
      {"torchrun's --nnodes x --nproc-per-node beyond 64 bits",
       {"estimate", "--megatron-args",
        "torchrun --nnodes 4611686018427387904 --nproc-per-node 4 pretrain_gpt.py " + kTiny},
       2,
       "the GPU count: line 1: --nnodes 4611686018427387904 is not a number of GPUs mme can use"},
      {"torchrun's GPU count beyond any run",
       {"estimate", "--megatron-args",
        "torchrun --nnodes 999999999 --nproc-per-node 999999999 pretrain_gpt.py " + kTiny},
       2,
       "the launcher's 999999998000000001 GPUs are more than 1099511627776"},
      {"a Megatron micro-batch beyond any run",
       {"estimate", "--megatron-args", kTiny + "--micro-batch-size 4611686018427387904"},
       4,
       "--micro-batch-size 4611686018427387904 is larger than 16777216, which no real run uses"},
      {"--moe-layer-freq beyond 64 bits",
       {"estimate", "--megatron-args", kTiny + "--num-experts 4 --moe-layer-freq 99999999999999999999"},
       3,
       "--moe-layer-freq '99999999999999999999': the interval is larger than any model's layer count"},
      {"--moe-layer-freq repeating past the layer count",
       {"estimate", "--megatron-args", kTiny + "--num-experts 4 --moe-layer-freq [1,1,1,1,1,1,1,1]*999999"},
       3,
       "longer than the number of layers"},
  };
}

// gtest prints a parameter when a test fails: the row's class and its arguments, not its bytes.
void PrintTo(const Row& row, std::ostream* os) {
  *os << row.name << ": mme";
  for (const auto& a : row.args) *os << ' ' << (a.size() > 60 ? a.substr(0, 57) + "..." : a);
}

class BadInputs : public ::testing::TestWithParam<Row> {};

void check(const Row& row, bool json) {
  test::TempDir dir;
  for (const auto& [path, content] : row.files) {
    fs::create_directories((dir.path() / path).parent_path());
    test::write_file(dir.path() / path, content);
  }
  std::vector<std::string> args;
  for (std::string a : row.args) {
    if (const auto at = a.find("{dir}"); at != std::string::npos) a.replace(at, 5, dir.path().string());
    args.push_back(a);
  }
  if (json) args.push_back("--json");
  const auto r = test::run_mme(args, {{"HF_HUB_CACHE", (dir.path() / "hf-cache").string()}});
  SCOPED_TRACE(std::string(row.name) + (json ? " (--json)" : ""));
  EXPECT_EQ(r.exit_code, row.exit_code) << r.err;
  EXPECT_EQ(r.out, "") << "stdout must stay empty after an error";
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "exactly one line on stderr:\n" << r.err;
  EXPECT_EQ(r.err.rfind("mme: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(row.message), std::string::npos) << "expected: " << row.message << "\ngot: " << r.err;
  for (const char* noise : {"terminate called", "internal error", "Sanitizer", "runtime error", "#0 ", "Aborted"})
    EXPECT_EQ(r.err.find(noise), std::string::npos) << noise << " in " << r.err;
}

TEST_P(BadInputs, OneClearLineTheDocumentedCodeNothingOnStdout) {
  check(GetParam(), false);
  if (GetParam().json) check(GetParam(), true);
}

std::string row_name(const ::testing::TestParamInfo<Row>& info) {
  std::string out;
  for (const char* p = info.param.name; *p; ++p) out += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return out;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, BadInputs, ::testing::ValuesIn(catalogue()), row_name);

}  // namespace
}  // namespace mme
