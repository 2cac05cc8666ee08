"""The other commands as the CLI prints them (plan, params, models, hardware, validate), plugin
folders and hardware files, log lines as warnings, results as plain data (pickling, a
2-process multiprocessing sweep), the GIL released during a plan, the type stub."""

from __future__ import annotations

import ast
import json
import multiprocessing
import os
import pickle
import subprocess
import sys
import threading
import time
import warnings

import pytest

import mme
from conftest import PLUGIN_DIR, SOURCE_DIR, run_cli


def test_params_models_hardware_are_the_cli_documents():
    assert mme.params("deepseek-ai/DeepSeek-V3").to_dict() == run_cli(
        "params", "deepseek-ai/DeepSeek-V3", "--json").json()
    assert [m.to_dict() for m in mme.models()] == run_cli("models", "--json").json()["models"]
    hw = mme.hardware()
    assert [h.to_dict() for h in hw] == run_cli("hardware", "--json").json()["hardware"]
    assert any(h.name == "H100-SXM-80GB" for h in hw)


def _without_time(plan: dict) -> dict:
    # elapsed_s is the search's wall time, the one field two runs do not share.
    assert plan["elapsed_s"] >= 0
    return {k: v for k, v in plan.items() if k != "elapsed_s"}


def test_plan_is_the_cli_document():
    # One search thread on both sides: with more, how many layouts get a full estimate before the
    # bound prunes them ("estimated") depends on the threads' timing; the plans do not.
    p = mme.plan("Qwen/Qwen3-8B", num_gpus=16, gpu="H100", top=5, threads=1)
    expected = run_cli("plan", "Qwen/Qwen3-8B", "--num-gpus", "16", "--gpu", "H100", "--top", "5", "--threads", "1",
                       "--json").json()
    assert isinstance(p, mme.Plan)
    assert _without_time(p.to_dict()) == _without_time(expected)
    assert p.plans[0].to_dict() == expected["plans"][0] and p.gpu == "H100-SXM-80GB"
    # Every thread: the same plans.
    assert mme.plan("Qwen/Qwen3-8B", num_gpus=16, gpu="H100", top=5).to_dict()["plans"] == expected["plans"]
    # A fixed knob and the planner's own options.
    p = mme.plan("deepseek-ai/DeepSeek-V3", num_gpus=256, gpu="H200", tp=4, recompute="full", sort="peak", top=3,
                 threads=1)
    assert _without_time(p.to_dict()) == _without_time(
        run_cli("plan", "deepseek-ai/DeepSeek-V3", "--num-gpus", "256", "--gpu", "H200", "--tp", "4", "--recompute",
                "full", "--sort", "peak", "--top", "3", "--threads", "1", "--json").json())


def test_plan_without_gpu_warns_as_the_cli_does():
    cli = run_cli("plan", "Qwen/Qwen3-0.6B", "--num-gpus", "8", "--top", "2", "--threads", "1", "--json")
    with pytest.warns(mme.MmeWarning, match="no --gpu: planning for") as record:
        p = mme.plan("Qwen/Qwen3-0.6B", num_gpus=8, top=2, threads=1)
    assert _without_time(p.to_dict()) == _without_time(cli.json())
    cli_warning = [l for l in cli.err.splitlines() if l.startswith("mme: warning: ")]
    assert [str(w.message) for w in record] == [l[len("mme: warning: "):] for l in cli_warning]


def test_validate_is_the_cli_document():
    csv = os.path.join(SOURCE_DIR, "bench", "accuracy", "megatron_functional_test_memory.csv")
    got = mme.validate(csv, golden="dgx_h100", case="gpt3_mcore_te_tp2_pp2")
    assert got.to_dict() == run_cli("validate", csv, "--golden", "dgx_h100", "--case", "gpt3_mcore_te_tp2_pp2",
                                    "--json").json()
    assert got.format == "functional_test"
    real = os.path.join(SOURCE_DIR, "bench", "accuracy", "real_runs.csv")
    assert mme.validate(real).to_dict() == run_cli("validate", real, "--json").json()


