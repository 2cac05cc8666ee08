// Every command of the seed tool's README, with `python scripts/estimate_from_hf.py` replaced
// by `mme estimate` (tests/seed_readme/commands.txt keeps the list): each exits 0, or, for the
// layouts Megatron-LM refuses, exits 4 with one error line that names a value that works. The
// seed's own defaults (ETP 1, 8 GPUs or the smallest count the layout allows) are checked
// against counts worked out by hand.
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mme/sdk/text.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

using test::run_mme;

struct SeedCommand {
  int line = 0;                   // where it starts in commands.txt
  std::vector<std::string> args;  // after `mme`
  bool to_file = false;           // "> result.json"
  std::string refused;            // "# expect 4: TEXT"
};

std::vector<SeedCommand> read_commands() {
  std::istringstream in(test::read_file(test::source_dir() / "tests" / "seed_readme" / "commands.txt"));
  std::map<std::string, std::string> vars;
  std::vector<SeedCommand> out;
  std::string line, pending;
  int n = 0, start = 0;
  const std::string seed = "python scripts/estimate_from_hf.py";
  while (std::getline(in, line)) {
    ++n;
    const std::string t = trim(line);
    if (pending.empty() && t.rfind("# expect 4:", 0) == 0) {
      EXPECT_FALSE(out.empty()) << "line " << n;
      if (!out.empty()) out.back().refused = trim(t.substr(11));
      continue;
    }
    if (pending.empty() && (t.empty() || t[0] == '#')) continue;
    if (pending.empty() && t.find('=') != std::string::npos && t.rfind(seed, 0) != 0) {
      const auto eq = t.find('=');
      std::string v = t.substr(eq + 1);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      vars[t.substr(0, eq)] = v;
      continue;
    }
    if (pending.empty()) start = n;
    std::string part = t;
    const auto comment = part.find("  #");
    if (comment != std::string::npos) part = trim(part.substr(0, comment));
    const bool more = !part.empty() && part.back() == '\\';
    if (more) part.pop_back();
    pending += " " + part;
    if (more) continue;
    SeedCommand c;
    c.line = start;
    std::istringstream words(pending);
    pending.clear();
    std::string w;
    std::vector<std::string> all;
    while (words >> w) all.push_back(w);
    EXPECT_GE(all.size(), 2u) << "line " << start;
    EXPECT_EQ(all[0] + " " + all[1], seed) << "line " << start;
    c.args.push_back("estimate");
    for (std::size_t i = 2; i < all.size(); ++i) {
      std::string a = all[i];
      if (a == ">") {
        c.to_file = true;
        ++i;
        continue;
      }
      if (!a.empty() && a[0] == '$') {
        EXPECT_TRUE(vars.count(a.substr(1))) << a << " at line " << start;
        a = vars[a.substr(1)];
      }
      if (a == "/path/to/config.json") a = (test::source_dir() / "tests" / "seed_readme" / "config.json").string();
      c.args.push_back(a);
    }
    out.push_back(c);
  }
  return out;
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char ch : s) n += ch == '\n';
  return n;
}

TEST(SeedReadme, EveryCommandWorksOrNamesAValueThatDoes) {
  const auto commands = read_commands();
  ASSERT_EQ(commands.size(), 18u);  // the seed README's 18 commands
  int refused = 0;
  for (const auto& c : commands) {
    SCOPED_TRACE("commands.txt line " + std::to_string(c.line));
    const auto r = run_mme(c.args);
    if (!c.refused.empty()) {
      ++refused;
      EXPECT_EQ(r.exit_code, 4) << r.err;
      EXPECT_TRUE(r.out.empty());
      EXPECT_EQ(count_lines(r.err), 1) << r.err;
      EXPECT_EQ(r.err.rfind("mme: error: ", 0), 0u) << r.err;
      EXPECT_NE(r.err.find(c.refused), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("mme plan "), std::string::npos) << r.err;
      continue;
    }
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("mme: error"), std::string::npos) << r.err;
    if (c.to_file) {
      const auto j = nlohmann::json::parse(r.out);  // one document, as `> result.json` keeps it
      EXPECT_EQ(j["schema_version"], 1);
    } else {
      EXPECT_NE(r.out.find("CONFIGURATION SUMMARY"), std::string::npos);
      EXPECT_NE(r.out.find("MEMORY ESTIMATION RESULTS"), std::string::npos);
      EXPECT_NE(r.out.find("Peak Memory per GPU: "), std::string::npos);
    }
  }
  EXPECT_EQ(refused, 2);  // the two Qwen3-235B-A22B layouts with 94 layers over --pp 4
}

