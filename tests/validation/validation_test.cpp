// The library side of `mme validate`: format detection, real-runs rows, the summary
// statistics on hand-made cases, Megatron-LM's memory log lines and the rank-to-stage map.
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/units.hpp>
#include <mme/validate/validation.hpp>

#include "layer_plugins.hpp"
#include "megatron_args_adapter.hpp"
#include "test_support.hpp"

namespace mme {
namespace {

// ---- Format detection ------------------------------------------------------------------

TEST(CsvFormat, FunctionalTestColumns) {
  EXPECT_EQ(detect_csv_format({"model", "test_case", "golden", "max_alloc_GiB_max", "alloc_GiB_median", "num-layers"},
                              "f.csv"),
            CsvFormat::kFunctionalTest);
}

TEST(CsvFormat, RealRunsColumns) {
  EXPECT_EQ(
      detect_csv_format({"id", "source", "model", "metric", "measured_gib", "rank_note", "mme_args", "notes"}, "r.csv"),
      CsvFormat::kRealRuns);
}

TEST(CsvFormat, UnknownColumnsNameBothFormats) {
  try {
    detect_csv_format({"name", "value"}, "x.csv");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("x.csv: unknown set of columns (name, value)"), std::string::npos) << m;
    EXPECT_NE(m.find("test_case, max_alloc_GiB_max"), std::string::npos) << m;
    EXPECT_NE(m.find("id, metric, measured_gib, mme_args"), std::string::npos) << m;
  }
}

TEST(CsvFormat, IncompleteRealRunsHeaderNamesTheMissingColumn) {
  try {
    detect_csv_format({"id", "metric", "mme_args"}, "r.csv");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("missing column 'measured_gib'"), std::string::npos) << e.what();
  }
}

// ---- Measured reserved memory in a real-runs row's notes ------------------------------------

TEST(ReservedNotes, ReadsMaxReservedInMiB) {
  // "max_reserved 72586 MB" as report_memory prints it: MB = 2^20 bytes, so 72586 / 1024 GiB.
  EXPECT_DOUBLE_EQ(measured_reserved_from_notes("max_allocated 68149 MB; max_reserved 72586 MB = 70.88 GiB", "row"),
                   72586.0 / 1024.0);
  EXPECT_DOUBLE_EQ(measured_reserved_from_notes("max_reserved 1536.5 MB", "row"), 1.5004882812500);
  EXPECT_EQ(measured_reserved_from_notes("no reserved figure here", "row"), 0.0);
  for (const char* bad : {"max_reserved 70.9 GiB", "max_reserved MB", "max_reserved 1.2.3 MB", "max_reserved 0 MB"})
    EXPECT_THROW(measured_reserved_from_notes(bad, "row"), ConfigError) << bad;
}

