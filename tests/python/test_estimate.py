"""mme.estimate gives exactly the document of `mme estimate ... --json`: a dense model, a MoE +
MLA model, Megatron-LM flags, a spec file, and every keyword of the setup schema."""

from __future__ import annotations

import json
import os
import warnings

import pytest

import mme
from conftest import SOURCE_DIR, run_cli

DEEPSEEK = ["deepseek-ai/DeepSeek-V3", "--tp", "4", "--pp", "4", "--ep", "8", "--num-gpus", "128",
            "--num-layers-in-last-pipeline-stage", "16"]


def test_dense_model_is_the_cli_document():
    r = mme.estimate("meta-llama/Meta-Llama-3-8B", tp=2, pp=2, num_gpus=16, micro_batch_size=2, seq_length=8192,
                     use_distributed_optimizer=True, sequence_parallel=True, recompute_granularity="selective")
    expected = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--tp", "2", "--pp", "2", "--num-gpus", "16",
                       "--micro-batch-size", "2", "--seq-length", "8192", "--use-distributed-optimizer",
                       "--sequence-parallel", "--recompute-granularity", "selective", "--json").json()
    assert r.to_dict() == expected
    assert isinstance(r, mme.Estimate)
    assert len(r.stages) == 2


def test_moe_mla_model_is_the_cli_document():
    r = mme.estimate("deepseek-ai/DeepSeek-V3", tp=4, pp=4, ep=8, num_gpus=128, num_layers_in_last_pipeline_stage=16)
    expected = run_cli("estimate", *DEEPSEEK, "--json").json()
    assert r.to_dict() == expected
    # Attribute access reads the same fields.
    assert r.peak.total_bytes == expected["peak"]["total_bytes"]
    assert r.peak.pp_rank == expected["peak"]["pp_rank"]
    assert [s.total_bytes for s in r.stages] == [s["total_bytes"] for s in expected["stages"]]
    assert r.stages[3].layers == expected["stages"][3]["layers"]
    assert r.model.name == "deepseek-ai/DeepSeek-V3"
    assert r.setup.ep == 8 and r["setup"]["tp"] == 4
    assert r.peak_stage.total_bytes == r.peak.total_bytes
    # The fit verdicts: by canonical name, by alias, as the CLI judged them.
    for f in expected["fits"]:
        assert r.fits(f["hardware"]) == f["fits"]
    h100 = next(f for f in expected["fits"] if f["hardware"] == "H100-SXM-80GB")
    assert r.fits("H100") == h100["fits"] and r.fits("h100-80gb") == h100["fits"]
    assert r.fit("H100").usable_bytes == h100["usable_bytes"]
    with pytest.raises(mme.UsageError, match="was not judged"):
        r.fits("NoSuchGPU")
    with pytest.raises(mme.UsageError, match="GPUs were judged"):
        r.fits()


def test_hybrid_model_is_the_cli_document():
    # Nemotron 3 Nano: Mamba-2, attention and MoE layers (the nemotron_h adapter, the hybrid blocks).
    r = mme.estimate("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", ep=8, pp=2, num_gpus=16)
    expected = run_cli("estimate", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "--ep", "8", "--pp", "2",
                       "--num-gpus", "16", "--json").json()
    assert r.to_dict() == expected
    assert r.model.total_params == 31_577_940_288


def test_one_gpu_judged():
    r = mme.estimate("deepseek-ai/DeepSeek-V3", tp=4, pp=4, ep=8, num_gpus=128, num_layers_in_last_pipeline_stage=16,
                     gpu="H200")
    expected = run_cli("estimate", *DEEPSEEK, "--gpu", "H200", "--json").json()
    assert r.to_dict() == expected
    assert r.fits() == expected["fits"][0]["fits"] == r.fits("H200")


MEGATRON_LINE = ("torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
                 "--group-query-attention --num-query-groups 8 --swiglu --normalization RMSNorm "
                 "--position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear "
                 "--seq-length 4096 --max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 256 "
                 "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --sequence-parallel --bf16 "
                 "--use-distributed-optimizer --vocab-size 128256 --overlap-grad-reduce "
                 "--lr 3e-4 --train-iters 1000")


def test_megatron_args_is_the_cli_document():
    r = mme.estimate(megatron_args=MEGATRON_LINE)
    expected = run_cli("estimate", "--megatron-args", MEGATRON_LINE, "--json").json()
    assert r.to_dict() == expected
    # A list of words is the same line.
    assert mme.estimate(megatron_args=MEGATRON_LINE.split()).to_dict() == expected
    # mme keywords override the launch line, as mme flags do.
    r = mme.estimate(megatron_args=MEGATRON_LINE, recompute_granularity="full", gpu="A100-80GB")
    expected = run_cli("estimate", "--megatron-args", MEGATRON_LINE, "--recompute-granularity", "full",
                       "--gpu", "A100-80GB", "--json").json()
    assert r.to_dict() == expected


def test_spec_file_is_the_cli_document(tmp_path):
    spec = tmp_path / "spec.yaml"
    init = run_cli("init", "Qwen/Qwen3-8B", "--tp", "2", "--pp", "2", "--num-gpus", "8")
    assert init.code == 0, init.err
    spec.write_text(init.out)
    r = mme.estimate(config=str(spec))
    assert r.to_dict() == run_cli("estimate", "--config", str(spec), "--json").json()
    assert mme.estimate(config=spec, micro_batch_size=2).to_dict() == run_cli(
        "estimate", "--config", str(spec), "--micro-batch-size", "2", "--json").json()


