#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/<target>/ from the project's own inputs.

    fuzz/seed_corpora.py        (re)writes the seed-* files; regress-* files are left alone

hf_config        every models/*/config.json
megatron_args    the flag columns of bench/accuracy/megatron_functional_test_memory.csv, one
                 launch line per distinct (model, test case) of the gpt and moe rows, and
                 launch scripts in the shapes of Megatron-LM's examples
pipeline_layout  layout strings (Megatron-LM's examples and edge cases) with their sizes line
cli_args         command lines, one argument per line (run in the sandbox of cli_args.cpp)
hardware_json    hardware profile files: the documented format, arrays, the edge cases
spec_file        every examples/specs/* spec file (YAML and JSON) and YAML alias edge cases
validate_csv     a --case pattern line, then the head of bench/accuracy's two CSV files (the
                 functional tests, the real runs) and rows with invalid measurements
memory_log       training logs: report_memory lines, scalars, Megatron-Bridge's GB figures and
                 measurements to refuse

Files named regress-* are inputs that once found a bug (docs/reliability.md); they are kept
by hand, never rewritten here.
"""
import csv
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"

META = {"model", "test_case", "golden", "n_iters", "max_alloc_GiB_max", "max_alloc_GiB_last",
        "alloc_GiB_median", "alloc_GiB_first", "nodes_gpus"}


def reset(target):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    for f in d.glob("seed-*"):
        f.unlink()
    return d


def hf_config():
    d = reset("hf_config")
    for cfg in sorted((ROOT / "models").glob("*/config.json")):
        (d / f"seed-{cfg.parent.name}.json").write_text(cfg.read_text())


