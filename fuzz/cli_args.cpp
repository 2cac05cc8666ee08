// Fuzz target: the command line of `mme`, run in-process.
//
// Input: the argument vector, one argument per line (argv[1..]: the command first). Inputs
// holding a NUL byte are skipped (argv cannot hold one). The commands run exactly as `mme`
// runs them (cli/command.hpp's parse_invocation, every cmd_*.cpp), except that the plugins come from
// their static archives instead of files: fuzz/CMakeLists.txt leaves cli/plugin_source.cpp out
// and this file defines plugin_source.
//
// Oracle, beyond the sanitizers: a failing command throws an mme::Error (never another
// exception: exit code 1, "internal error") and writes nothing to stdout (docs/cli.md: "after an
// error stdout is empty"; `plan --csv` streams by design and is exempt).
//
// Sandbox: the process works in a fresh folder under $TMPDIR holding small fixtures (configs,
// an empty folder, Megatron flags, a spec file, a hardware profile, a CSV of cases, a bundled
// zoo and a Hugging Face cache), with downloads off (HF_HUB_OFFLINE=1) and HOME inside it.
// Arguments may not leave it (no absolute paths, '~' or '..'); files a command writes
// (--html, --svg) are removed after each run; --threads is skipped (thousands of threads per
// input would measure the machine, not mme).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <mme/engine/plugin_loader.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/log.hpp>

#include "command.hpp"
#include "context.hpp"
#include "fuzz_support.hpp"
#include <unistd.h>

namespace fs = std::filesystem;

namespace mme::cli {

// Instead of cli/plugin_source.cpp (left out by fuzz/CMakeLists.txt): the plugin
// folders named on the command line only (the sandbox holds no loadable library, so this
// exercises the loader's rejections), then every in-tree plugin from its static archive.
commands::PluginSource plugin_source(const CommonSettings& settings) {
  commands::PluginSource p;
  p.dirs = settings.plugin_dirs;
  p.install_dir = false;
  p.builtins = fuzz::all_plugins();
  return p;
}

}  // namespace mme::cli

namespace {

const char* const kTinyLlama = R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
  "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
  "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
  "tie_word_embeddings": false, "hidden_act": "silu"})";

const char* const kTinyDeepSeek = R"({"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"],
  "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 4,
  "num_attention_heads": 8, "num_key_value_heads": 8, "n_routed_experts": 8, "n_shared_experts": 1,
  "num_experts_per_tok": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1, "q_lora_rank": 64,
  "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "vocab_size": 1000,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "num_nextn_predict_layers": 1,
  "tie_word_embeddings": false, "hidden_act": "silu", "topk_method": "noaux_tc", "n_group": 4,
  "topk_group": 2, "scoring_func": "sigmoid"})";

const char* const kArgs =
    "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --group-query-attention --num-query-groups 2 "
    "--ffn-hidden-size 512 --swiglu --normalization RMSNorm --seq-length 1024 --max-position-embeddings 4096 "
    "--micro-batch-size 1 --global-batch-size 16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
    "--bf16 --use-distributed-optimizer --sequence-parallel --vocab-size 1000 --tokenizer-type NullTokenizer\n";

const char* const kSpec = R"(model:
  num_layers: 4
  hidden_size: 256
  num_attention_heads: 8
  num_query_groups: 2
  ffn_hidden_size: 512
  vocab_size: 1000
  max_position_embeddings: 4096
parallelism:
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 2
training:
  micro_batch_size: 1
  seq_length: 1024
infrastructure:
  world_size: 8
)";

const char* const kHardware =
    R"({"name": "FUZZ-X1", "memory_gib": 24, "aliases": ["x1"], "reserved_gib": 1, "hbm_bandwidth_gbps": 1000,
  "bf16_tflops": 100, "fp8_tflops": 200, "link_bandwidth_gbps": 100, "architecture": "hopper"})";

const char* const kCases =
    "model,test_case,golden,max_alloc_GiB_max,alloc_GiB_median,nodes_gpus,num-layers,hidden-size,"
    "num-attention-heads,ffn-hidden-size,seq-length,max-position-embeddings,micro-batch-size,"
    "tensor-model-parallel-size,pipeline-model-parallel-size,bf16,use-distributed-optimizer,vocab-size,"
    "tokenizer-type\n"
    "gpt,tiny_tp2,dgx_h100,2.5,1.5,1x8,4,256,8,1024,1024,4096,1,2,2,true,true,1000,NullTokenizer\n"
    "gpt,tiny_pp4,dgx_a100,3.5,2.0,1x8,4,256,8,1024,1024,4096,2,1,4,true,true,1000,NullTokenizer\n";