def test_local_config_and_output_files(tmp_path):
    config = os.path.join(SOURCE_DIR, "models", "Qwen--Qwen3-0.6B", "config.json")
    html, svg = tmp_path / "r.html", tmp_path / "r.svg"
    r = mme.estimate(config, headroom="10%", fit_on="estimate", overhead_per_gpu=2, html=html, svg=svg)
    expected = run_cli("estimate", config, "--headroom", "10%", "--fit-on", "estimate", "--overhead-per-gpu", "2",
                       "--json").json()
    assert r.to_dict() == expected
    assert html.read_text().startswith("<!DOCTYPE html>") and "<svg" in svg.read_text()


def _samples(entry: dict) -> list:
    """Values of the knob's kind: valid or not, the module must do what the CLI does with them."""
    knob, kind = entry["knob"], entry["kind"]
    if kind == "bool":
        return [True, False]
    if kind == "switch":
        return [True]
    if kind == "int":
        return [max(knob["min"], 1) + 1 if knob["max"] >= 2 else knob["min"]]
    if kind == "number":
        lo, hi = knob["lo"], knob["hi"]
        return [(lo + min(hi, lo + 1.0)) / 2]
    if kind == "enum":
        return [knob["values"][-1]]
    if kind == "modules":
        return ["core_attn"]
    if kind == "env":
        return [["NVTE_FLASH_ATTN=0"]]
    return ["x"]


def _cli_words(entry: dict, value) -> list[str]:
    """The CLI flags a keyword and value stand for, worked out from the schema entry."""
    knob, kind, flag = entry["knob"], entry["kind"], entry["flag"]
    if kind == "bool":
        if flag == knob["off_flag"]:  # the off switch by its own name
            return ["--" + flag] if value else []
        # The knob by its id or switch: True is the switch, False the off switch (either may be absent).
        chosen = knob["flag"] if value else knob["off_flag"]
        return ["--" + chosen] if chosen else []
    if kind == "switch":
        return ["--" + flag]
    if kind == "env":
        return [w for v in value for w in ("--" + flag, v)]
    return ["--" + flag, str(value)]


def test_every_setup_keyword_does_what_its_flag_does():
    keywords = mme.setup_keywords()
    # The schema's knobs are all there: each knob's flag (or id, for switches without one).
    for knob in mme.schema()["knobs"]:
        name = (knob["id"] if knob["kind"] == "bool" else knob["flag"]).replace("-", "_")
        assert name in keywords, name
    assert "num_layers_in_last_pipeline_stage" in keywords and "tensor_model_parallel_size" in keywords
    checked = 0
    for name, entry in keywords.items():
        # Two pipeline stages, so that the split knobs have something to split (not for pp itself).
        base = {} if entry["knob"]["id"] == "pp" else {"pp": 2}
        for value in _samples(entry):
            cli = run_cli("estimate", "Qwen/Qwen3-0.6B", *(["--pp", "2"] if base else []), *_cli_words(entry, value),
                          "--json")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    got = mme.estimate("Qwen/Qwen3-0.6B", **base, **{name: value})
                except mme.Error as e:
                    assert cli.code == e.exit_code, (name, value, cli.err, e)
                    assert cli.error_message() == e.message, name
                else:
                    assert cli.code == 0, (name, value, cli.err)
                    assert got.to_dict() == json.loads(cli.out), name
            # The CLI's warnings on stderr are the module's MmeWarnings.
            cli_warnings = [l[len("mme: warning: "):] for l in cli.err.splitlines() if l.startswith("mme: warning: ")]
            assert [str(w.message) for w in caught if w.category is mme.MmeWarning] == cli_warnings, name
            checked += 1
    assert checked > 60


def test_false_is_the_off_switch():
    r = mme.estimate(megatron_args=MEGATRON_LINE, sequence_parallel=False, use_distributed_optimizer=False)
    expected = run_cli("estimate", "--megatron-args", MEGATRON_LINE, "--no-sequence-parallel",
                       "--no-distributed-optimizer", "--json").json()
    assert r.to_dict() == expected
    assert r.setup.sequence_parallel is False and r.setup.distributed_optimizer is False


def test_unknown_keyword_is_a_usage_error_naming_it():
    with pytest.raises(mme.UsageError, match=r"estimate\(\): unknown keyword 'tpp'; did you mean 'tp'\?") as e:
        mme.estimate("Qwen/Qwen3-0.6B", tpp=2)
    assert e.value.exit_code == 2
    with pytest.raises(mme.UsageError, match="unknown keyword 'num_layers_in_last_stage'"):
        mme.estimate("Qwen/Qwen3-0.6B", num_layers_in_last_stage=2)
    with pytest.raises(mme.UsageError, match="takes True or False"):
        mme.estimate("Qwen/Qwen3-0.6B", sequence_parallel="yes")
    # Two spellings of one flag are the CLI's business: the same value is fine, two are not.
    assert mme.estimate("Qwen/Qwen3-0.6B", tp=2, tensor_model_parallel_size=2).setup.tp == 2
    cli = run_cli("estimate", "Qwen/Qwen3-0.6B", "--tp", "2", "--tensor-model-parallel-size", "4")
    with pytest.raises(mme.UsageError) as e:
        mme.estimate("Qwen/Qwen3-0.6B", tp=2, tensor_model_parallel_size=4)
    assert e.value.message == cli.error_message() and cli.code == 2