def test_validate_from_log_is_the_cli_document(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("[Rank 0] (after 10 iterations) memory (MB) | allocated: 30000.0 | max allocated: 52000.5 | "
                   "reserved: 60000.0 | max reserved: 60000.0\n"
                   "[Rank 7] (after 10 iterations) memory (MB) | allocated: 28000.0 | max allocated: 50000.0 | "
                   "reserved: 58000.0 | max reserved: 58000.0\n")
    got = mme.validate(from_log=log, model="meta-llama/Meta-Llama-3-8B", tp=2, pp=2, num_gpus=8)
    assert got.to_dict() == run_cli("validate", "--from-log", str(log), "meta-llama/Meta-Llama-3-8B", "--tp", "2",
                                    "--pp", "2", "--num-gpus", "8", "--json").json()
    assert got.format == "log" and len(got.ranks) == 2


def test_plugin_dirs_load_an_out_of_tree_plugin():
    hw = mme.hardware(plugin_dirs=[PLUGIN_DIR])
    assert [h.to_dict() for h in hw] == run_cli("hardware", "--plugin-dir", PLUGIN_DIR, "--json").json()["hardware"]
    assert "PyTest-GPU-48GB" in [h.name for h in hw]
    # Without the folder the plugin is not there: nothing is loaded beside the interpreter.
    assert "PyTest-GPU-48GB" not in [h.name for h in mme.hardware()]
    r = mme.estimate("Qwen/Qwen3-8B", tp=2, gpu="pytest-gpu", plugin_dirs=[PLUGIN_DIR])
    assert r.to_dict() == run_cli("estimate", "Qwen/Qwen3-8B", "--tp", "2", "--gpu", "pytest-gpu", "--plugin-dir",
                                  PLUGIN_DIR, "--json").json()
    assert r.fit().hardware == "PyTest-GPU-48GB"


def test_hardware_files_last_one_request(tmp_path):
    gpu = tmp_path / "lab.json"
    gpu.write_text(json.dumps({"name": "Lab-X1", "memory_gib": 24, "aliases": ["x1"], "reserved_gib": 1,
                               "hbm_bandwidth_gbps": 1000, "bf16_tflops": 100, "architecture": "hopper"}))
    r = mme.estimate("Qwen/Qwen3-0.6B", gpu="x1", hardware_files=[gpu])
    assert r.to_dict() == run_cli("estimate", "Qwen/Qwen3-0.6B", "--gpu", "x1", "--hardware-file", str(gpu),
                                  "--json").json()
    # The file was for that request only (MME_HARDWARE_FILES is put back).
    assert "Lab-X1" not in [h.name for h in mme.hardware()]



def test_results_are_plain_data():
    r = mme.estimate("deepseek-ai/DeepSeek-V3", tp=4, pp=4, ep=8, num_gpus=128, num_layers_in_last_pipeline_stage=16)
    again = pickle.loads(pickle.dumps(r))
    assert type(again) is mme.Estimate and again == r and again.to_dict() == r.to_dict()
    assert again.peak.total_bytes == r.peak.total_bytes
    d = r.to_dict()
    d["peak"]["total_bytes"] = -1  # a copy: the result does not change
    assert r.peak.total_bytes > 0
    with pytest.raises(AttributeError, match="no field 'nope'"):
        r.nope
    with pytest.raises(AttributeError, match="read-only"):
        r.peak = 1


def _peak_of(tp: int) -> tuple[int, int]:
    r = mme.estimate("meta-llama/Meta-Llama-3-70B", tp=tp, pp=4, num_gpus=64)
    return tp, r.peak.total_bytes


def test_multiprocessing_sweep_with_two_processes():
    # (map_async(...).get(timeout): a worker that died would leave a plain map() waiting forever.)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        got = dict(pool.map_async(_peak_of, [1, 2, 4, 8]).get(timeout=300))
    assert got == dict(_peak_of(tp) for tp in [1, 2, 4, 8])
    for tp, peak in got.items():
        assert peak == run_cli("estimate", "meta-llama/Meta-Llama-3-70B", "--tp", str(tp), "--pp", "4", "--num-gpus",
                               "64", "--json").json()["peak"]["total_bytes"]
    # Errors come back from a worker with their class and exit code.
    with multiprocessing.get_context("fork").Pool(2) as pool:
        with pytest.raises(mme.LayoutError):
            pool.map_async(_peak_of, [3]).get(timeout=300)


def test_the_gil_is_released_during_a_plan():
    ticks = 0
    done = threading.Event()

    def plan():
        try:
            mme.plan("deepseek-ai/DeepSeek-V3", num_gpus=256, gpu="H100", threads=1, top=1)
        finally:
            done.set()

    start = time.perf_counter()
    t = threading.Thread(target=plan)
    t.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    elapsed = time.perf_counter() - start
    # The main thread kept running while the plan searched (a held GIL would leave it at 0-1).
    assert elapsed > 0.05, "the plan was too quick to tell"
    assert ticks >= 10, (ticks, elapsed)


def test_log_lines_become_warnings():
    line = "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 --max-position-embeddings 512 " \
           "--micro-batch-size 1 --vocab-size 1000 --enable-experimental"  # Megatron-LM's, effect unknown to mme
    cli = run_cli("estimate", "--megatron-args", line, "--json")
    cli_warnings = [l[len("mme: warning: "):] for l in cli.err.splitlines() if l.startswith("mme: warning: ")]
    assert cli_warnings, cli.err
    # In a fresh interpreter: the CLI warns about such flags once per process.
    code = ("import json, sys, warnings, mme\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            f"    r = mme.estimate(megatron_args={line!r})\n"
            "print(json.dumps({'doc': r.to_dict(), 'warnings': [str(x.message) for x in w],\n"
            "                  'categories': [x.category.__name__ for x in w]}))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = json.loads(p.stdout)
    assert out["doc"] == cli.json()
    assert out["warnings"] == cli_warnings and set(out["categories"]) == {"MmeWarning"}
    assert p.stderr == ""  # nothing printed behind Python's back


def test_stub_lists_every_keyword():
    stub = os.path.join(os.path.dirname(mme.__file__), "__init__.pyi")
    tree = ast.parse(open(stub).read())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in ("estimate", "plan", "params", "models", "hardware", "validate", "from_megatron_args", "preflight"):
        assert name in functions, name
        assert getattr(mme, name).__doc__, name
    keywords = {a.arg for a in functions["estimate"].args.kwonlyargs}
    assert set(mme.setup_keywords()) <= keywords
    assert {"gpu", "megatron_args", "config", "hardware_files", "plugin_dirs"} <= keywords
    assert set(mme.setup_keywords()) <= {a.arg for a in functions["plan"].args.kwonlyargs}


def test_import_from_the_build_tree_in_a_fresh_interpreter(tmp_path):
    p = subprocess.run([sys.executable, "-c", "import mme; print(mme.__version__, mme.__file__)"],
                       capture_output=True, text=True, cwd=tmp_path, check=True)
    version, path = p.stdout.split()
    assert version == run_cli("version").out.split()[1]
    assert path.endswith(os.path.join("stage", "python", "mme", "__init__.py"))