def megatron_args():
    d = reset("megatron_args")
    seen = set()
    with open(ROOT / "bench" / "accuracy" / "megatron_functional_test_memory.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["model"] not in ("gpt", "moe") or (row["model"], row["test_case"]) in seen:
                continue
            seen.add((row["model"], row["test_case"]))
            words = []
            for col, value in row.items():
                if col in META or not value or value.lower() == "false":
                    continue
                words.append(f"--{col}" if value.lower() == "true" else f"--{col} {value}")
            (d / f"seed-{row['test_case']}.txt").write_text(" \\\n  ".join(words) + "\n")
    for name, text in LAUNCH_SCRIPTS.items():
        (d / name).write_text(text)


LAYOUTS = {
    # PP VPP LAYERS MTP MICROBATCHES FIRST LAST FLAGS, then the layout
    "deepseek-v3": "16 1 0\nEt*3|(tt|)*29m|L",
    "issue-example": "4 1 0\nEt*3|(tt|)*6mL",
    "interleaved": "2 2 0\nEtt|tt|tt|ttL",
    "empty-stages": "4 1 0\nE|t|t|tL",
    "spaces-commas": "2 1 0\nE, t, t | t, t, L",
    "nested": "2 1 0\n((t)*2)*2|((t)*2)*2L",
    "no-layout-even": "4 2 32 0 16\n",
    "no-layout-uneven": "4 1 30 0 8 6 8\n",
    "no-layout-accounting": "8 1 62 1 0 -1 -1 3\n",
    "mtp-first": "2 1 0\nEm|tL",
}

COMMANDS = {
    "estimate-file": ["estimate", "cfg.json", "--tp", "2", "--pp", "2", "--json"],
    "estimate-moe": ["estimate", "moe.json", "--ep", "4", "--pp", "2", "--num-gpus", "8", "--verbose"],
    "estimate-bundled": ["estimate", "tiny/llama", "--recompute-granularity", "full", "--gpu", "H100"],
    "estimate-cached": ["estimate", "cache/tiny", "--seq-length", "8192", "--micro-batch-size", "2"],
    "estimate-folder": ["estimate", "model", "--html", "out.html", "--svg", "out.svg"],
    "estimate-emptydir": ["estimate", "emptydir", "--json"],
    "estimate-empty": ["estimate", "empty.json"],
    "estimate-array": ["estimate", "array.json", "--json"],
    "estimate-megatron": ["estimate", "--megatron-args-file", "args.txt", "--json"],
    "estimate-megatron-inline": ["estimate", "--megatron-args",
                                 "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128"],
    "estimate-spec": ["estimate", "--config", "spec.yaml", "--dump-config"],
    "estimate-layout": ["estimate", "cfg.json", "--pp", "2", "--pipeline-layout", "Et|ttt|L", "--num-gpus", "2"],
    "estimate-hardware": ["estimate", "cfg.json", "--hardware-file", "hw.json", "--gpu", "x1"],
    "estimate-bad-tp": ["estimate", "cfg.json", "--tp", "0"],
    "estimate-unknown-flag": ["estimate", "cfg.json", "--bogus"],
    "estimate-unknown-gpu": ["estimate", "cfg.json", "--gpu", "NOPE"],
    "estimate-offline": ["estimate", "org/unknown"],
    "params": ["params", "moe.json", "--json"],
    "plan": ["plan", "cfg.json", "--num-gpus", "8", "--top", "3"],
    "plan-csv": ["plan", "moe.json", "--num-gpus", "16", "--csv", "--gpu", "A100-SXM-40GB"],
    "plan-zero": ["plan", "cfg.json", "--num-gpus", "0"],
    "plan-huge": ["plan", "cfg.json", "--num-gpus", "1099511627776"],
    "init": ["init", "cfg.json", "--tp", "2"],
    "models": ["models", "--json"],
    "hardware": ["hardware", "--hardware-file", "hw.json"],
    "plugins": ["plugins", "--plugin-dir", "plugins", "--json"],
    "validate": ["validate", "cases.csv", "--golden", "h100", "--show-skipped"],
    "version": ["version"],
    "help": ["help", "estimate"],
}

HARDWARE = {
    "documented": {"name": "ACME-X1", "memory_gib": 96, "aliases": ["x1"], "reserved_gib": 1.5,
                   "hbm_bandwidth_gbps": 3000, "bf16_tflops": 800, "fp8_tflops": 1600,
                   "link_bandwidth_gbps": 600, "vendor": "ACME", "architecture": "hopper",
                   "source": "ACME X1 datasheet"},
    "minimal": {"name": "ACME-Mini-8GB", "memory_gib": 8},
    "array": [{"name": "ACME-X1-96GB", "memory_gib": 96, "aliases": ["x1"], "reserved_gib": 2},
              {"name": "ACME-Mini-8GB", "memory_gib": 8, "_comment": "ignored"}],
    "builtin-clash": {"name": "H100", "memory_gib": 80},
    "alias-repeat": [{"name": "A", "memory_gib": 1, "aliases": ["b"]}, {"name": "B", "memory_gib": 2}],
    "reserved-too-large": {"name": "Tiny", "memory_gib": 1, "reserved_gib": 2},
    "bytes-not-gib": {"name": "Huge", "memory_gib": 85899345920},
}


def pipeline_layout():
    d = reset("pipeline_layout")
    for name, text in LAYOUTS.items():
        (d / f"seed-{name}.txt").write_text(text)


def cli_args():
    d = reset("cli_args")
    for name, argv in COMMANDS.items():
        (d / f"seed-{name}.txt").write_text("\n".join(argv))


def hardware_json():
    d = reset("hardware_json")
    for name, doc in HARDWARE.items():
        (d / f"seed-{name}.json").write_text(json.dumps(doc, indent=1) + "\n")


SPEC_EDGES = {
    "anchors.yaml": "parallelism: &p\n  tensor_model_parallel_size: 1\n  pipeline_model_parallel_size: 1\n"
                    "model:\n  name: tiny\n  num_layers: 2\n  hidden_size: 256\n  num_attention_heads: 8\n"
                    "  ffn_hidden_size: 1024\n  vocab_size: 1000\ntraining:\n  micro_batch_size: 1\n"
                    "  seq_length: 1024\ninfrastructure:\n  world_size: 1\n",
    "flow.json": '{"model": {"name": "tiny", "num_layers": 2, "hidden_size": 256, "num_attention_heads": 8, '
                 '"ffn_hidden_size": 1024, "vocab_size": 1000}, "parallelism": {"tensor_model_parallel_size": 1, '
                 '"pipeline_model_parallel_size": 1}, "training": {"micro_batch_size": 1, "seq_length": 1024}, '
                 '"infrastructure": {"world_size": 1}}\n',
}


def spec_file():
    d = reset("spec_file")
    for f in sorted((ROOT / "examples" / "specs").iterdir()):
        (d / f"seed-{f.name}").write_text(f.read_text())
    for name, text in SPEC_EDGES.items():
        (d / f"seed-{name}").write_text(text)


def validate_csv():
    d = reset("validate_csv")
    for name, pattern, rows in (("functional", "", 6), ("functional-filter", "^gpt3_.*tp2", 12)):
        with open(ROOT / "bench" / "accuracy" / "megatron_functional_test_memory.csv", newline="") as f:
            lines = f.read().splitlines(keepends=True)
        head = [lines[0]] + [l for l in lines[1:] if l.startswith(("gpt,", "moe,"))][:rows]
        (d / f"seed-{name}.txt").write_text(pattern + "\n" + "".join(head))
    with open(ROOT / "bench" / "accuracy" / "real_runs.csv", newline="") as f:
        lines = f.read().splitlines(keepends=True)
    (d / "seed-real-runs.txt").write_text("\n" + "".join(lines[:4]))
    header = ("model,test_case,golden,max_alloc_GiB_max,alloc_GiB_median,nodes_gpus,num-layers,hidden-size,"
              "num-attention-heads,seq-length,max-position-embeddings,micro-batch-size,vocab-size,tokenizer-type\n")
    row = "gpt,{},dgx_h100,{},1.5,{},4,256,8,1024,4096,1,1000,NullTokenizer\n"
    (d / "seed-invalid-measurements.txt").write_text(
        "(\\w+)+\n" + header + row.format("ok", "2.5", "dgx_h100:1x8") + row.format("nan", "nan", "dgx_h100:1x8")
        + row.format("zero", "0", "dgx_h100:1x8") + row.format("big", "2.5", "dgx_h100:4611686018427387906x4")
        + row.format("comma", '"56,335"', "dgx_h100:1x8") + row.format("suffix", "56.335abc", "dgx_h100:1x8")
        + row.format("denormal", "1e-310", "dgx_h100:1x8") + row.format("inf", "inf", "dgx_h100:1x8")
        + row.format("nodes", "2.5", "dgx_h100:1x8abc"))


# Training logs: report_memory lines of several ranks and iterations (a checkpoint report
# among them), scalars in bytes, Megatron-Bridge's GB figures, and measurements to refuse.
MEMORY_LOGS = {
    "seed-report-memory.txt": " iteration        1/      10 | consumed samples: 8 | lm loss: 1.0E+01\n[Rank 0] (after 1 iterations) memory (MB) | allocated: 1024.00 | max allocated: 2048.50 | reserved: 3000.00 | max reserved: 3000.00\n[Rank 6] (after 1 iterations) memory (MB) | allocated: 1024.00 | max allocated: 2048.50 | reserved: 3000.00 | max reserved: 3000.00\n[Rank 0] (after 2 iterations) memory (MB) | allocated: 1500.00 | max allocated: 2600.00 | reserved: 3000.00 | max reserved: 3100.00 | total device memory used: 4000.00\n[Rank 0] (before save_checkpoint for iteration 2) memory (MB) | allocated: 1500.00 | max allocated: 2600.00 | reserved: 3000.00 | max reserved: 3100.00\n",
    "seed-scalars-and-bridge.txt": "mem-max-allocated-bytes: 21474836480\n{'lm loss': 2.5, 'mem-allocated-bytes': 1073741824.0, 'mem-max-allocated-bytes': 3.2212254720e+10, 'mem-reserved-bytes': 34359738368}\n [2026-05-01 10:00:00] iteration       40/     100 | lm loss: 2.1 | mem-allocated-gigabytes: 47.2 | mem-max-allocated-gigabytes: 52.5 | mem-reserved-gigabytes: 60\nstep 5: mem_max_allocated_gb=12.5 mem_allocated_gb=10\n",
    "seed-refused.txt": "[Rank 1] (after 2 iterations) memory (MB) | allocated: 0.00 | max allocated: 0.00\n[Rank 2] (after 2 iterations) memory (MB) | allocated: 1 | max allocated: 12x4\nmem-max-allocated-bytes: nan\nmem-max-allocated-bytes: -5\n[Rank 3] (after 2 iterations) memory (MB) | allocated: 500 | max allocated: 200\n[Rank x] (after 2 iterations) memory (MB) | allocated: 1 | max allocated: 2\nmem-max-allocated-bytes: 1e-310\nmem-max-allocated-bytes: 1e999\n[Rank 99999999999999999999] (after 2 iterations) memory (MB) | allocated: 1 | max allocated: 2\n[Rank 2] (after 3 iterations) memory (MB) | allocated: 1 | max allocated: 2 | reserved: 0.5\n"
}


def memory_log():
    d = reset("memory_log")
    for name, text in MEMORY_LOGS.items():
        (d / name).write_text(text)


# Launch scripts in the shapes of Megatron-LM's examples (docs/cli.md, "Launch scripts").
LAUNCH_SCRIPTS = {
    "seed-script-arrays.sh": "#!/bin/bash\nGPUS_PER_NODE=8\nNUM_NODES=${NUM_NODES:-1}\nWORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))\nCHECKPOINT_PATH=${1:-\"checkpoints/x\"}\nDISTRIBUTED_ARGS=(\n    --nproc_per_node $GPUS_PER_NODE   # per node\n    --nnodes $NUM_NODES\n)\nMODEL_ARGS=(\n    --num-layers 4 --hidden-size 256 --num-attention-heads 8\n    --seq-length 512 --max-position-embeddings 512 --swiglu\n)\nTRAINING_ARGS=(--micro-batch-size 1 --global-batch-size 16 --tokenizer-type NullTokenizer --vocab-size 1000)\nif [[ \"${DTYPE:-bf16}\" == \"bf16\" ]]; then TRAINING_ARGS+=(--bf16); else TRAINING_ARGS+=(\"--fp8-format hybrid\"); fi\ncase \"$WORLD_SIZE\" in 8) TP=2 ;; *) TP=1 ;; esac\ntorchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \"${MODEL_ARGS[@]}\" ${TRAINING_ARGS[@]} \\\n    --tensor-model-parallel-size $TP --save $CHECKPOINT_PATH\n",
    "seed-script-sbatch.sh": "ARGS=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --moe-layer-freq [0]*1+[1]*1 --num-experts 4)\nCMD=\"cd /w; python /opt/pretrain_gpt.py ${ARGS[@]}\"\nsbatch <<EOF\n#!/bin/bash\nsrun --mpi=pmix -l bash -x -c \"${CMD}\" 2>&1 | tee \\${SLURM_JOB_ID}.log\nEOF\n",
    "seed-script-loops.sh": "f() { A+=(\"$@\"); }\nfor x in 1 2 3; do f --x$x; done\ni=0; while (( i < 3 )); do i=$((i+1)); done\nset -- --num-layers $i\neval \"python pretrain_gpt.py $* --hidden-size ${#A[@]}0 --num-attention-heads 2\"\n"
}


if __name__ == "__main__":
    hf_config()
    megatron_args()
    pipeline_layout()
    cli_args()
    hardware_json()
    spec_file()
    validate_csv()
    memory_log()
    for d in sorted(CORPUS.iterdir()):
        files = list(d.iterdir())
        print(f"{d.name}: {len(files)} files, {sum(f.stat().st_size for f in files)} bytes")
