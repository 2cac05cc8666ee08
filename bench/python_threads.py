#!/usr/bin/env python3
"""Two Python threads estimating at once against one (docs/performance.md, docs/python.md).

    PYTHONPATH=build/release/stage/python python3 bench/python_threads.py [--calls N] [--repeats R]

Each thread runs N estimates of DeepSeek-V3 (TP 4, PP 4, EP 8, 128 GPUs) through mme.estimate;
the GIL is released while mme works and requests run concurrently, so on two free cores two
threads take about the time of one. Prints the median wall time over R repeats of: one thread
(N calls), two threads (N calls each, started together), and their ratio; and the CPU count and
load average, since the ratio only means something with two cores free. Not a test: speed is
measured here, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import mme

ARGS = dict(tp=4, pp=4, ep=8, num_gpus=128, num_layers_in_last_pipeline_stage=16)


def work(calls: int) -> None:
    for _ in range(calls):
        mme.estimate("deepseek-ai/DeepSeek-V3", **ARGS)


def timed(threads: int, calls: int) -> tuple[float, float]:
    """The wall time, and the process's CPU time over it (above 1: the threads ran at once)."""
    workers = [threading.Thread(target=work, args=(calls,)) for _ in range(threads)]
    start, cpu = time.perf_counter(), time.process_time()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - start
    return wall, (time.process_time() - cpu) / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    a = parser.parse_args()
    work(5)  # warm up: the schema, the registry, the model's config read once
    load = os.getloadavg()[0]
    one, two = [], []
    for _ in range(a.repeats):
        one.append(timed(1, a.calls))
        two.append(timed(2, a.calls))
    m1, m2 = statistics.median(w for w, _ in one), statistics.median(w for w, _ in two)
    c1, c2 = statistics.median(c for _, c in one), statistics.median(c for _, c in two)
    print(f"cpus {os.cpu_count()}, load average before {load:.2f}")
    print(f"one thread,  {a.calls} estimates:      median {m1:.3f} s ({1e3 * m1 / a.calls:.2f} ms each), "
          f"CPU/wall {c1:.2f}")
    print(f"two threads, {a.calls} estimates each: median {m2:.3f} s, CPU/wall {c2:.2f}")
    print(f"two threads / one thread: {m2 / m1:.2f} (1.00: perfectly parallel; 2.00: serialised)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
