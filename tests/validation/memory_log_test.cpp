// Training logs for `mme validate --from-log` (framework/src/validate/memory_log.cpp): the memory
// lines of Megatron-LM (report_memory of every rank, its TensorBoard scalars as text) and
// Megatron-Bridge (GB), the steady iterations, refused measurements, the bounded reader and the
// comparison per rank. Expected figures are the lines' own numbers in the units each format
// states (MB = 2^20 bytes, GB = 1e9 bytes).
#include <sstream>
#include <string>

#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/units.hpp"
#include "mme/validate/validation.hpp"

#include "test_support.hpp"

namespace mme {
namespace {

using ::testing::HasSubstr;

MemoryLog parse(const std::string& text) {
  std::istringstream in(text);
  return parse_memory_log(in, "train.log");
}

std::string line(int rank, int iteration, double alloc, double max_alloc, double reserved, double max_reserved) {
  return fmt::format(
      "[Rank {}] (after {} iterations) memory (MB) | allocated: {:.2f} | max allocated: {:.2f} | reserved: {:.2f} | "
      "max reserved: {:.2f}\n",
      rank, iteration, alloc, max_alloc, reserved, max_reserved);
}

TEST(MemoryLog, ReportMemoryLinesOfEveryRank) {
  std::string refused;
  const auto r = parse_memory_line(
      "[Rank 12] (after 20 iterations) memory (MB) | allocated: 512.00 | max allocated: 4096.00 | reserved: 5000.00 | "
      "max reserved: 5120.00 | total device memory used: 6000.00",
      7, refused);
  ASSERT_TRUE(r) << refused;
  EXPECT_EQ(r->rank, 12);
  EXPECT_EQ(r->iteration, 20);
  EXPECT_EQ(r->line, 7u);
  EXPECT_STREQ(r->format, "report_memory");
  EXPECT_DOUBLE_EQ(*r->allocated_bytes, 512.0 * kMiB);
  EXPECT_DOUBLE_EQ(*r->max_allocated_bytes, 4096.0 * kMiB);
  EXPECT_DOUBLE_EQ(*r->reserved_bytes, 5000.0 * kMiB);
  EXPECT_DOUBLE_EQ(*r->max_reserved_bytes, 5120.0 * kMiB);
  EXPECT_TRUE(r->training);
  // An older version without the reserved figures, prefixed by a launcher's rank tag.
  const auto old = parse_memory_line(
      "0: [Rank 3] (after 2 iterations) memory (MB) | allocated: 100 | max allocated: 200", 1, refused);
  ASSERT_TRUE(old) << refused;
  EXPECT_EQ(old->rank, 3);
  EXPECT_FALSE(old->reserved_bytes);
  // Around a checkpoint save: read, but no training step.
  const auto save = parse_memory_line(
      "[Rank 0] (before save_checkpoint for iteration 100) memory (MB) | allocated: 1 | max allocated: 2", 1, refused);
  ASSERT_TRUE(save);
  EXPECT_FALSE(save->training);
  EXPECT_FALSE(parse_memory_line(" iteration 10/ 100 | lm loss: 2.0", 1, refused));
  EXPECT_EQ(refused, "");
}

TEST(MemoryLog, ScalarsInBytesAndBridgeInGigabytes) {
  std::string refused;
  const auto s = parse_memory_line(
      "{'lm loss': 2.5, 'mem-allocated-bytes': 1073741824.0, 'mem-max-allocated-bytes': 3.2212254720e+10, "
      "'mem-reserved-bytes': 34359738368}",
      1, refused);
  ASSERT_TRUE(s) << refused;
  EXPECT_STREQ(s->format, "scalar");
  EXPECT_FALSE(s->rank);
  EXPECT_DOUBLE_EQ(*s->max_allocated_bytes, 32212254720.0);
  EXPECT_DOUBLE_EQ(*s->allocated_bytes, 1073741824.0);
  EXPECT_DOUBLE_EQ(*s->reserved_bytes, 34359738368.0);
  // Megatron-Bridge: GB are 1e9 bytes; the iteration from the training-log line.
  const auto b = parse_memory_line(
      " [2026-05-01 10:00:00] iteration       40/     100 | lm loss: 2.1 | mem-allocated-gigabytes: 47.2 | "
      "mem-max-allocated-gigabytes: 52.5 | mem-reserved-gigabytes: 60",
      2, refused);
  ASSERT_TRUE(b) << refused;
  EXPECT_STREQ(b->format, "bridge");
  EXPECT_EQ(b->iteration, 40);
  EXPECT_DOUBLE_EQ(*b->allocated_bytes, 47.2e9);
  EXPECT_DOUBLE_EQ(*b->max_allocated_bytes, 52.5e9);
  EXPECT_DOUBLE_EQ(*b->reserved_bytes, 60e9);
  const auto gb = parse_memory_line("step 5: mem_max_allocated_gb=12.5 mem_allocated_gb=10", 3, refused);
  ASSERT_TRUE(gb) << refused;
  EXPECT_DOUBLE_EQ(*gb->max_allocated_bytes, 12.5e9);
}

TEST(MemoryLog, SteadyIterationsLeaveTheFirstOut) {
  // Rank 0 logs iterations 1 and 2 (and 3); rank 4 only iteration 1.
  const auto log =
      parse(line(0, 1, 1000, 2000, 2500, 2500) + " iteration 2 | lm loss 1\n" + line(0, 2, 1500, 2600, 3000, 3000) +
            line(4, 1, 900, 1900, 2000, 2000) + line(0, 3, 1400, 2600, 3000, 3100) +
            "[Rank 0] (after save_checkpoint for iteration 3) memory (MB) | allocated: 9000 | max "
            "allocated: 9000\n");
  ASSERT_EQ(log.ranks.size(), 2u);
  const RankMemory& r0 = log.ranks[0];
  EXPECT_EQ(r0.rank, 0);
  EXPECT_EQ(r0.reports, 3u);  // the checkpoint report is no training step
  EXPECT_EQ(r0.used, 2u);     // iterations 2 and 3
  EXPECT_TRUE(r0.steady);
  EXPECT_EQ(r0.first_iteration, 1);
  EXPECT_DOUBLE_EQ(*r0.max_allocated_bytes, 2600.0 * kMiB);
  EXPECT_DOUBLE_EQ(*r0.allocated_bytes, 1400.0 * kMiB);  // the last logged
  EXPECT_DOUBLE_EQ(*r0.reserved_bytes, 3000.0 * kMiB);
  EXPECT_DOUBLE_EQ(*r0.max_reserved_bytes, 3100.0 * kMiB);
  const RankMemory& r4 = log.ranks[1];
  EXPECT_FALSE(r4.steady);  // only its first iteration: used, and said
  EXPECT_EQ(r4.used, 1u);
  EXPECT_DOUBLE_EQ(*r4.allocated_bytes, 900.0 * kMiB);
  EXPECT_EQ(log.memory_lines, 5u);
  EXPECT_EQ(log.lines, 6u);
}

TEST(MemoryLog, InvalidMeasurementsAreRefusedWithLineAndRank) {
  const auto log = parse(line(0, 2, 100, 200, 300, 300) +
                         "[Rank 1] (after 2 iterations) memory (MB) | allocated: 0.00 | max allocated: 0.00\n"
                         "[Rank 2] (after 2 iterations) memory (MB) | allocated: 1 | max allocated: 12x4\n"
                         "mem-max-allocated-bytes: nan\n"
                         "mem-max-allocated-bytes: -5\n"
                         "[Rank 3] (after 2 iterations) memory (MB) | allocated: 500 | max allocated: 200\n"
                         "[Rank x] (after 2 iterations) memory (MB) | allocated: 1 | max allocated: 2\n"
                         "mem-max-allocated-bytes: 1e-310\n"
                         "[Rank 4] (after 2 iterations) memory (MB) | allocated: 1e-310 | max allocated: 2\n"
                         "mem-max-allocated-bytes: 0.5\n");
  ASSERT_EQ(log.ranks.size(), 1u);  // rank 0 alone is compared
  EXPECT_EQ(log.refused_count, 9u);
  ASSERT_EQ(log.refused.size(), 9u);
  EXPECT_EQ(log.refused[0].line, 2u);
  EXPECT_EQ(log.refused[0].rank, 1);
  EXPECT_EQ(log.refused[0].reason,
            "'0.00' after 'max allocated:' is not a positive amount of memory (a run that trained allocates some)");
  EXPECT_EQ(log.refused[1].reason, "'12x4' after 'max allocated:' is not a number");
  EXPECT_FALSE(log.refused[2].rank);
  EXPECT_THAT(log.refused[2].reason, HasSubstr("'nan' after 'mem-max-allocated-bytes' is not a positive amount"));
  EXPECT_THAT(log.refused[3].reason, HasSubstr("'-5'"));
  EXPECT_EQ(log.refused[4].reason, "allocated 500 MiB is more than max allocated 200 MiB");
  EXPECT_EQ(log.refused[5].reason, "'[Rank' is not followed by a rank number and ']'");
  EXPECT_THAT(log.refused[6].reason, HasSubstr("is not an amount of memory a GPU holds"));  // a denormal
  // 1e-310 MB is a normal number of bytes (1e-304) but less than one byte: its error in GiB
  // would divide by a denormal and overflow (a fuzzing finding).
  EXPECT_EQ(log.refused[7].rank, 4);
  EXPECT_THAT(log.refused[7].reason, HasSubstr("'1e-310' after 'allocated:' is not an amount of memory a GPU holds"));
  EXPECT_THAT(log.refused[8].reason, HasSubstr("'0.5' after 'mem-max-allocated-bytes' is not an amount of memory"));
  // Every memory line refused: one error naming the first.
  try {
    parse("mem-max-allocated-bytes: 0\n");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("train.log: every memory line is refused (1); the first, line 1:"));
  }
}

TEST(MemoryLog, NoMemoryLinesSaysWhatWasLookedFor) {
  try {
    parse("iteration 1 | lm loss: 3.0\nmem-allocated-bytes: 5\n");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_THAT(m, HasSubstr("train.log: no memory lines found"));
    EXPECT_THAT(m, HasSubstr("max allocated:"));
    EXPECT_THAT(m, HasSubstr("mem-max-allocated-bytes"));
    EXPECT_THAT(m, HasSubstr("mem-max-allocated-gigabytes"));
  }
}

TEST(MemoryLog, LongLinesAndTheSizeBound) {
  // A line longer than kMaxLogLineBytes is read up to it: a report at its start counts, the rest
  // of it is skipped, and the lines after it are read.
  const std::string junk(kMaxLogLineBytes + 1000, 'x');
  std::string first = line(0, 2, 1, 2, 3, 3);
  first.pop_back();  // its newline: the junk continues the line
  const auto log = parse(first + " | " + junk + "\n" + line(1, 2, 10, 20, 30, 30));
  EXPECT_EQ(log.long_lines, 1u);
  EXPECT_EQ(log.lines, 2u);
  ASSERT_EQ(log.ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(*log.ranks[0].max_allocated_bytes, 2.0 * kMiB);
  EXPECT_DOUBLE_EQ(*log.ranks[1].max_allocated_bytes, 20.0 * kMiB);
  // A stream beyond the size bound stops with an error.
  std::istringstream in(line(0, 2, 1, 2, 3, 3) + line(0, 3, 1, 2, 3, 3));
  EXPECT_THROW(parse_memory_log(in, "train.log", 50), ConfigError);
  test::TempDir dir;
  EXPECT_THROW(read_memory_log(dir.path() / "missing.log"), NotFoundError);
  EXPECT_THROW(read_memory_log(dir.path()), NotFoundError);
}

Estimate four_stages() {
  Estimate e;
  e.setup.parallel.world_size = 8;
  e.setup.parallel.pp = 4;
  for (int i = 0; i < 4; ++i) {
    StageEstimate s;
    s.pp_rank = i;
    s.total_bytes = gib_to_bytes(10.0 + i);
    s.static_bytes = gib_to_bytes(5.0);
    s.upper_bytes = i == 3 ? gib_to_bytes(20.0) : 0;
    e.stages.push_back(s);
  }
  return e;
}

TEST(CompareLog, EachRankAgainstItsStage) {
  // MB figures: 11264 MiB = 11 GiB, 13312 = 13 GiB, 9216 = 9 GiB, 4096 = 4 GiB; scalar 15 GiB.
  const auto log = parse(line(5, 1, 100, 11264, 12000, 12000) + line(0, 1, 4096, 9216, 9216, 9216) +
                         line(5, 2, 6144, 13312, 14336, 14336) + "mem-max-allocated-bytes: 16106127360\n");
  // The reserved estimate, where the estimate has one: 14 GiB for stage 2.
  const ReservedEstimate reserved = [](const StageEstimate& s) -> std::optional<std::int64_t> {
    if (s.pp_rank == 2) return gib_to_bytes(14.0);
    return std::nullopt;
  };
  const auto ranks = compare_memory_log(log, four_stages(), "train.log", reserved);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[0].rank, 0);
  EXPECT_EQ(ranks[0].stage, 0);
  EXPECT_FALSE(ranks[0].steady);  // only iteration 1
  EXPECT_DOUBLE_EQ(ranks[0].measured_max_allocated_gib, 9.0);
  EXPECT_DOUBLE_EQ(ranks[0].estimated_upper_gib, 10.0);
  EXPECT_NEAR(*ranks[0].static_error(), (5.0 - 4.0) / 4.0, 1e-12);
  EXPECT_FALSE(ranks[0].reserved_error());  // no reserved estimate for stage 0
  EXPECT_EQ(ranks[1].rank, 5);
  EXPECT_EQ(ranks[1].stage, 2);  // 8 GPUs / PP 4 = 2 per stage
  EXPECT_EQ(ranks[1].used, 1u);
  EXPECT_DOUBLE_EQ(ranks[1].measured_max_allocated_gib, 13.0);
  EXPECT_DOUBLE_EQ(*ranks[1].measured_allocated_gib, 6.0);
  EXPECT_NEAR(ranks[1].peak_error(), (12.0 - 13.0) / 13.0, 1e-12);
  EXPECT_FALSE(ranks[1].within_bound());
  EXPECT_NEAR(*ranks[1].reserved_error(), (14.0 - 14.0) / 14.0, 1e-12);
  EXPECT_FALSE(ranks[2].rank);  // the scalar line: the last stage
  EXPECT_EQ(ranks[2].stage, 3);
  EXPECT_DOUBLE_EQ(ranks[2].measured_max_allocated_gib, 15.0);
  EXPECT_TRUE(ranks[2].within_bound());
  // The document: every rank, the refusals counted.
  const auto j = log_comparison_json("train.log", log, ranks, four_stages());
  EXPECT_EQ(j["summary"]["refused"], 0);
  EXPECT_EQ(j["ranks"][1]["reserved_error_pct"], 0.0);
  EXPECT_TRUE(j["ranks"][0]["reserved_error_pct"].is_null());
}

TEST(CompareLog, RankBeyondTheWorldSize) {
  const auto log = parse("[Rank 8] (after 1 iterations) memory (MB) | allocated: 1 | max allocated: 2\n");
  try {
    compare_memory_log(log, four_stages(), "train.log");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "train.log:1: rank 8 is beyond the world size of 8 GPUs (ranks 0 to 7); give the run's --num-gpus");
  }
}

}  // namespace
}  // namespace mme