std::set<std::string> g_fixtures;  // top-level names of the sandbox, kept across runs

void write(const fs::path& p, std::string_view text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

void make_sandbox() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/mme-fuzz-cli-XXXXXX";
  if (!::mkdtemp(templ.data())) std::abort();
  const fs::path root = templ;
  write(root / "cfg.json", kTinyLlama);
  write(root / "moe.json", kTinyDeepSeek);
  write(root / "model" / "config.json", kTinyLlama);
  fs::create_directories(root / "emptydir");
  write(root / "empty.json", "");
  write(root / "array.json", "[1, 2, 3]");
  write(root / "args.txt", kArgs);
  write(root / "spec.yaml", kSpec);
  write(root / "hw.json", kHardware);
  write(root / "cases.csv", kCases);
  write(root / "plugins" / "broken.so", "not a library\n");
  write(root / "zoo" / "tiny--llama" / "config.json", kTinyLlama);
  write(root / "zoo" / "tiny--deepseek" / "config.json", kTinyDeepSeek);
  write(root / "hf" / "models--cache--tiny" / "refs" / "main", "0123abcd\n");
  write(root / "hf" / "models--cache--tiny" / "snapshots" / "0123abcd" / "config.json", kTinyLlama);
  for (const auto& e : fs::directory_iterator(root)) g_fixtures.insert(e.path().filename().string());
  if (::chdir(root.c_str()) != 0) std::abort();
  ::setenv("HOME", root.c_str(), 1);
  ::setenv("HF_HUB_OFFLINE", "1", 1);
  ::setenv("HF_HUB_CACHE", (root / "hf").c_str(), 1);
  ::setenv("MME_MODELS_PATH", (root / "zoo").c_str(), 1);
  ::setenv("NO_COLOR", "1", 1);
  for (const char* v : {"MME_PLUGIN_PATH", "MME_HARDWARE_PATH", "MME_HARDWARE_FILES", "HF_TOKEN", "HF_ENDPOINT"})
    ::unsetenv(v);
}

// Arguments that would leave the sandbox or measure the machine.
bool allowed(const std::string& a) {
  if (a.empty()) return true;
  if (a.front() == '/' || a.front() == '~') return false;
  if (a.find("..") != std::string::npos || a.find("=/") != std::string::npos || a.find("=~") != std::string::npos)
    return false;
  if (a.rfind("--threads", 0) == 0) return false;
  return true;
}

// What a run may leave behind: files it wrote (--html, --svg).
void clean_up() {
  std::error_code ec;
  std::vector<fs::path> extra;
  for (const auto& e : fs::directory_iterator(".", ec))
    if (!g_fixtures.count(e.path().filename().string())) extra.push_back(e.path());
  for (const auto& p : extra) fs::remove_all(p, ec);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  make_sandbox();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (text.find('\0') != std::string_view::npos) return -1;  // argv cannot hold NUL: not an input
  std::vector<std::string> args;
  std::stringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    if (!allowed(line)) return -1;
    args.push_back(std::move(line));
  }
  if (args.empty()) return -1;

  // As cli/main.cpp dispatches: an unknown command is exit 2, --help prints the command's help.
  const mme::cli::Invocation inv = mme::cli::parse_invocation(std::move(args));
  if (!inv.command || inv.wants_help) return 0;

  std::ostringstream out;
  std::streambuf* const saved = std::cout.rdbuf(out.rdbuf());
  const bool ok = mme::fuzz::run_checked("cli_args", [&] { (void)inv.command->run(inv.args); });
  std::cout.rdbuf(saved);
  std::cout.clear();
  clean_up();
  const bool csv_stream = inv.name == "plan" && std::find(inv.args.begin(), inv.args.end(), "--csv") != inv.args.end();
  if (!ok && !out.str().empty() && !csv_stream)
    mme::fuzz::finding("cli_args", "the command failed but wrote to stdout:\n" + out.str().substr(0, 400));
  return 0;
}
