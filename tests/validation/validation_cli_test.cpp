// `mme validate` end to end: a real-runs file whose row must carry exactly the peak of
// `mme estimate --json` for the same arguments, the text report's groups and statistics,
// --from-log against the estimate of each rank's stage, and the bad inputs (exit code, one
// error line, empty stdout).
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

using nlohmann::json;
using test::run_mme;
using test::RunResult;

std::string describe(const RunResult& r) {
  return fmt::format("exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}", r.exit_code, r.out, r.err);
}

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' lacks '" << (needle) << "'"

const std::string kTinyFlags =
    "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 4096 "
    "--micro-batch-size 2 --vocab-size 1000 --tokenizer-type NullTokenizer --pipeline-model-parallel-size 2 --bf16";

const std::string kHeader = "id,source,model,metric,measured_gib,rank_note,mme_args,notes\n";

json peak_of_estimate(const std::vector<std::string>& args) {
  std::vector<std::string> a{"estimate"};
  a.insert(a.end(), args.begin(), args.end());
  a.push_back("--json");
  const RunResult r = run_mme(a);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  return json::parse(r.out).at("peak");
}

void expect_error(const RunResult& r, int code, const std::string& mentions) {
  EXPECT_EQ(r.exit_code, code) << describe(r);
  EXPECT_EQ(r.out, "") << describe(r);
  EXPECT_EQ(r.err.rfind("mme: error: ", 0), 0u) << describe(r);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << describe(r);
  EXPECT_CONTAINS(r.err, mentions);
}