TEST(ReservedNotes, SummaryComparesReservedAndTheAllocatorsShare) {
  // Two rows: measured peak 10 and 20 GiB, reserved 11 and 22; estimated peak 10 and 19, reserved
  // 11.5 and 21. Errors: +4.545 % and -4.545 % (|median| 4.545 %); one row under its measured
  // reserved; reserved - peak measured 1 and 2 (median 1.5), estimated 1.5 and 2 (median 1.75);
  // |estimated - measured| of that: 0.5 and 0 GiB (median 0.25, max 0.5). The reserved bounds,
  // 11.8 and 21.5 GiB: the first covers its row, the second is 0.5 GiB (0.5 / 22) under.
  std::vector<ValidationCase> cases(2);
  const double m_peak[] = {10, 20}, m_res[] = {11, 22}, e_peak[] = {10, 19}, e_res[] = {11.5, 21},
               e_res_upper[] = {11.8, 21.5};
  for (int i = 0; i < 2; ++i) {
    auto& c = cases[static_cast<std::size_t>(i)];
    c.format = CsvFormat::kRealRuns;
    c.metric = "max_allocated";
    c.status = "ok";
    c.measured_peak_gib = m_peak[i];
    c.measured_reserved_gib = m_res[i];
    c.estimated_peak_gib = c.estimated_upper_gib = e_peak[i];
    c.estimated_reserved_gib = e_res[i];
    c.estimated_reserved_upper_gib = e_res_upper[i];
  }
  const ReservedStats r = summarize(cases).reserved;
  EXPECT_EQ(r.count, 2u);
  EXPECT_NEAR(r.error.median, 0.5 / 11, 1e-12);
  EXPECT_NEAR(r.signed_median, 0.0, 1e-12);
  EXPECT_EQ(r.under, 1u);
  EXPECT_DOUBLE_EQ(r.gap_measured_median_gib, 1.5);
  EXPECT_DOUBLE_EQ(r.gap_estimated_median_gib, 1.75);
  EXPECT_DOUBLE_EQ(r.gap_error_median_gib, 0.25);
  EXPECT_DOUBLE_EQ(r.gap_error_max_gib, 0.5);
  EXPECT_EQ(r.bound_covered, 1u);
  EXPECT_DOUBLE_EQ(r.bound_max_excess, 0.5 / 22);
}

TEST(CsvFormat, ReadCsvTableDetectsTheShippedFiles) {
  EXPECT_EQ(read_csv_table(test::source_dir() / "bench" / "accuracy" / "real_runs.csv").format, CsvFormat::kRealRuns);
  EXPECT_EQ(read_csv_table(test::source_dir() / "bench" / "accuracy" / "megatron_functional_test_memory.csv").format,
            CsvFormat::kFunctionalTest);
}

TEST(ShellWords, QuotesAndEscapes) {
  const auto w = split_shell_words(R"(Qwen/Qwen3-0.6B --megatron-args '--a 1 --b "x"' "c d" e\ f "g\"h" '')", "t");
  const std::vector<std::string> expected{
      "Qwen/Qwen3-0.6B", "--megatron-args", "--a 1 --b \"x\"", "c d", "e f", "g\"h", ""};
  EXPECT_EQ(w, expected);
  EXPECT_THROW(split_shell_words("--megatron-args '--a 1", "t"), ConfigError);
  EXPECT_THROW(split_shell_words("\"open", "t"), ConfigError);
}

// ---- Real-runs rows ----------------------------------------------------------------------

// A fake estimate: two stages, the second the peak.
ArgsEstimate fake_estimate(std::int64_t upper_bytes) {
  ArgsEstimate r;
  r.model.name = "fake";
  r.estimate.setup.parallel.world_size = 8;
  r.estimate.setup.parallel.pp = 2;
  StageEstimate a, b;
  a.pp_rank = 0;
  a.total_bytes = gib_to_bytes(3.0);
  a.static_bytes = gib_to_bytes(1.0);
  b.pp_rank = 1;
  b.total_bytes = gib_to_bytes(4.0);
  b.static_bytes = gib_to_bytes(2.0);
  b.upper_bytes = upper_bytes;
  r.estimate.stages = {a, b};
  r.estimate.peak_stage = 1;
  return r;
}

CsvRow real_row(const std::string& metric, const std::string& measured, const std::string& args) {
  return {{"id", "r1"}, {"model", "m"}, {"metric", metric}, {"measured_gib", measured}, {"mme_args", args}};
}