TEST(SeedReadme, UnevenLayersOverPpNameTheSplitThatWorks) {
  // Qwen3-235B-A22B has 94 layers: over PP 4 the last stage takes 94 - 3 x 23 = 25.
  const auto r =
      run_mme({"estimate", "Qwen/Qwen3-235B-A22B", "--tp", "4", "--pp", "4", "--ep", "4", "--num-gpus", "128"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--num-layers-in-last-pipeline-stage 25"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mme plan Qwen/Qwen3-235B-A22B --num-gpus 128"), std::string::npos) << r.err;
  // ... and that split is accepted.
  const auto ok = run_mme({"estimate", "Qwen/Qwen3-235B-A22B", "--tp", "4", "--pp", "4", "--ep", "4", "--num-gpus",
                           "128", "--num-layers-in-last-pipeline-stage", "25", "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const auto j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j["stages"][3]["layers"], 25);
  EXPECT_EQ(j["stages"][0]["layers"], 23);
}

TEST(SeedReadme, AttentionHeadsByTpNameTheSizesThatWork) {
  // Qwen3-8B: 32 heads, 8 KV heads: TP 3 divides neither; 1, 2, 4 and 8 divide both, and 16
  // and 32 are multiples of the 8 groups (each rank keeps one, attention.py) that divide the heads
  // and linear_qkv's (32 + 16) x 128 outputs.
  const auto r = run_mme({"estimate", "Qwen/Qwen3-8B", "--tp", "3", "--num-gpus", "6"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("1, 2, 4, 8, 16 or 32"), std::string::npos) << r.err;
}

nlohmann::json estimate_json(std::vector<std::string> args) {
  args.insert(args.begin(), "estimate");
  args.push_back("--json");
  const auto r = run_mme(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(SeedReadme, EtpDefaultsToOneAsTheSeedAndSpecFiles) {
  // TP 4, PP 2, EP 4 on 16 GPUs: ETP 1 gives EDP = 16 / (1 x 4 x 2) = 2; ETP = TP = 4 would
  // need 4 x 4 x 2 = 32 GPUs.
  const auto j = estimate_json({"Qwen/Qwen3-30B-A3B", "--tp", "4", "--pp", "2", "--ep", "4", "--num-gpus", "16"});
  EXPECT_EQ(j["setup"]["etp"], 1);
  EXPECT_EQ(j["setup"]["expert_dp"], 2);
  const auto text =
      run_mme({"estimate", "Qwen/Qwen3-30B-A3B", "--tp", "4", "--pp", "2", "--ep", "4", "--num-gpus", "16"});
  EXPECT_NE(text.out.find("ETP=1 (default; a Megatron-LM launch that leaves it unset uses ETP=TP=4: pass --etp 4 to "
                          "match)"),
            std::string::npos)
      << text.out;
  // --etp 4 is Megatron-LM's default, and then 16 GPUs do not divide.
  const auto mega = run_mme(
      {"estimate", "Qwen/Qwen3-30B-A3B", "--tp", "4", "--pp", "2", "--ep", "4", "--etp", "4", "--num-gpus", "16"});
  EXPECT_EQ(mega.exit_code, 4);
  EXPECT_NE(mega.err.find("ETP x EP x PP = 4 x 4 x 2"), std::string::npos) << mega.err;
}

TEST(SeedReadme, MegatronLaunchLinesKeepEtpEqualToTp) {
  const std::string line =
      "--num-layers 4 --hidden-size 2048 --num-attention-heads 16 --group-query-attention --num-query-groups 8 "
      "--ffn-hidden-size 5440 --moe-ffn-hidden-size 5440 --num-experts 8 --moe-router-topk 2 --swiglu "
      "--normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights "
      "--disable-bias-linear --vocab-size 32000 --seq-length 4096 --max-position-embeddings 4096 "
      "--use-distributed-optimizer --bf16 --tensor-model-parallel-size 2 --sequence-parallel";
  const auto j = estimate_json({"--megatron-args", line, "--num-gpus", "8"});
  EXPECT_EQ(j["setup"]["etp"], 2);
  EXPECT_EQ(j["setup"]["expert_dp"], 4);  // 8 / (ETP 2 x EP 1 x PP 1)
}

TEST(SeedReadme, GpuCountDefaultsToEightOrTheSmallestTheLayoutAllows) {
  // TP 2 x PP 2 = 4 divides 8: the seed's default.
  auto j = estimate_json({"Qwen/Qwen3-8B", "--tp", "2", "--pp", "2"});
  EXPECT_EQ(j["setup"]["num_gpus"], 8);
  EXPECT_EQ(j["setup"]["dp"], 2);
  // DeepSeek-V3 TP 4, PP 4, EP 8, ETP 1: TP x PP x CP = 16, ETP x EP x PP = 32, lcm 32.
  j = estimate_json(
      {"deepseek-ai/DeepSeek-V3", "--tp", "4", "--pp", "4", "--ep", "8", "--num-layers-in-last-pipeline-stage", "16"});
  EXPECT_EQ(j["setup"]["num_gpus"], 32);
  EXPECT_EQ(j["setup"]["dp"], 2);
  EXPECT_EQ(j["setup"]["expert_dp"], 1);
  // TP 8, PP 2, EP 16: 16 and 32, lcm 32. Megatron's ETP = TP = 8 would make it 8 x 16 x 2 = 256.
  j = estimate_json(
      {"deepseek-ai/DeepSeek-V3", "--tp", "8", "--pp", "2", "--ep", "16", "--num-layers-in-last-pipeline-stage", "31"});
  EXPECT_EQ(j["setup"]["num_gpus"], 32);
  j = estimate_json({"deepseek-ai/DeepSeek-V3", "--tp", "8", "--pp", "2", "--ep", "16", "--etp", "8",
                     "--num-layers-in-last-pipeline-stage", "31"});
  EXPECT_EQ(j["setup"]["num_gpus"], 256);
  const auto r = run_mme({"estimate", "deepseek-ai/DeepSeek-V3", "--tp", "4", "--pp", "4", "--ep", "8",
                          "--num-layers-in-last-pipeline-stage", "16"});
  EXPECT_NE(r.out.find("Total GPUs: 32 (default"), std::string::npos) << r.out;
  const auto eight = run_mme({"estimate", "Qwen/Qwen3-8B", "--tp", "2"});
  EXPECT_NE(eight.out.find("Total GPUs: 8 (default"), std::string::npos) << eight.out;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

TEST(SeedUsers, OverheadPerGpuReplacesTheProfilesReserve) {
  // H100-SXM-80GB: 85520809984 bytes. --headroom 0 --overhead-per-gpu 2 leaves
  // 85520809984 - 2 x 2^30 = 83373326336; --overhead-per-gpu 0 leaves all of it (the seed's
  // "< 80 GB" rule).
  auto j = estimate_json({"Qwen/Qwen3-8B", "--gpu", "H100", "--headroom", "0", "--overhead-per-gpu", "2"});
  EXPECT_EQ(j["fits"][0]["capacity_bytes"], 85520809984LL);
  EXPECT_EQ(j["fits"][0]["usable_bytes"], 83373326336LL);
  j = estimate_json({"Qwen/Qwen3-8B", "--gpu", "H100", "--headroom", "0", "--overhead-per-gpu", "0"});
  EXPECT_EQ(j["fits"][0]["usable_bytes"], 85520809984LL);
  // The text names the usable memory, the reserve and the headroom of each GPU.
  const auto r = run_mme({"estimate", "Qwen/Qwen3-8B", "--headroom", "5%", "--overhead-per-gpu", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 85520809984 x 0.95 - 2 x 2^30 = 79097285836.8 bytes = 73.67 GiB; 85520809984 bytes = 79.65 GiB.
  EXPECT_NE(r.out.find("73.67 GiB usable of 79.65, 2.00 GiB reserved + 5 % headroom"), std::string::npos) << r.out;
  const auto bad = run_mme({"estimate", "Qwen/Qwen3-8B", "--overhead-per-gpu", "lots"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(bad.out.empty());
  EXPECT_EQ(count_lines(bad.err), 1) << bad.err;
}

TEST(SeedUsers, DoesNotFitNamesChangesThatDoFit) {
  const std::vector<std::string> base = {"Qwen/Qwen3-8B", "--num-gpus", "8", "--seq-length", "8192", "--gpu", "H100"};
  const auto j = estimate_json(base);
  ASSERT_FALSE(j["fits"][0]["fits"].get<bool>());
  ASSERT_FALSE(j["next_steps"].empty());
  for (const auto& st : j["next_steps"]) {
    const std::string change = st["change"];
    SCOPED_TRACE(change);
    // Never advice already taken: the micro-batch is 1 already.
    EXPECT_EQ(change.find("--micro-batch-size"), std::string::npos);
    // Each change, applied, fits the GPU with the bytes it promised.
    auto args = base;
    for (const auto& w : words(change)) args.push_back(w);
    const auto after = estimate_json(args);
    EXPECT_TRUE(after["fits"][0]["fits"].get<bool>());
    EXPECT_EQ(after["fits"][0]["needed_bytes"], st["needed_bytes"]);
    EXPECT_EQ(st["fits"], "H100-SXM-80GB");
  }
  const auto text = run_mme({"estimate", "Qwen/Qwen3-8B", "--num-gpus", "8", "--seq-length", "8192", "--gpu", "H100"});
  EXPECT_NE(text.out.find("Next step"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(": fits H100-SXM-80GB"), std::string::npos) << text.out;
}

TEST(SeedUsers, SilentGapsBecomeWarnings) {
  // Qwen3-8B's config has max_position_embeddings 40960 (rotary): a longer sequence estimates
  // with a warning.
  auto r = run_mme({"estimate", "Qwen/Qwen3-8B", "--seq-length", "65536"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: --seq-length 65536 is beyond the model's max_position_embeddings 40960"),
            std::string::npos)
      << r.err;
  r = run_mme({"estimate", "Qwen/Qwen3-8B", "--recompute-num-layers", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--recompute-num-layers 2 changes nothing without --recompute-granularity full"),
            std::string::npos)
      << r.err;
  r = run_mme({"estimate", "Qwen/Qwen3-8B", "--recompute-num-layers", "2", "--recompute-granularity", "full"});
  EXPECT_EQ(r.err.find("changes nothing"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mme
