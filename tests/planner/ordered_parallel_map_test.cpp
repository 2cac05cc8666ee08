// The planner's ordered parallel map (framework/src/planner/ordered_parallel_map.hpp): every
// index runs once, results come out in index order on the calling thread whatever the thread
// count and timing, workers run at most `window` indices ahead of the output, and `stop` and
// exceptions from the work, the consumer or the tick end the map and reach the caller.
#include "planner/ordered_parallel_map.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace mme {
namespace {

using Work = std::function<std::uint64_t(unsigned, std::size_t)>;
using Emit = std::function<void(std::size_t, std::uint64_t&&)>;

// A few microseconds of work that varies with the index, so threads finish out of order.
void jitter(std::size_t i) { std::this_thread::sleep_for(std::chrono::microseconds((i * 7919) % 40)); }

TEST(OrderedParallelMap, EmitsEveryResultOnceInIndexOrderOnTheCallingThread) {
  const auto caller = std::this_thread::get_id();
  std::vector<std::vector<std::uint64_t>> outputs;
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    SCOPED_TRACE(threads);
    std::atomic<bool> stop{false};
    std::vector<std::uint64_t> out;
    std::atomic<bool> worker_outside_pool{false};
    const Work work = [&](unsigned worker, std::size_t i) -> std::uint64_t {
      if (worker >= threads) worker_outside_pool = true;
      jitter(i);
      return i * i + 1;
    };
    const Emit emit = [&](std::size_t i, std::uint64_t&& r) {
      EXPECT_EQ(std::this_thread::get_id(), caller);
      EXPECT_EQ(i, out.size());
      out.push_back(r);
    };
    ordered_parallel_map<std::uint64_t>(700, {threads, 4 * threads, std::chrono::milliseconds(100)}, stop, work, emit,
                                        nullptr);
    EXPECT_FALSE(worker_outside_pool);
    EXPECT_FALSE(stop);
    ASSERT_EQ(out.size(), 700u);
    for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], i * i + 1);
    outputs.push_back(out);
  }
  for (const auto& out : outputs) EXPECT_EQ(out, outputs.front());
}

TEST(OrderedParallelMap, WorkersRunAtMostTheWindowAheadOfTheOutput) {
  for (std::size_t window : {1u, 3u, 16u}) {
    SCOPED_TRACE(window);
    std::atomic<bool> stop{false};
    std::atomic<std::size_t> emitted{0};  // emit calls that have returned
    std::atomic<std::size_t> furthest_ahead{0};
    const Work work = [&](unsigned, std::size_t i) -> std::uint64_t {
      // Index i is taken once i < next to emit + window, and every emit before that one has
      // returned: i < emitted + 1 + window.
      const std::size_t done = emitted.load();
      EXPECT_LT(i, done + 1 + window);
      std::size_t ahead = i > done ? i - done : 0;
      for (std::size_t seen = furthest_ahead.load();
           ahead > seen && !furthest_ahead.compare_exchange_weak(seen, ahead);) {
      }
      return i;
    };
    const Emit emit = [&](std::size_t, std::uint64_t&&) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // a slow consumer
      ++emitted;
    };
    ordered_parallel_map<std::uint64_t>(120, {4, window, std::chrono::milliseconds(100)}, stop, work, emit, nullptr);
    EXPECT_EQ(emitted.load(), 120u);
    EXPECT_GE(furthest_ahead.load() + 1, window);  // the workers do run ahead, up to the window
  }
}

TEST(OrderedParallelMap, WithoutAConsumerEveryIndexRunsOnce) {
  std::atomic<bool> stop{false};
  std::vector<std::atomic<int>> runs(5000);
  const Work work = [&](unsigned, std::size_t i) -> std::uint64_t {
    ++runs[i];
    return 0;
  };
  ordered_parallel_map<std::uint64_t>(runs.size(), {3, 1, std::chrono::milliseconds(100)}, stop, work, nullptr,
                                      nullptr);
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
}