TEST(RealRuns, ComparesThePeakStageAndPassesTheArgsAsWords) {
  std::vector<std::string> seen;
  const ArgsEstimator est = [&](const std::vector<std::string>& args) {
    seen = args;
    return fake_estimate(0);
  };
  const ValidationCase c =
      validate_real_run_row(real_row("max_allocated", "5.0", "m --tp 2 --megatron-args '--x 1'"), est);
  EXPECT_EQ(seen, (std::vector<std::string>{"m", "--tp", "2", "--megatron-args", "--x 1"}));
  EXPECT_EQ(c.status, "ok");
  EXPECT_EQ(c.stage, 1);
  EXPECT_DOUBLE_EQ(c.estimated_peak_gib, 4.0);
  EXPECT_DOUBLE_EQ(c.estimated_static_gib, 2.0);
  EXPECT_DOUBLE_EQ(c.estimated_upper_gib, 4.0);  // no bound from the engine: the peak itself
  EXPECT_DOUBLE_EQ(c.peak_error(), -0.2);
  EXPECT_TRUE(c.counted());
  EXPECT_FALSE(c.within_bound());
  EXPECT_EQ(c.world_size, 8);
}

// simumax_b200.md: the rows of a PP=2 layout are per stage, rank_note "pp_rank=N"; each is
// compared with that stage's estimate (fake_estimate: stage 0 3 GiB, stage 1 4 GiB), not the peak.
TEST(RealRuns, ARankNoteNamingAPipelineStageComparesThatStage) {
  auto row = [](const std::string& note) {
    CsvRow r = real_row("max_allocated", "5.0", "m");
    r["rank_note"] = note;
    return r;
  };
  const auto est = [](const auto&) { return fake_estimate(0); };
  const ValidationCase first = validate_real_run_row(row("pp_rank=0"), est);
  EXPECT_EQ(first.status, "ok");
  EXPECT_EQ(first.stage, 0);
  EXPECT_DOUBLE_EQ(first.estimated_peak_gib, 3.0);
  EXPECT_EQ(validate_real_run_row(row("stage pp_rank=1 of 2"), est).stage, 1);
  EXPECT_EQ(validate_real_run_row(row("max of 8"), est).stage, 1);  // no stage named: the peak
  for (const char* bad : {"pp_rank=2", "pp_rank=", "pp_rank=x"}) {
    const ValidationCase c = validate_real_run_row(row(bad), est);
    EXPECT_EQ(c.status, "error") << bad;
    EXPECT_NE(c.reason.find("pp_rank"), std::string::npos) << c.reason;
  }
}

TEST(RealRuns, TakesTheEnginesBoundWhenItHasOne) {
  const ValidationCase c = validate_real_run_row(real_row("other", "5.0", "m"),
                                                 [](const auto&) { return fake_estimate(gib_to_bytes(6.0)); });
  EXPECT_DOUBLE_EQ(c.estimated_upper_gib, 6.0);
  EXPECT_TRUE(c.within_bound());
  EXPECT_FALSE(c.counted());
}

TEST(RealRuns, AFailingEstimateIsAnErrorRowWithTheMessage) {
  const ValidationCase c = validate_real_run_row(
      real_row("max_allocated", "5.0", "m --tp 0"),
      [](const auto&) -> ArgsEstimate { throw UsageError("--tp: expected a positive integer, got 0"); });
  EXPECT_EQ(c.status, "error");
  EXPECT_EQ(c.reason, "--tp: expected a positive integer, got 0");
  const ValidationCase q =
      validate_real_run_row(real_row("max_allocated", "5.0", "m '--tp"), [](const auto&) { return fake_estimate(0); });
  EXPECT_EQ(q.status, "error");
  EXPECT_NE(q.reason.find("unterminated single quote"), std::string::npos) << q.reason;
}

TEST(RealRuns, BadMetricIsAConfigErrorAndABadMeasurementARefusedRow) {
  const auto ok = [](const auto&) { return fake_estimate(0); };
  EXPECT_THROW(validate_real_run_row(real_row("peak", "5.0", "m"), ok), ConfigError);
  for (const char* bad : {"five", "-1", "5,0", "5.0GiB", "1e-320"}) {
    const ValidationCase c = validate_real_run_row(real_row("max_allocated", bad, "m"), ok, 7);
    EXPECT_EQ(c.status, "refused") << bad;
    EXPECT_EQ(c.reason.rfind("line 7: measured_gib '" + std::string(bad) + "' is ", 0), 0u) << c.reason;
  }
}

class RealRunsWithTheLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.register_plugin("adapter_megatron_args", "test", "", plugins::register_megatron_args);
    test::register_layer_plugins(registry_);
  }
  Registry registry_;
};

// A real-runs file written here; its row is estimated through the library with the same flags,
// and the case must carry exactly the peak stage's total.
TEST_F(RealRunsWithTheLibrary, TheRowCarriesThePeakStageOfTheSameFlags) {
  const std::string flags =
      "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 4096 "
      "--micro-batch-size 2 --vocab-size 1000 --tokenizer-type NullTokenizer --pipeline-model-parallel-size 2 --bf16";
  test::TempDir dir;
  test::write_file(dir.path() / "runs.csv",
                   "id,source,model,metric,measured_gib,rank_note,mme_args,notes\n"
                   "tiny,test,tiny,max_allocated,1.0,,\"--megatron-args '" +
                       flags + "' --num-gpus 4\",\n");
  // The estimator a CLI would plug in, written against the library.
  ValidationOptions options;
  options.estimate_args = [&](const std::vector<std::string>& args) {
    EXPECT_EQ(args.size(), 4u);
    const MegatronArgs m = parse_megatron_args(args.at(1), "test");
    ArgsEstimate r{adapt_config(m.to_config(), "tiny", "test", registry_), {}};
    TrainingSetup base;
    base.parallel.world_size = 4;
    r.estimate = Estimator(r.model, registry_).run(setup_from_megatron_args(m, base));
    return r;
  };
  const auto cases = run_validation(dir.path() / "runs.csv", registry_, options);
  ASSERT_EQ(cases.size(), 1u);
  ASSERT_EQ(cases[0].status, "ok") << cases[0].reason;
  // Independently: the same flags through the library.
  const MegatronArgs m = parse_megatron_args(flags, "expected");
  const ModelSpec model = adapt_config(m.to_config(), "tiny", "expected", registry_);
  TrainingSetup base;
  base.parallel.world_size = 4;
  const Estimate e = Estimator(model, registry_).run(setup_from_megatron_args(m, base));
  EXPECT_DOUBLE_EQ(cases[0].estimated_peak_gib, to_gib(e.peak().total_bytes));
  EXPECT_EQ(cases[0].stage, e.peak().pp_rank);
  EXPECT_EQ(cases[0].format, CsvFormat::kRealRuns);
}

// ---- Statistics on hand-made cases --------------------------------------------------------

ValidationCase made(double measured, double estimated, double upper = 0, const std::string& status = "ok") {
  ValidationCase c;
  c.status = status;
  c.measured_peak_gib = measured;
  c.estimated_peak_gib = estimated;
  c.estimated_upper_gib = upper > 0 ? upper : estimated;
  return c;
}

