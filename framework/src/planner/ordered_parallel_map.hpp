// The planner's thread pool (not part of the SDK): an ordered parallel map. Worker threads take
// the indices of [0, n) in increasing order from one counter and run `work` on each; with an
// `emit`, each result is handed to it on the calling thread in index order, through a reorder
// buffer that holds at most `window` results, so the output never depends on the number of
// threads or their timing, and memory stays bounded however long the map runs.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace mme {

struct OrderedMapOptions {
  unsigned threads = 1;  // worker threads (at least one, at most one per index)
  // With an emit: a worker takes index i only once i < next index to emit + window.
  std::size_t window = 1;
  std::chrono::milliseconds tick_every{100};  // how often `tick` runs on the calling thread
};

// Runs work(worker, i) for every i in [0, n) on min(threads, n) threads (`worker` in
// [0, threads): per-thread state the caller keeps). With `emit`, emit(i, result) runs on the
// calling thread for i = 0, 1, 2, ... in order; without, results are dropped. `tick` (if set)
// runs on the calling thread about every tick_every while the map runs.
//
// `stop` ends the map early: once it is set (by `work`, or here when something throws), no
// worker takes a new index and nothing more is emitted; the calls already running finish. The
// first exception thrown by `work`, `emit` or `tick` sets `stop` and is rethrown once every
// thread has been joined.
template <class Result>
void ordered_parallel_map(std::size_t n, const OrderedMapOptions& options, std::atomic<bool>& stop,
                          const std::function<Result(unsigned worker, std::size_t index)>& work,
                          const std::function<void(std::size_t index, Result&& result)>& emit,
                          const std::function<void()>& tick) {
  if (n == 0) return;
  const auto threads = static_cast<unsigned>(std::clamp<std::size_t>(options.threads, 1, n));
  const bool ordered = static_cast<bool>(emit);
  if (threads == 1) {
    // One thread: everything runs inline on the calling thread, in order (no std::thread: the
    // browser build has no threads; the same results, the same ticks between indices).
    auto last_tick = std::chrono::steady_clock::now();
    try {
      for (std::size_t i = 0; i < n && !stop; ++i) {
        Result result = work(0, i);
        if (stop) break;
        if (ordered) emit(i, std::move(result));
        if (tick && std::chrono::steady_clock::now() - last_tick >= options.tick_every) {
          last_tick = std::chrono::steady_clock::now();
          tick();
        }
      }
    } catch (...) {
      stop = true;
      throw;
    }
    return;
  }
  const std::size_t window = std::max<std::size_t>(options.window, 1);
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::condition_variable cv_main, cv_workers;
  std::map<std::size_t, Result> ready;  // finished results waiting for every earlier one
  std::size_t next_emit = 0;
  std::exception_ptr failure;
  unsigned running = threads;
  auto fail = [&](std::exception_ptr e) {  // with `mu` held
    if (!failure) failure = std::move(e);
    stop = true;
    cv_workers.notify_all();
  };

  auto worker = [&](unsigned id) {
    try {
      for (;;) {
        if (stop.load(std::memory_order_relaxed)) break;
        const std::size_t i = next.fetch_add(1);
        if (i >= n) break;
        if (ordered) {
          std::unique_lock<std::mutex> lock(mu);
          cv_workers.wait(lock, [&] { return i < next_emit + window || stop.load(); });
          if (stop.load()) break;
        }
        Result result = work(id, i);
        if (ordered) {
          std::lock_guard<std::mutex> lock(mu);
          ready.emplace(i, std::move(result));
          cv_main.notify_one();
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      fail(std::current_exception());
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv_main.notify_one();
  };

  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned id = 0; id < threads; ++id) pool.emplace_back(worker, id);

  // The calling thread hands out results in order and ticks; it calls out with `mu` released.
  auto last_tick = std::chrono::steady_clock::now();
  {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      while (ordered && !stop) {
        auto it = ready.find(next_emit);
        if (it == ready.end()) break;
        Result result = std::move(it->second);
        ready.erase(it);
        const std::size_t i = next_emit++;
        cv_workers.notify_all();
        lock.unlock();
        try {
          emit(i, std::move(result));
        } catch (...) {
          lock.lock();
          fail(std::current_exception());
          break;
        }
        lock.lock();
      }
      if (running == 0 && (!ordered || stop || ready.empty())) break;
      cv_main.wait_for(lock, options.tick_every);
      if (tick && std::chrono::steady_clock::now() - last_tick >= options.tick_every) {
        last_tick = std::chrono::steady_clock::now();
        lock.unlock();
        try {
          tick();
        } catch (...) {
          lock.lock();
          fail(std::current_exception());
          continue;
        }
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace mme
