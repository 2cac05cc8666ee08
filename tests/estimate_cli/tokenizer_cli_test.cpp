// The vocabulary of a launch line, as Megatron-LM's tokenizers count it (build_tokenizer.py):
// GPT2BPETokenizer's --vocab-file, HuggingFaceTokenizer's --tokenizer-model, and what mme says
// when it cannot read them here.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

using test::run_mme;

// --tokenizer-type HuggingFaceTokenizer --tokenizer-model X: the vocabulary of X's config.json
// when X is bundled, cached or a local folder (Qwen3-8B: vocab_size 151936), said in the
// assumptions; otherwise GPT-2's with a warning naming X. Megatron-LM does not read --vocab-size
// with this tokenizer: X's count replaces it, and without one it stands as a stated assumption.
TEST(EstimateCli, MegatronHuggingFaceTokenizerTakesTheVocabularyOfItsModel) {
  const std::string base =
      "torchrun --nproc_per_node 2 pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 "
      "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --tensor-model-parallel-size 2 "
      "--tokenizer-type HuggingFaceTokenizer ";
  auto json_of = [](const test::RunResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  };
  auto has = [](const nlohmann::json& list, const std::string& part) {
    for (const auto& x : list)
      if (x.get<std::string>().find(part) != std::string::npos) return true;
    return false;
  };
  const auto bundled = run_mme({"estimate", "--megatron-args", base + "--tokenizer-model Qwen/Qwen3-8B", "--json"});
  EXPECT_EQ(bundled.err, "");
  const auto j = json_of(bundled);
  // 151936 padded to a multiple of 128 x TP = 256: 594 x 256.
  EXPECT_EQ(j["model"]["padded_vocab_size"], 152064);
  EXPECT_TRUE(has(j["assumptions"], "vocabulary 151936 from the config.json of --tokenizer-model Qwen/Qwen3-8B ("))
      << j["assumptions"];
  EXPECT_EQ(j["warnings"], nlohmann::json::array());
  const auto explicit_vocab = json_of(run_mme({"estimate", "--megatron-args", base + "--vocab-size 151936", "--json"}));
  EXPECT_EQ(j["peak"], explicit_vocab["peak"]);

  // A hub id in the Hugging Face cache (its layout: refs/main names the snapshot).
  test::TempDir cache;
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  const auto repo = cache.path() / "models--cached-org--tok";
  test::write_file(repo / "refs" / "main", commit);
  std::filesystem::create_directories(repo / "snapshots" / commit);
  test::write_file(repo / "snapshots" / commit / "config.json",
                   R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1,
                       "intermediate_size": 128, "vocab_size": 32001, "rms_norm_eps": 1e-5})");
  const auto cached =
      json_of(run_mme({"estimate", "--megatron-args", base + "--tokenizer-model cached-org/tok", "--json"},
                      {{"HF_HUB_CACHE", cache.path().string()}, {"HF_HUB_OFFLINE", "1"}}));
  EXPECT_EQ(cached["model"]["padded_vocab_size"], 32256);  // 32001 -> 126 x 256
  EXPECT_TRUE(has(cached["assumptions"], "vocabulary 32001 from the config.json of --tokenizer-model cached-org/tok"));

  // Nowhere to be found: GPT-2's 50257 (padded to 50432), and a warning that names the tokenizer.
  const auto unknown = run_mme({"estimate", "--megatron-args", base + "--tokenizer-model /nowhere/tok", "--json"});
  const auto u = json_of(unknown);
  EXPECT_EQ(u["model"]["padded_vocab_size"], 50432);
  EXPECT_TRUE(has(u["warnings"], "HuggingFaceTokenizer (--tokenizer-model /nowhere/tok: no config.json"))
      << u["warnings"];
  EXPECT_FALSE(has(u["assumptions"], "from the config.json of --tokenizer-model"));

  // Megatron-LM does not read --vocab-size with this tokenizer: the model's count replaces it,
  // said; with no config.json to count, --vocab-size stands (1000 -> 1024), said too.
  const auto given = json_of(
      run_mme({"estimate", "--megatron-args", base + "--tokenizer-model Qwen/Qwen3-8B --vocab-size 1000", "--json"}));
  EXPECT_EQ(given["model"]["padded_vocab_size"], 152064);
  EXPECT_TRUE(has(given["assumptions"], "not --vocab-size 1000, which it does not read")) << given["assumptions"];
  const auto kept = json_of(
      run_mme({"estimate", "--megatron-args", base + "--tokenizer-model /nowhere/tok --vocab-size 1000", "--json"}));
  EXPECT_EQ(kept["model"]["padded_vocab_size"], 1024);
  EXPECT_TRUE(has(kept["assumptions"],
                  "--tokenizer-model /nowhere/tok has no config.json here; --vocab-size 1000 "
                  "taken as the tokenizer's count"))
      << kept["assumptions"];
  EXPECT_EQ(kept["warnings"], nlohmann::json::array());
  // A launch script that leaves the tokenizer model unknown: --vocab-size stands, said.
  test::TempDir dir;
  test::write_file(dir.path() / "train.sh", base + "--tokenizer-model $1 --vocab-size 1000\n");
  const auto script =
      json_of(run_mme({"estimate", "--megatron-args-file", (dir.path() / "train.sh").string(), "--json"}));
  EXPECT_EQ(script["model"]["padded_vocab_size"], 1024);
  EXPECT_TRUE(has(script["assumptions"], "is not known (")) << script["assumptions"];
}