TEST(Summary, SizeBucketsSignedErrorAndBound) {
  // errors: -10 %, +2 %, +20 %, -4 %, -30 %, +6 %; one error row and one skipped row
  std::vector<ValidationCase> cases{
      made(2.0, 1.8),          // < 5: -10 %
      made(4.0, 4.08),         // < 5: +2 %
      made(5.0, 6.0),          // 5-40 (5 included): +20 %
      made(40.0, 38.4, 41.0),  // 5-40 (40 included): -4 %, bound 41 covers 40
      made(50.0, 35.0, 49.0),  // > 40: -30 %, bound 49 does not cover 50
      made(100.0, 106.0),      // > 40: +6 %, bound = estimate 106 covers
      made(10.0, 0.0, 0, "error"),
      made(10.0, 0.0, 0, "skipped"),
  };
  const ValidationSummary s = summarize(cases);
  EXPECT_EQ(s.evaluated, 6u);
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(s.skipped, 1u);
  ASSERT_EQ(s.by_size.size(), 3u);
  EXPECT_EQ(s.by_size[0].label, "<5GiB");
  EXPECT_EQ(s.by_size[1].label, "5-40GiB");
  EXPECT_EQ(s.by_size[2].label, ">40GiB");
  EXPECT_EQ(s.by_size[0].peak.count, 2u);
  EXPECT_EQ(s.by_size[1].peak.count, 2u);
  EXPECT_EQ(s.by_size[2].peak.count, 2u);
  // |errors| of < 5: {0.02, 0.10}: median 0.06, p90 0.02 + 0.9 * 0.08 = 0.092
  EXPECT_NEAR(s.by_size[0].peak.median, 0.06, 1e-12);
  EXPECT_NEAR(s.by_size[0].peak.p90, 0.092, 1e-12);
  // 5-40: {0.04, 0.20}: median 0.12, p90 0.184
  EXPECT_NEAR(s.by_size[1].peak.median, 0.12, 1e-12);
  EXPECT_NEAR(s.by_size[1].peak.p90, 0.184, 1e-12);
  // > 40: {0.06, 0.30}: median 0.18, p90 0.276
  EXPECT_NEAR(s.by_size[2].peak.median, 0.18, 1e-12);
  EXPECT_NEAR(s.by_size[2].peak.p90, 0.276, 1e-12);
  // signed, sorted: -0.30 -0.10 -0.04 +0.02 +0.06 +0.20: median (-0.04 + 0.02) / 2 = -0.01
  EXPECT_EQ(s.signed_peak.count, 6u);
  EXPECT_NEAR(s.signed_peak.median, -0.01, 1e-12);
  EXPECT_EQ(s.signed_peak.under, 2u);  // -30 %, -10 % (-4 % is within 5 %)
  EXPECT_EQ(s.signed_peak.over, 2u);   // +6 %, +20 %
  EXPECT_NEAR(s.signed_peak.under_share, 2.0 / 6.0, 1e-12);
  EXPECT_NEAR(s.signed_peak.over_share, 2.0 / 6.0, 1e-12);
  // bound: covered unless the bound is below the measurement: 2.0<=1.8 no, 4<=4.08 yes,
  // 5<=6 yes, 40<=41 yes, 50<=49 no, 100<=106 yes
  EXPECT_EQ(s.bound.count, 6u);
  EXPECT_EQ(s.bound.covered, 4u);
  EXPECT_NEAR(s.bound.share, 4.0 / 6.0, 1e-12);
  // exceeded: 2.0 over a bound of 1.8 (10 %) and 50 over 49 (2 %): the larger, 10 %.
  EXPECT_EQ(s.bound.exceeded, 2u);
  EXPECT_NEAR(s.bound.max_excess, 0.10, 1e-12);
  // The headline statistics keep their meaning.
  EXPECT_EQ(s.peak.count, 6u);
  EXPECT_NEAR(s.peak.max, 0.30, 1e-12);
}

TEST(Summary, RowsWithoutAStaticMeasurementStayOutOfTheStaticStatistics) {
  ValidationCase a = made(10.0, 11.0);
  a.measured_static_gib = 5.0;
  a.estimated_static_gib = 4.0;
  const ValidationSummary s = summarize({a, made(10.0, 9.0)});
  EXPECT_EQ(s.static_mem.count, 1u);
  EXPECT_NEAR(s.static_mem.median, 0.2, 1e-12);
}

TEST(Summary, EmptyIsAllZero) {
  const ValidationSummary s = summarize({});
  EXPECT_EQ(s.by_size.size(), 3u);
  EXPECT_EQ(s.signed_peak.count, 0u);
  EXPECT_EQ(s.bound.count, 0u);
  EXPECT_EQ(s.bound.share, 0.0);
  EXPECT_EQ(s.bound.exceeded, 0u);
  EXPECT_EQ(s.bound.max_excess, 0.0);
}

}  // namespace
}  // namespace mme