TEST(ValidateRealRuns, RowsEqualTheEstimateOfTheSameArguments) {
  test::TempDir dir;
  const std::string csv = (dir.path() / "runs.csv").string();
  test::write_file(csv, kHeader + "flags,test,tiny,max_allocated,1.0,,\"--megatron-args '" + kTinyFlags +
                            "' --num-gpus 4\",\n"
                            "bundled,test,Qwen3-0.6B,max_allocated,20.0,,Qwen/Qwen3-0.6B --tp 2 --num-gpus 8,\n"
                            "other,test,Qwen3-0.6B,other,30.0,,Qwen/Qwen3-0.6B --pp 2 --num-gpus 8,\n"
                            "broken,test,x,max_allocated,2.0,,Qwen/Qwen3-0.6B --tp 0,\n");
  const RunResult r = run_mme({"validate", csv, "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("format"), "real_runs");
  ASSERT_EQ(doc.at("cases").size(), 3u);  // the max_allocated rows
  ASSERT_EQ(doc.at("other").at("cases").size(), 1u);
  const json& flags = doc["cases"][0];
  EXPECT_EQ(flags.at("id"), "flags");
  EXPECT_EQ(flags.at("status"), "ok") << flags.dump();
  const json p1 = peak_of_estimate({"--megatron-args", kTinyFlags, "--num-gpus", "4"});
  EXPECT_DOUBLE_EQ(flags.at("estimated_peak_gib").get<double>(),
                   p1.at("total_bytes").get<double>() / (1024.0 * 1024 * 1024));
  EXPECT_EQ(flags.at("stage"), p1.at("pp_rank"));
  const json& bundled = doc["cases"][1];
  const json p2 = peak_of_estimate({"Qwen/Qwen3-0.6B", "--tp", "2", "--num-gpus", "8"});
  EXPECT_DOUBLE_EQ(bundled.at("estimated_peak_gib").get<double>(),
                   p2.at("total_bytes").get<double>() / (1024.0 * 1024 * 1024));
  EXPECT_EQ(bundled.at("counted"), true);
  const json& broken = doc["cases"][2];
  EXPECT_EQ(broken.at("status"), "error");
  EXPECT_CONTAINS(broken.at("reason").get<std::string>(), "--tp: expected a positive integer, got 0");
  EXPECT_TRUE(broken.at("estimated_peak_gib").is_null());
  EXPECT_EQ(doc["other"]["cases"][0].at("counted"), false);
  // Only the max_allocated rows count; the other row has its own summary.
  const json& s = doc.at("summary");
  EXPECT_EQ(s.at("total"), 3);
  EXPECT_EQ(s.at("evaluated"), 2);
  EXPECT_EQ(s.at("errors"), 1);
  EXPECT_EQ(s.at("peak").at("count"), 2);
  EXPECT_EQ(s.at("by_size").size(), 3u);
  EXPECT_EQ(s["by_size"][0].at("bucket"), "<5GiB");
  EXPECT_EQ(s["by_size"][0].at("count"), 1);  // measured 1.0
  EXPECT_EQ(s["by_size"][1].at("count"), 1);  // measured 20.0
  EXPECT_TRUE(s["by_size"][2].at("max_gib").is_null());
  EXPECT_EQ(s.at("signed").at("count"), 2);
  EXPECT_EQ(s.at("bound").at("count"), 2);
  EXPECT_EQ(doc["other"]["summary"].at("evaluated"), 1);

  const RunResult text = run_mme({"validate", csv});
  ASSERT_EQ(text.exit_code, 0) << describe(text);
  EXPECT_CONTAINS(text.out, "metric other (not clearly the peak; reported, not counted)");
  EXPECT_CONTAINS(text.out, "broken");
  EXPECT_CONTAINS(text.out, "error: --tp: expected a positive integer, got 0");
  EXPECT_CONTAINS(text.out, "peak signed error");
  EXPECT_CONTAINS(text.out, "bound coverage");
  EXPECT_CONTAINS(text.out, "peak |error|, 5-40GiB");
}

TEST(ValidateRealRuns, TheShippedFileRuns) {
  const RunResult r =
      run_mme({"validate", (test::source_dir() / "bench" / "accuracy" / "real_runs.csv").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = json::parse(r.out);
  for (const auto* group : {&doc.at("cases"), &doc.at("other").at("cases")})
    for (const auto& c : *group) EXPECT_EQ(c.at("status"), "ok") << c.dump();
  EXPECT_GT(doc.at("summary").at("evaluated").get<int>(), 0);
}

TEST(ValidateFunctional, SummaryHasTheNewKeysAndKeepsTheOldOnes) {
  test::TempDir dir;
  const std::string csv = (dir.path() / "cases.csv").string();
  test::write_file(csv,
                   "model,test_case,golden,max_alloc_GiB_max,alloc_GiB_median,nodes_gpus,num-layers,hidden-size,"
                   "num-attention-heads,seq-length,max-position-embeddings,micro-batch-size,vocab-size,tokenizer-type\n"
                   "gpt,tiny,dgx_h100,2.5,1.5,1x8,4,256,8,1024,4096,1,1000,NullTokenizer\n");
  const RunResult r = run_mme({"validate", csv, "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json s = json::parse(r.out).at("summary");
  for (const char* key : {"total", "evaluated", "skipped", "errors", "peak", "static", "peak_ge_5gib",
                          "megatron_theoretical_peak", "seed_tool_peak", "by_size", "signed", "bound"})
    EXPECT_TRUE(s.contains(key)) << key;
  EXPECT_EQ(s.at("bound").at("count"), 1);
}

// A launch script and a log written here; the values in the log are the expected measurements.
TEST(ValidateFromLog, PerRankAgainstItsStage) {
  test::TempDir dir;
  const std::string launch = (dir.path() / "launch.sh").string(), log = (dir.path() / "train.log").string();
  test::write_file(launch, "torchrun --nproc-per-node 4 pretrain_gpt.py \\\n  " + kTinyFlags + "\n");
  test::write_file(log,
                   " iteration        1/      10 | lm loss: 1.0E+01\n"
                   "[Rank 0] (after 1 iterations) memory (MB) | allocated: 100.00 | max allocated: 300.00 | "
                   "reserved: 400.00 | max reserved: 400.00\n"
                   "[Rank 2] (after 1 iterations) memory (MB) | allocated: 100.00 | max allocated: 250.00 | "
                   "reserved: 400.00 | max reserved: 400.00\n"
                   "[Rank 2] (after 2 iterations) memory (MB) | allocated: 120.00 | max allocated: 512.00 | "
                   "reserved: 600.00 | max reserved: 600.00\n");
  const RunResult r =
      run_mme({"validate", "--from-log", log, "--megatron-args-file", launch, "--num-gpus", "4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = json::parse(r.out);
  const json est = json::parse(run_mme({"estimate", "--megatron-args-file", launch, "--num-gpus", "4", "--json"}).out);
  ASSERT_EQ(doc.at("ranks").size(), 2u);
  const json& r0 = doc["ranks"][0];
  const json& r2 = doc["ranks"][1];
  EXPECT_EQ(r0.at("rank"), 0);
  EXPECT_EQ(r0.at("stage"), 0);
  EXPECT_DOUBLE_EQ(r0.at("measured_max_allocated_gib").get<double>(), 300.0 / 1024);
  EXPECT_EQ(r2.at("rank"), 2);
  EXPECT_EQ(r2.at("stage"), 1);  // 4 GPUs, PP 2: ranks 2 and 3 are the last stage
  EXPECT_EQ(r2.at("reports"), 2);
  EXPECT_DOUBLE_EQ(r2.at("measured_max_allocated_gib").get<double>(), 512.0 / 1024);
  EXPECT_DOUBLE_EQ(r2.at("measured_allocated_gib").get<double>(), 120.0 / 1024);
  for (int i = 0; i < 2; ++i)
    EXPECT_DOUBLE_EQ(doc["ranks"][i].at("estimated_peak_gib").get<double>(),
                     est.at("stages")[i].at("total_bytes").get<double>() / (1024.0 * 1024 * 1024));

  const RunResult text = run_mme({"validate", "--from-log", log, "--megatron-args", kTinyFlags, "--num-gpus", "4"});
  ASSERT_EQ(text.exit_code, 0) << describe(text);
  EXPECT_CONTAINS(text.out, "MAX ALLOC");
  EXPECT_CONTAINS(text.out, "3 memory lines");
}

TEST(ValidateFromLog, ScalarLinesAreTheLastStage) {
  test::TempDir dir;
  const std::string log = (dir.path() / "tb.log").string();
  test::write_file(log, "mem-allocated-bytes: 104857600\nmem-max-allocated-bytes: 536870912\n");
  const RunResult r =
      run_mme({"validate", "--from-log", log, "--megatron-args", kTinyFlags, "--num-gpus", "4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc.at("ranks").size(), 1u);
  EXPECT_TRUE(doc["ranks"][0].at("rank").is_null());
  EXPECT_EQ(doc["ranks"][0].at("stage"), 1);
  EXPECT_DOUBLE_EQ(doc["ranks"][0].at("measured_max_allocated_gib").get<double>(), 0.5);
}

TEST(ValidateBadInputs, OneErrorLineAndTheDocumentedCode) {
  test::TempDir dir;
  const std::string log = (dir.path() / "train.log").string(), nolines = (dir.path() / "plain.log").string(),
                    badnum = (dir.path() / "bad.log").string(), cols = (dir.path() / "cols.csv").string(),
                    metric = (dir.path() / "metric.csv").string();
  test::write_file(log, "[Rank 9] (after 1 iterations) memory (MB) | allocated: 1 | max allocated: 2 | reserved: 3\n");
  test::write_file(nolines, "iteration 1 | lm loss: 3.0\n");
  test::write_file(badnum, "[Rank 0] (after 1 iterations) memory (MB) | allocated: 1 | max allocated: two\n");
  test::write_file(cols, "name,value\na,1\n");
  test::write_file(metric, kHeader + "r,s,m,peak,1.0,,Qwen/Qwen3-0.6B,\n");
  const std::vector<std::string> run{"--megatron-args", kTinyFlags, "--num-gpus", "4"};
  auto with_run = [&](std::vector<std::string> a) {
    a.insert(a.end(), run.begin(), run.end());
    return a;
  };
  for (bool json_out : {false, true}) {
    auto go = [&](std::vector<std::string> a) {
      if (json_out) a.push_back("--json");
      return run_mme(a);
    };
    expect_error(go(with_run({"validate", "--from-log", log})), 3, "rank 9 is beyond the world size of 4 GPUs");
    expect_error(go(with_run({"validate", "--from-log", nolines})), 3, "no memory lines found: looked for");
    expect_error(go(with_run({"validate", "--from-log", badnum})), 3, "'two' after 'max allocated:' is not");
    expect_error(go(with_run({"validate", "--from-log", (dir.path() / "missing.log").string()})), 6,
                 "missing.log: no such file");
    expect_error(go({"validate", "--from-log", log}), 2, "validate --from-log needs a MODEL");
    expect_error(go({"validate", cols}), 3, "unknown set of columns (name, value)");
    expect_error(go({"validate", metric}), 3, "metric 'peak' is neither max_allocated nor other");
    expect_error(go({"validate", cols, "--tp", "2"}), 2, "--tp applies to --from-log");
    expect_error(go(with_run({"validate", "--from-log", log, "--golden", "x"})), 2, "--golden filters CSV rows");
  }
}

}  // namespace
}  // namespace mme

namespace mme {
namespace {

// The ratchet on the measured real-size runs (docs/accuracy.md, "Results"): the error on the
// counted (max_allocated) rows may not get worse, no more rows may fall more than 3 % or 5 %
// under, and the bound may not cover fewer of them. The targets (issue 28): median <= 2 %,
// p90 <= 4 %, none more than 3 % under, the bound on every row.
TEST(ValidateRealRuns, TheBundledRealRunsDoNotRegress) {
  constexpr double kDocumentedMedian = 0.13, kDocumentedP90 = 0.93, kSlack = 0.05;
  constexpr std::size_t kDocumentedCovered = 22, kDocumentedUnder3 = 1, kDocumentedUnder5 = 1;
  const RunResult r =
      test::run_mme({"validate", (test::source_dir() / "bench" / "accuracy" / "real_runs.csv").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = json::parse(r.out);
  const json& s = doc.at("summary");
  EXPECT_EQ(s.at("evaluated").get<std::size_t>(), 25u);
  EXPECT_LE(s.at("peak").at("median_abs_pct").get<double>(), kDocumentedMedian + kSlack);
  EXPECT_LE(s.at("peak").at("p90_abs_pct").get<double>(), kDocumentedP90 + kSlack);
  EXPECT_GE(s.at("bound").at("covered").get<std::size_t>(), kDocumentedCovered);
  EXPECT_EQ(s.at("bound").at("exceeded").get<std::size_t>() + s.at("bound").at("covered").get<std::size_t>(), 25u);
  EXPECT_LE(s.at("signed").at("under").get<std::size_t>(), kDocumentedUnder5);
  std::size_t under3 = 0;
  // Iterate over the kept document: a range-for over json::parse(...).at(...) would walk a
  // member of a temporary already destroyed (AddressSanitizer: heap-use-after-free).
  for (const auto& c : doc.at("cases"))
    if (c.at("status") == "ok" && c.at("peak_error_pct").get<double>() < -3.0) ++under3;
  EXPECT_LE(under3, kDocumentedUnder3);
}

// The ratchet on the reserved memory of the 23 B200 rows that measured it (docs/accuracy.md,
// "Reserved memory"): the |error| against the measured reserved, the rows under it, the
// allocator's share (reserved - peak) and the rows the device bound's reserved part covers may
// not get worse.
TEST(ValidateRealRuns, TheReservedMemoryDoesNotRegress) {
  // TE's in-place loss (language_model.cpp) moved the allocator share of the loss stages both ways
  // (the point estimate: median 1.62 -> 1.74 %, 15 -> 16 rows under, the share's error 0.83 ->
  // 1.22 GiB) and the bound up (14 -> 20 rows covered, the largest miss 1.6 -> 0.75 %); the
  // Ulysses exchange's own stream (ActTerm::side_stream) took the context-parallel rows up (median
  // 1.64 %, 15 rows under, the share's error 1.02 GiB); docs/accuracy.md, "Reserved memory".
  constexpr double kDocumentedMedian = 1.64, kDocumentedGapGib = 1.02, kDocumentedBoundExcess = 0.75, kSlack = 0.05;
  constexpr std::size_t kDocumentedUnder = 15, kDocumentedBoundCovered = 20;
  const RunResult r =
      test::run_mme({"validate", (test::source_dir() / "bench" / "accuracy" / "real_runs.csv").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json res = json::parse(r.out).at("summary").at("reserved");
  EXPECT_EQ(res.at("count").get<std::size_t>(), 23u);
  EXPECT_LE(res.at("median_abs_pct").get<double>(), kDocumentedMedian + kSlack);
  EXPECT_LE(res.at("under").get<std::size_t>(), kDocumentedUnder);
  EXPECT_LE(res.at("gap_error_median_gib").get<double>(), kDocumentedGapGib + kSlack);
  EXPECT_GE(res.at("bound").at("covered").get<std::size_t>(), kDocumentedBoundCovered);
  EXPECT_LE(res.at("bound").at("max_excess_pct").get<double>(), kDocumentedBoundExcess + kSlack);
}

}  // namespace
}  // namespace mme