// GPT2BPETokenizer (Megatron-LM's default here) counts the entries of --vocab-file plus the special
// tokens the file lacks (megatron_hf_tokenizer.py, huggingface_tokenizer.py vocab_size), whatever
// --vocab-size says. A file mme cannot read leaves --vocab-size, else GPT-2's 50257, as a stated
// assumption.
TEST(EstimateCli, MegatronGpt2TokenizerCountsItsVocabularyFile) {
  const std::string base =
      "torchrun --nproc_per_node 2 pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 "
      "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --tensor-model-parallel-size 2 ";
  test::TempDir dir;
  nlohmann::json vocab = nlohmann::json::object();
  for (int i = 0; i < 1023; ++i) vocab["t" + std::to_string(i)] = i;
  vocab["<|endoftext|>"] = 1023;
  test::write_file(dir.path() / "vocab.json", vocab.dump());
  test::write_file(dir.path() / "list.json", "[1, 2]");
  const std::string file = (dir.path() / "vocab.json").string();
  auto run = [&](const std::string& extra) {
    const auto r = run_mme({"estimate", "--megatron-args", base + extra, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  };
  auto said = [](const nlohmann::json& j, const std::string& part) {
    for (const auto& x : j["assumptions"])
      if (x.get<std::string>().find(part) != std::string::npos) return true;
    return false;
  };
  // 1024 entries: already a multiple of 128 x TP = 256.
  const auto counted = run("--vocab-file " + file);
  EXPECT_EQ(counted["model"]["padded_vocab_size"], 1024);
  EXPECT_TRUE(said(counted, "vocabulary 1024: the entries of --vocab-file " + file)) << counted["assumptions"];
  // One special token the file lacks makes 1025, padded to 1280; one it has adds nothing.
  const auto special = run("--vocab-file " + file + " --tokenizer-special-tokens '<|endoftext|>' '<pad>'");
  EXPECT_EQ(special["model"]["padded_vocab_size"], 1280);
  EXPECT_TRUE(said(special, "vocabulary 1025: the entries of --vocab-file"));
  // Not readable here, or not a vocabulary: GPT-2's 50257 (padded to 50432), said.
  for (const auto& bad : {(dir.path() / "missing.json").string(), (dir.path() / "list.json").string()}) {
    const auto j = run("--vocab-file " + bad);
    EXPECT_EQ(j["model"]["padded_vocab_size"], 50432);
    EXPECT_TRUE(said(j, "GPT2BPETokenizer: --vocab-file " + bad)) << j["assumptions"];
    EXPECT_TRUE(said(j, "GPT-2's 50257 entries assumed"));
  }
  // Megatron-LM does not read --vocab-size with this tokenizer (build_tokenizer.py pads the
  // tokenizer's own count): the file's 1024 replace it, said; without a readable file it stands.
  const auto given = run("--vocab-file " + file + " --vocab-size 2000");
  EXPECT_EQ(given["model"]["padded_vocab_size"], 1024);
  EXPECT_TRUE(said(given, "vocabulary 1024: the entries of --vocab-file " + file +
                              ", as Megatron-LM's GPT2BPETokenizer counts them (it does not read --vocab-size 2000)"))
      << given["assumptions"];
  const auto unread = run("--vocab-file " + (dir.path() / "missing.json").string() + " --vocab-size 2000");
  EXPECT_EQ(unread["model"]["padded_vocab_size"], 2048);
  EXPECT_TRUE(said(unread, "cannot be read here")) << unread["assumptions"];
  EXPECT_TRUE(said(unread, "--vocab-size 2000 taken as the tokenizer's count"));
}

// --padded-vocab-size (TokenizerConfig.padded_vocab_size): the model holds exactly that many rows,
// whatever the tokenizer, --vocab-size and --make-vocab-size-divisible-by say (build_tokenizer.py
// keeps a given one, training/models/gpt.py pads nothing), split over TP, which must divide it.
TEST(EstimateCli, MegatronPaddedVocabSizeIsTheModelsRows) {
  const std::string base =
      "torchrun --nproc_per_node 4 pretrain_gpt.py --num-layers 2 --hidden-size 1024 --num-attention-heads 8 "
      "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --tensor-model-parallel-size 4 ";
  auto run = [&](const std::string& extra) { return run_mme({"estimate", "--megatron-args", base + extra, "--json"}); };
  const auto exact =
      run("--tokenizer-type NullTokenizer --vocab-size 1000 --make-vocab-size-divisible-by 128 "
          "--padded-vocab-size 4100");
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  const auto j = nlohmann::json::parse(exact.out);
  EXPECT_EQ(j["model"]["padded_vocab_size"], 4100);  // 1001 would pad to 1024, 4100 to 4608
  EXPECT_EQ(j["setup"]["make_vocab_size_divisible_by"], 1);
  EXPECT_EQ(j["warnings"], nlohmann::json::array());
  // The same run as mme's own flags describe it: 4100 rows padded to a multiple of 1 x TP 4.
  const auto own = run("--tokenizer-type NullTokenizer --vocab-size 4099 --make-vocab-size-divisible-by 1");
  ASSERT_EQ(own.exit_code, 0) << own.err;
  EXPECT_EQ(nlohmann::json::parse(own.out)["peak"], j["peak"]);
  // A tokenizer's vocabulary file is not read then.
  const auto gpt2 = run("--vocab-file /nowhere/vocab.json --padded-vocab-size 4100");
  ASSERT_EQ(gpt2.exit_code, 0) << gpt2.err;
  EXPECT_EQ(nlohmann::json::parse(gpt2.out)["model"]["padded_vocab_size"], 4100);
  EXPECT_EQ(nlohmann::json::parse(gpt2.out)["assumptions"].dump().find("vocab-file"), std::string::npos);
  const auto odd = run("--padded-vocab-size 4098");
  EXPECT_NE(odd.exit_code, 0);
  EXPECT_NE(odd.err.find("--padded-vocab-size 4098 is not divisible by --tensor-model-parallel-size 4: Megatron-LM's "
                         "VocabParallelEmbedding divides the vocabulary over TP"),
            std::string::npos)
      << odd.err;
}

}  // namespace
}  // namespace mme