TEST(OrderedParallelMap, NothingRunsForNoIndices) {
  std::atomic<bool> stop{false};
  bool ran = false;
  const Work work = [&](unsigned, std::size_t) -> std::uint64_t {
    ran = true;
    return 0;
  };
  ordered_parallel_map<std::uint64_t>(
      0, {4, 4, std::chrono::milliseconds(100)}, stop, work, [&](std::size_t, std::uint64_t&&) { ran = true; },
      [&] { ran = true; });
  EXPECT_FALSE(ran);
}

TEST(OrderedParallelMap, StopFromTheWorkEndsTheMapEarly) {
  std::atomic<bool> stop{false};
  std::vector<std::size_t> seen;
  const Work work = [&](unsigned, std::size_t i) -> std::uint64_t {
    seen.push_back(i);
    if (i == 20) stop = true;
    return 0;
  };
  ordered_parallel_map<std::uint64_t>(1000, {1, 1, std::chrono::milliseconds(100)}, stop, work, nullptr, nullptr);
  ASSERT_EQ(seen.size(), 21u);  // one thread: nothing after the index that stopped the map
  EXPECT_EQ(seen.back(), 20u);
  EXPECT_TRUE(stop);
}

TEST(OrderedParallelMap, AnExceptionFromTheWorkReachesTheCaller) {
  for (unsigned threads : {1u, 4u}) {
    SCOPED_TRACE(threads);
    std::atomic<bool> stop{false};
    std::atomic<std::size_t> calls{0};
    std::vector<std::size_t> emitted;
    const Work work = [&](unsigned, std::size_t i) -> std::uint64_t {
      ++calls;
      if (i == 50) throw std::runtime_error("slice 50 failed");
      jitter(i);
      return i;
    };
    const Emit emit = [&](std::size_t i, std::uint64_t&&) { emitted.push_back(i); };
    try {
      ordered_parallel_map<std::uint64_t>(100000, {threads, 8, std::chrono::milliseconds(100)}, stop, work, emit,
                                          nullptr);
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "slice 50 failed");
    }
    EXPECT_TRUE(stop);
    EXPECT_LT(calls.load(), 100000u);
    // Nothing at or after the failed index is handed out.
    for (std::size_t i = 0; i < emitted.size(); ++i) EXPECT_EQ(emitted[i], i);
    EXPECT_LE(emitted.size(), 50u);
  }
}

TEST(OrderedParallelMap, AnExceptionFromTheConsumerStopsTheWorkers) {
  const std::size_t window = 5;
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> furthest{0};
  const Work work = [&](unsigned, std::size_t i) -> std::uint64_t {
    for (std::size_t seen = furthest.load(); i > seen && !furthest.compare_exchange_weak(seen, i);) {
    }
    return i;
  };
  std::size_t last = 0;
  const Emit emit = [&](std::size_t i, std::uint64_t&&) {
    last = i;
    if (i == 10) throw std::invalid_argument("cannot write row 10");
  };
  EXPECT_THROW(ordered_parallel_map<std::uint64_t>(100000, {3, window, std::chrono::milliseconds(100)}, stop, work,
                                                   emit, nullptr),
               std::invalid_argument);
  EXPECT_EQ(last, 10u);
  // Workers took indices only up to the window past the row that failed.
  EXPECT_LT(furthest.load(), 11 + window);
}

TEST(OrderedParallelMap, TheTickRunsOnTheCallingThreadWhileTheMapRuns) {
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> stop{false};
  int ticks = 0;
  const Work work = [&](unsigned, std::size_t) -> std::uint64_t {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return 0;
  };
  const std::function<void()> tick = [&] {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ++ticks;
  };
  ordered_parallel_map<std::uint64_t>(60, {2, 1, std::chrono::milliseconds(5)}, stop, work, nullptr, tick);
  EXPECT_GT(ticks, 0);  // 60 x 2 ms on 2 threads: about 60 ms
  // A tick that throws ends the map like a failed work item.
  std::atomic<bool> stop2{false};
  EXPECT_THROW(ordered_parallel_map<std::uint64_t>(1000, {2, 1, std::chrono::milliseconds(1)}, stop2, work, nullptr,
                                                   [] { throw std::runtime_error("progress display failed"); }),
               std::runtime_error);
  EXPECT_TRUE(stop2);
}

}  // namespace
}  // namespace mme
